//! Posting over HTTP(S) with ureq (blocking, rustls): one request at a
//! time from the push queue's thread, each bounded by a timeout. What the
//! backend answered decides whether the queue tries again.

use std::time::Duration;

use super::backend::Request;
use super::queue::{Sent, Transport};

/// Longest a push may take, connection to answer (Alloy: 10 s).
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// How much of an error answer is read for the message.
const ERROR_BODY_BYTES: u64 = 4096;

pub struct Http {
    agent: ureq::Agent,
}

impl Http {
    pub fn new() -> Http {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            .user_agent(concat!("kerntax/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Http { agent }
    }
}

impl Default for Http {
    fn default() -> Http {
        Http::new()
    }
}

/// An answer's worth: 2xx went; 408, 429 and 5xx are the backend's
/// trouble (try again); any other status refuses the profile.
pub fn classify(status: u16, body: &str) -> Sent {
    if (200..300).contains(&status) {
        return Sent::Ok;
    }
    let why = format!("HTTP {status}: {}", error_message(body));
    if status == 408 || status == 429 || status >= 500 {
        Sent::Retry(why)
    } else {
        Sent::Reject(why)
    }
}

/// The `message` of a gRPC-gateway or Connect error body, else the body's
/// first line, short.
fn error_message(body: &str) -> String {
    let from_json = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("message")?.as_str().map(str::to_string));
    let msg = from_json.unwrap_or_else(|| body.lines().next().unwrap_or("").to_string());
    let msg = msg.trim();
    if msg.is_empty() {
        return "(no message)".to_string();
    }
    msg.chars().take(300).collect()
}

impl Transport for Http {
    fn send(&mut self, r: &Request) -> Sent {
        let mut req = self
            .agent
            .post(&r.url)
            .header("Content-Type", r.content_type);
        for (k, v) in &r.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        match req.send(&r.body[..]) {
            Ok(mut resp) => {
                let status = resp.status().as_u16();
                let body = if (200..300).contains(&status) {
                    String::new()
                } else {
                    resp.body_mut()
                        .with_config()
                        .limit(ERROR_BODY_BYTES)
                        .read_to_string()
                        .unwrap_or_default()
                };
                classify(status, &body)
            }
            Err(e) => Sent::Retry(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_retried_or_refused_by_status() {
        assert_eq!(classify(200, ""), Sent::Ok);
        assert_eq!(classify(204, ""), Sent::Ok);
        for s in [408, 429, 500, 502, 503] {
            assert!(matches!(classify(s, ""), Sent::Retry(_)), "{s}");
        }
        for s in [400, 401, 404, 413, 422] {
            assert!(matches!(classify(s, ""), Sent::Reject(_)), "{s}");
        }
    }

    #[test]
    fn the_backends_error_message_is_kept() {
        let parca = r#"{"code":3,"message":"invalid profile type","details":[]}"#;
        assert_eq!(
            classify(400, parca),
            Sent::Reject("HTTP 400: invalid profile type".into())
        );
        let connect = r#"{"code":"invalid_argument","message":"too many samples"}"#;
        assert_eq!(
            classify(400, connect),
            Sent::Reject("HTTP 400: too many samples".into())
        );
        assert_eq!(
            classify(503, "upstream down\nmore"),
            Sent::Retry("HTTP 503: upstream down".into())
        );
        assert_eq!(
            classify(502, ""),
            Sent::Retry("HTTP 502: (no message)".into())
        );
    }
}
