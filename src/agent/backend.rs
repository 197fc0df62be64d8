//! The two continuous-profiling backends a profile is pushed to, and the
//! request each takes. Both take the raw gzip'd pprof and a set of series
//! labels; they differ in the envelope:
//! - **Parca**: `POST /api/profiles/writeraw`, the JSON form of
//!   `WriteRawRequest` (its gRPC gateway), the profile in base64.
//! - **Grafana Pyroscope**: `POST /push.v1.PusherService/Push` (Connect
//!   over HTTP/1.1), the `PushRequest` protobuf.
//!
//! Which one a URL means: `--backend`, else the endpoint's path if given,
//! else the port each listens on by default (4040 Pyroscope, else Parca).

use prost::Message;
use serde::Serialize;

/// Where profiles go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Parca,
    Pyroscope,
}

pub const PARCA_PATH: &str = "/api/profiles/writeraw";
pub const PYROSCOPE_PATH: &str = "/push.v1.PusherService/Push";
/// Pyroscope's default HTTP port.
const PYROSCOPE_PORT: u16 = 4040;

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Parca => "parca",
            Kind::Pyroscope => "pyroscope",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "parca" => Some(Kind::Parca),
            "pyroscope" => Some(Kind::Pyroscope),
            _ => None,
        }
    }
}

/// A backend at a URL.
#[derive(Clone, Debug, PartialEq)]
pub struct Backend {
    pub kind: Kind,
    /// The endpoint profiles are posted to.
    pub endpoint: String,
    /// `X-Scope-OrgID`, for a multi-tenant Pyroscope.
    pub tenant: Option<String>,
}

/// The port of an `http(s)://host[:port]/...` URL (the scheme's default
/// when none is written).
fn port_of(authority: &str, https: bool) -> Option<u16> {
    let host_port = authority.rsplit('@').next()?;
    // [v6]:port or host:port
    let after_host = match host_port.strip_prefix('[') {
        Some(rest) => rest.split_once(']')?.1,
        None => host_port.find(':').map_or("", |i| &host_port[i..]),
    };
    match after_host.strip_prefix(':') {
        Some(p) => p.parse().ok(),
        None if after_host.is_empty() => Some(if https { 443 } else { 80 }),
        None => None,
    }
}

impl Backend {
    /// The backend at `url`, of `kind` if one is named. Errors say what is
    /// wrong with the URL.
    pub fn at(url: &str, kind: Option<Kind>, tenant: Option<String>) -> Result<Backend, String> {
        let (https, rest) = if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else {
            return Err(format!(
                "{url:?}: the URL must start with http:// or https://"
            ));
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if authority.is_empty() {
            return Err(format!("{url:?}: no host in the URL"));
        }
        let port = port_of(authority, https).ok_or_else(|| format!("{url:?}: bad port"))?;
        let path = path.trim_end_matches('/');
        let by_path = if path.ends_with(PARCA_PATH) {
            Some(Kind::Parca)
        } else if path.ends_with(PYROSCOPE_PATH) {
            Some(Kind::Pyroscope)
        } else {
            None
        };
        let kind = match (kind, by_path) {
            (Some(k), Some(p)) if k != p => {
                return Err(format!(
                    "{url:?} is a {} endpoint, not {}",
                    p.name(),
                    k.name()
                ));
            }
            (Some(k), _) | (None, Some(k)) => k,
            (None, None) if port == PYROSCOPE_PORT => Kind::Pyroscope,
            (None, None) => Kind::Parca,
        };
        let endpoint = match by_path {
            Some(_) => format!(
                "{}{}",
                &url[..url.len() - rest.len()],
                &rest[..authority.len() + path.len()]
            ),
            None => {
                let base = &url[..url.len() - rest.len() + authority.len() + path.len()];
                match kind {
                    Kind::Parca => format!("{base}{PARCA_PATH}"),
                    Kind::Pyroscope => format!("{base}{PYROSCOPE_PATH}"),
                }
            }
        };
        Ok(Backend {
            kind,
            endpoint,
            tenant,
        })
    }

    /// The request that pushes one gzip'd profile with its series labels.
    pub fn request(&self, labels: &[(String, String)], gz_profile: &[u8]) -> Request {
        let mut headers = vec![];
        if let Some(t) = &self.tenant {
            headers.push(("X-Scope-OrgID".to_string(), t.clone()));
        }
        let (content_type, body) = match self.kind {
            Kind::Parca => ("application/json", parca_body(labels, gz_profile)),
            Kind::Pyroscope => {
                headers.push(("Connect-Protocol-Version".to_string(), "1".to_string()));
                ("application/proto", pyroscope_body(labels, gz_profile))
            }
        };
        Request {
            url: self.endpoint.clone(),
            content_type,
            headers,
            body,
        }
    }
}

/// One HTTP POST.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub url: String,
    pub content_type: &'static str,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

#[derive(Serialize)]
struct ParcaLabel<'a> {
    name: &'a str,
    value: &'a str,
}

#[derive(Serialize)]
struct ParcaLabelSet<'a> {
    labels: Vec<ParcaLabel<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ParcaSample {
    raw_profile: String,
}

#[derive(Serialize)]
struct ParcaSeries<'a> {
    labels: ParcaLabelSet<'a>,
    samples: Vec<ParcaSample>,
}

#[derive(Serialize)]
struct ParcaWriteRaw<'a> {
    series: Vec<ParcaSeries<'a>>,
}

/// `WriteRawRequest` as the gateway's JSON (proto3 JSON: bytes in base64).
fn parca_body(labels: &[(String, String)], gz: &[u8]) -> Vec<u8> {
    let req = ParcaWriteRaw {
        series: vec![ParcaSeries {
            labels: ParcaLabelSet {
                labels: labels
                    .iter()
                    .map(|(name, value)| ParcaLabel { name, value })
                    .collect(),
            },
            samples: vec![ParcaSample {
                raw_profile: super::base64::encode(gz),
            }],
        }],
    };
    serde_json::to_vec(&req).expect("plain structs serialize")
}

/// Pyroscope's push API (`api/push/v1/push.proto`, `api/types/v1`).
pub mod pyroscope_proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PushRequest {
        #[prost(message, repeated, tag = "1")]
        pub series: Vec<RawProfileSeries>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct RawProfileSeries {
        #[prost(message, repeated, tag = "1")]
        pub labels: Vec<LabelPair>,
        #[prost(message, repeated, tag = "2")]
        pub samples: Vec<RawSample>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct LabelPair {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub value: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct RawSample {
        #[prost(bytes = "vec", tag = "1")]
        pub raw_profile: Vec<u8>,
        /// A unique id, for the server to drop a repeated push.
        #[prost(string, tag = "2")]
        pub id: String,
    }
}

fn pyroscope_body(labels: &[(String, String)], gz: &[u8]) -> Vec<u8> {
    use pyroscope_proto::*;
    PushRequest {
        series: vec![RawProfileSeries {
            labels: labels
                .iter()
                .map(|(name, value)| LabelPair {
                    name: name.clone(),
                    value: value.clone(),
                })
                .collect(),
            samples: vec![RawSample {
                raw_profile: gz.to_vec(),
                id: String::new(),
            }],
        }],
    }
    .encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(url: &str) -> Backend {
        Backend::at(url, None, None).unwrap()
    }

    #[test]
    fn the_url_names_the_backend_by_path_then_port() {
        let b = at("http://127.0.0.1:7070");
        assert_eq!(b.kind, Kind::Parca);
        assert_eq!(b.endpoint, "http://127.0.0.1:7070/api/profiles/writeraw");
        let b = at("http://pyro.local:4040/");
        assert_eq!(b.kind, Kind::Pyroscope);
        assert_eq!(
            b.endpoint,
            "http://pyro.local:4040/push.v1.PusherService/Push"
        );
        let b = at("https://p.example/prefix/push.v1.PusherService/Push");
        assert_eq!(b.kind, Kind::Pyroscope);
        assert_eq!(
            b.endpoint,
            "https://p.example/prefix/push.v1.PusherService/Push"
        );
        let b = at("http://[::1]:4040");
        assert_eq!(b.kind, Kind::Pyroscope);
        assert_eq!(at("https://parca.example").kind, Kind::Parca);
        let b = Backend::at("http://h:9000/base", Some(Kind::Pyroscope), None).unwrap();
        assert_eq!(b.endpoint, "http://h:9000/base/push.v1.PusherService/Push");
    }

    #[test]
    fn bad_urls_are_refused_with_the_reason() {
        for (url, why) in [
            ("127.0.0.1:7070", "must start with http"),
            ("http://", "no host"),
            ("http://h:port", "bad port"),
            ("http://h:99999", "bad port"),
        ] {
            let e = Backend::at(url, None, None).unwrap_err();
            assert!(e.contains(why), "{url}: {e}");
        }
        let e = Backend::at(
            "http://h:7070/api/profiles/writeraw",
            Some(Kind::Pyroscope),
            None,
        )
        .unwrap_err();
        assert!(e.contains("parca endpoint"), "{e}");
    }

    fn labels() -> Vec<(String, String)> {
        vec![
            ("__name__".into(), "kerntax".into()),
            ("service_name".into(), "lab".into()),
        ]
    }

    #[test]
    fn parca_gets_write_raw_json_with_the_profile_in_base64() {
        let r = at("http://h:7070").request(&labels(), b"\x1f\x8b\x08");
        assert_eq!(r.content_type, "application/json");
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        let series = &v["series"][0];
        assert_eq!(series["labels"]["labels"][1]["name"], "service_name");
        assert_eq!(series["labels"]["labels"][1]["value"], "lab");
        assert_eq!(series["samples"][0]["rawProfile"], "H4sI");
    }

    #[test]
    fn pyroscope_gets_a_push_request_protobuf_and_the_tenant() {
        let b = Backend::at("http://h:4040", None, Some("team-a".into())).unwrap();
        let r = b.request(&labels(), b"gz");
        assert_eq!(r.content_type, "application/proto");
        assert!(
            r.headers
                .contains(&("X-Scope-OrgID".into(), "team-a".into()))
        );
        assert!(
            r.headers
                .contains(&("Connect-Protocol-Version".into(), "1".into()))
        );
        let p = pyroscope_proto::PushRequest::decode(&r.body[..]).unwrap();
        assert_eq!(p.series.len(), 1);
        assert_eq!(p.series[0].labels[0].name, "__name__");
        assert_eq!(p.series[0].samples[0].raw_profile, b"gz");
    }
}
