//! A stand-in for Grafana Pyroscope's push endpoint, which cannot be had
//! here (its server module is refused). It takes
//! `POST /push.v1.PusherService/Push` as connect-go does (HTTP/1.1,
//! `application/proto`) and checks each profile as Pyroscope's distributor
//! would (`pkg/validation/validate.go` at v2, with its default limits):
//! the labels (at most 30, `__name__` a metric name, a `service_name`,
//! valid names, no name twice, lengths), and the profile (at most 4 MiB
//! uncompressed and 16,000 samples, `time_nanos` within 1 h before and
//! 10 min after now, ids not 0, a value per sample type, string 0 empty,
//! no `-` in a sample type, UTF-8). It answers 200, or 400 with a Connect
//! error naming the first rule broken, and keeps what it saw.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message;

use kerntax::render::pprof::Profile;

/// `api/push/v1/push.proto` and `api/types/v1` LabelPair, written from
/// the .proto here (not kerntax's own structs).
mod wire {
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
        #[prost(string, tag = "2")]
        pub id: String,
    }
}

/// One profile the stub took.
#[derive(Clone, Debug)]
pub struct Seen {
    pub labels: Vec<(String, String)>,
    pub profile: Profile,
}

#[derive(Default)]
pub struct Log {
    pub accepted: Vec<Seen>,
    pub refused: Vec<String>,
    /// Each request's `Authorization` and `X-Scope-OrgID` headers.
    pub auth: Vec<(String, String)>,
}

pub struct Stub {
    pub port: u16,
    pub log: Arc<Mutex<Log>>,
}

const MAX_LABELS: usize = 30;
const MAX_NAME: usize = 1024;
const MAX_VALUE: usize = 2048;
const MAX_PROFILE_BYTES: usize = 4 << 20;
const MAX_SAMPLES: usize = 16_000;
const REJECT_OLDER_NS: i64 = 3600 * 1_000_000_000;
const REJECT_NEWER_NS: i64 = 600 * 1_000_000_000;

fn metric_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn label_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `ValidateLabels`: the first rule broken.
fn check_labels(ls: &[wire::LabelPair]) -> Result<(), String> {
    if ls.is_empty() {
        return Err("missing_labels".into());
    }
    if ls.len() > MAX_LABELS {
        return Err(format!("max_label_names_per_series: {}", ls.len()));
    }
    let get = |n: &str| ls.iter().find(|l| l.name == n).map(|l| l.value.as_str());
    if !get("__name__").is_some_and(metric_name) {
        return Err("invalid_labels: invalid metric name".into());
    }
    if get("service_name").is_none_or(str::is_empty) {
        return Err("missing_labels: service name is not provided".into());
    }
    let mut names: Vec<&str> = ls.iter().map(|l| l.name.as_str()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        return Err("duplicate_label_names".into());
    }
    for l in ls {
        if l.name.len() > MAX_NAME || l.value.len() > MAX_VALUE {
            return Err(format!("label too long: {}", l.name));
        }
        if !label_name(&l.name) {
            return Err(format!("invalid_labels: invalid label name {:?}", l.name));
        }
    }
    Ok(())
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// `ValidateProfile`: the first rule broken.
fn check_profile(raw: &[u8]) -> Result<Profile, String> {
    let mut plain = vec![];
    if raw.starts_with(&[0x1f, 0x8b]) {
        flate2::read::GzDecoder::new(raw)
            .read_to_end(&mut plain)
            .map_err(|e| format!("malformed_profile: gzip: {e}"))?;
    } else {
        plain = raw.to_vec();
    }
    let p = Profile::decode(&plain[..]).map_err(|e| format!("malformed_profile: {e}"))?;
    if p.sample_type.is_empty() {
        return Err("malformed_profile: empty profile".into());
    }
    if p.time_nanos > 0 {
        let now = now_ns();
        if p.time_nanos < now - REJECT_OLDER_NS || p.time_nanos > now + REJECT_NEWER_NS {
            return Err(format!("not_in_ingestion_window: {}", p.time_nanos));
        }
    }
    if plain.len() > MAX_PROFILE_BYTES {
        return Err(format!("profile_size_limit: {}", plain.len()));
    }
    if p.sample.len() > MAX_SAMPLES {
        return Err(format!("samples_limit: {}", p.sample.len()));
    }
    if p.location.iter().any(|l| l.id == 0) || p.function.iter().any(|f| f.id == 0) {
        return Err("malformed_profile: id 0".into());
    }
    if p.sample
        .iter()
        .any(|s| s.value.len() != p.sample_type.len())
    {
        return Err("malformed_profile: sample value length mismatch".into());
    }
    if p.string_table.first().map(String::as_str) != Some("") {
        return Err("malformed_profile: string 0 should be empty string".into());
    }
    let n = p.string_table.len() as i64;
    for t in &p.sample_type {
        if t.r#type >= n || t.unit >= n {
            return Err("malformed_profile: sample type string out of range".into());
        }
        if p.string_table[t.r#type as usize].contains('-') {
            return Err("malformed_profile: sample type contains -".into());
        }
    }
    if p.function.iter().any(|f| f.name >= n || f.filename >= n) {
        return Err("malformed_profile: function string out of range".into());
    }
    Ok(p)
}

fn answer(stream: &mut TcpStream, status: &str, body: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn serve(stream: TcpStream, log: &Mutex<Log>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    let mut length = 0usize;
    let mut content_type = String::new();
    let (mut authorization, mut tenant) = (String::new(), String::new());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        let (k, v) = line.split_once(':').unwrap_or((&line, ""));
        match k.to_ascii_lowercase().as_str() {
            "content-length" => length = v.trim().parse().unwrap_or(0),
            "content-type" => content_type = v.trim().to_string(),
            "authorization" => authorization = v.trim().to_string(),
            "x-scope-orgid" => tenant = v.trim().to_string(),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let mut stream = stream;
    if !first.starts_with("POST /push.v1.PusherService/Push ") {
        answer(&mut stream, "404 Not Found", r#"{"code":"not_found"}"#);
        log.lock().unwrap().refused.push(format!("path: {first}"));
        return;
    }
    if content_type != "application/proto" {
        answer(&mut stream, "415 Unsupported Media Type", "{}");
        log.lock()
            .unwrap()
            .refused
            .push(format!("content type {content_type}"));
        return;
    }
    let checked = wire::PushRequest::decode(&body[..])
        .map_err(|e| format!("invalid_argument: {e}"))
        .and_then(|req| {
            let mut seen = vec![];
            for s in &req.series {
                check_labels(&s.labels)?;
                for raw in &s.samples {
                    let profile = check_profile(&raw.raw_profile)?;
                    seen.push(Seen {
                        labels: s
                            .labels
                            .iter()
                            .map(|l| (l.name.clone(), l.value.clone()))
                            .collect(),
                        profile,
                    });
                }
            }
            Ok(seen)
        });
    let mut log = log.lock().unwrap();
    log.auth.push((authorization, tenant));
    match checked {
        Ok(seen) => {
            log.accepted.extend(seen);
            answer(&mut stream, "200 OK", "{}");
        }
        Err(why) => {
            let body = serde_json::json!({"code": "invalid_argument", "message": why}).to_string();
            answer(&mut stream, "400 Bad Request", &body);
            log.refused.push(why);
        }
    }
}

impl Stub {
    /// Listens on a free loopback port until the test ends.
    pub fn start() -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Log::default()));
        let l = log.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                serve(stream, &l);
            }
        });
        Stub { port, log }
    }
}

#[test]
fn the_stub_refuses_what_pyroscope_refuses() {
    let pair = |n: &str, v: &str| wire::LabelPair {
        name: n.into(),
        value: v.into(),
    };
    let good = vec![pair("__name__", "kerntax"), pair("service_name", "s")];
    assert_eq!(check_labels(&good), Ok(()));
    assert!(check_labels(&[pair("service_name", "s")]).is_err());
    assert!(check_labels(&[pair("__name__", "a-b"), pair("service_name", "s")]).is_err());
    assert!(check_labels(&[pair("__name__", "k")]).is_err());
    let mut twice = good.clone();
    twice.push(pair("service_name", "t"));
    assert!(check_labels(&twice).is_err());
    let mut many = good.clone();
    many.extend((0..29).map(|i| pair(&format!("l{i}"), "v")));
    assert!(
        check_labels(&many)
            .unwrap_err()
            .starts_with("max_label_names")
    );
    assert!(
        check_profile(&Profile::default().encode_to_vec())
            .unwrap_err()
            .contains("empty profile")
    );
    // A hyphenated type, as kerntax wrote before issue 23.
    use kerntax::render::pprof::proto::ValueType;
    let p = Profile {
        sample_type: vec![ValueType { r#type: 1, unit: 2 }],
        string_table: vec!["".into(), "off-cpu".into(), "nanoseconds".into()],
        time_nanos: now_ns(),
        ..Default::default()
    };
    assert!(
        check_profile(&p.encode_to_vec())
            .unwrap_err()
            .contains("contains -")
    );
    let old = Profile {
        string_table: vec!["".into(), "off_cpu".into(), "nanoseconds".into()],
        time_nanos: now_ns() - 2 * REJECT_OLDER_NS,
        ..p
    };
    assert!(
        check_profile(&old.encode_to_vec())
            .unwrap_err()
            .starts_with("not_in_ingestion")
    );
    let fine = Profile {
        time_nanos: now_ns(),
        ..old
    };
    assert!(check_profile(&fine.encode_to_vec()).is_ok());
}
