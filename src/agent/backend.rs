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

use super::wire;

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
    /// An `Authorization` header's value, from the URL's user.
    pub basic_auth: Option<String>,
}

/// `url` with any password replaced, for messages.
fn redact(url: &str) -> String {
    let Some(at) = url.find('@') else {
        return url.to_string();
    };
    let start = url.find("://").map_or(0, |i| i + 3);
    match url[start..at].find(':') {
        Some(colon) => format!("{}:***{}", &url[..start + colon], &url[at..]),
        None => url.to_string(),
    }
}

/// `%XX` escapes of a URL's user or password decoded (others kept).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (b[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The port of a URL's `host[:port]` (the scheme's default when none is
/// written).
fn port_of(host_port: &str, https: bool) -> Option<u16> {
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
    /// The backend at `url`, of `kind` if one is named. A user in the URL
    /// (`https://USER:PASSWORD@host/`, or `USER@host` with the password in
    /// `password`) is sent as HTTP basic auth, as Grafana Cloud's
    /// Pyroscope takes it. Errors say what is wrong with the URL (never
    /// its password).
    pub fn at(
        url: &str,
        kind: Option<Kind>,
        tenant: Option<String>,
        password: Option<&str>,
    ) -> Result<Backend, String> {
        let (scheme, https) = if url.starts_with("http://") {
            ("http://", false)
        } else if url.starts_with("https://") {
            ("https://", true)
        } else {
            return Err(format!(
                "{:?}: the URL must start with http:// or https://",
                redact(url)
            ));
        };
        let rest = &url[scheme.len()..];
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (userinfo, host) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let shown = format!("{scheme}{host}{path}");
        if host.is_empty() {
            return Err(format!("{shown:?}: no host in the URL"));
        }
        let port = port_of(host, https).ok_or_else(|| format!("{shown:?}: bad port"))?;
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
                    "{shown:?} is a {} endpoint, not {}",
                    p.name(),
                    k.name()
                ));
            }
            (Some(k), _) | (None, Some(k)) => k,
            (None, None) if port == PYROSCOPE_PORT => Kind::Pyroscope,
            (None, None) => Kind::Parca,
        };
        let endpoint = match (by_path, kind) {
            (Some(_), _) => format!("{scheme}{host}{path}"),
            (None, Kind::Parca) => format!("{scheme}{host}{path}{PARCA_PATH}"),
            (None, Kind::Pyroscope) => format!("{scheme}{host}{path}{PYROSCOPE_PATH}"),
        };
        let basic_auth = userinfo.map(|u| {
            let (user, pass) = match u.split_once(':') {
                Some((user, pass)) => (percent_decode(user), percent_decode(pass)),
                None => (percent_decode(u), password.unwrap_or("").to_string()),
            };
            format!(
                "Basic {}",
                super::base64::encode(format!("{user}:{pass}").as_bytes())
            )
        });
        Ok(Backend {
            kind,
            endpoint,
            tenant,
            basic_auth,
        })
    }

    /// The request that pushes one gzip'd profile with its series labels.
    pub fn request(&self, labels: &[(String, String)], gz_profile: &[u8]) -> Request {
        let mut headers = vec![];
        if let Some(t) = &self.tenant {
            headers.push(("X-Scope-OrgID".to_string(), t.clone()));
        }
        if let Some(a) = &self.basic_auth {
            headers.push(("Authorization".to_string(), a.clone()));
        }
        let (content_type, body) = match self.kind {
            Kind::Parca => ("application/json", wire::parca_body(labels, gz_profile)),
            Kind::Pyroscope => {
                headers.push(("Connect-Protocol-Version".to_string(), "1".to_string()));
                (
                    "application/proto",
                    wire::pyroscope_body(labels, gz_profile),
                )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(url: &str) -> Backend {
        Backend::at(url, None, None, None).unwrap()
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
        let b = Backend::at("http://h:9000/base", Some(Kind::Pyroscope), None, None).unwrap();
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
            let e = Backend::at(url, None, None, None).unwrap_err();
            assert!(e.contains(why), "{url}: {e}");
        }
        let e = Backend::at(
            "http://h:7070/api/profiles/writeraw",
            Some(Kind::Pyroscope),
            None,
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
        let b = Backend::at("http://h:4040", None, Some("team-a".into()), None).unwrap();
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
        let p =
            <wire::pyroscope_proto::PushRequest as prost::Message>::decode(&r.body[..]).unwrap();
        assert_eq!(p.series.len(), 1);
        assert_eq!(p.series[0].labels[0].name, "__name__");
        assert_eq!(p.series[0].samples[0].raw_profile, b"gz");
    }

    #[test]
    fn a_user_in_the_url_is_basic_auth_and_never_shown() {
        let b = Backend::at(
            "https://123:glc%2Fx@p.grafana.net",
            Some(Kind::Pyroscope),
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            b.endpoint,
            "https://p.grafana.net/push.v1.PusherService/Push"
        );
        // base64("123:glc/x")
        assert_eq!(b.basic_auth.as_deref(), Some("Basic MTIzOmdsYy94"));
        let r = b.request(&labels(), b"gz");
        assert!(
            r.headers
                .contains(&("Authorization".into(), "Basic MTIzOmdsYy94".into()))
        );
        // The password from elsewhere (KERNTAX_PUSH_PASSWORD) when the URL has none.
        let b = Backend::at("https://123@p.example:4040", None, None, Some("pw")).unwrap();
        assert_eq!(b.basic_auth.as_deref(), Some("Basic MTIzOnB3"));
        let e = Backend::at("https://u:secret@h:port", None, None, None).unwrap_err();
        assert!(!e.contains("secret") && e.contains("bad port"), "{e}");
        assert_eq!(redact("ftp://u:secret@h"), "ftp://u:***@h");
        assert!(
            Backend::at("http://h:7070", None, None, None)
                .unwrap()
                .basic_auth
                .is_none()
        );
    }
}
