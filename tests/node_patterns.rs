//! A standard library's known kernel-cost pattern met through Node.js's
//! libuv pool (issue 38): an HTTP client that resolves its server's name
//! for every connection (dns.lookup: glibc's getaddrinfo on libuv's
//! thread pool, about fifteen system calls each, none storming alone)
//! against the same client connecting by address. Debian's node
//! (`nodejs`, installed by scripts/test.sh).

mod common;

use std::path::PathBuf;

use common::{bpf_available, printed, run};
use kerntax::report::{Finding, Report};

const NODE: &str = "/usr/bin/node";
const ID: &str = "syscall.known-pattern";

fn lookup(mode: &str) -> (Report, i64) {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/node/lookup.js");
    let p = run(&[], &[NODE, file.to_str().unwrap(), mode, "3"]);
    assert!(p.output.status.success(), "{}", p.stderr);
    let requests = printed(&p, "requests");
    (p.report, requests)
}

fn evidence(f: &Finding, metric: &str) -> f64 {
    f.evidence
        .iter()
        .find(|e| e.metric == metric)
        .unwrap_or_else(|| panic!("no {metric}: {f:?}"))
        .value
}

#[test]
fn a_client_resolving_its_servers_name_per_connection_is_named_by_getaddrinfo_issue_38() {
    if !bpf_available() {
        return;
    }
    let (bad, requests) = lookup("name");
    let f = bad
        .findings
        .first()
        .unwrap_or_else(|| panic!("no finding ({requests} requests)"));
    // The pattern ranks before the event loop it paces (wait.bottleneck's
    // culprit hands the pool a uv_getaddrinfo per connection).
    assert_eq!(f.id, ID, "{:?}", bad.findings);
    assert!(
        f.title
            .starts_with("glibc's getaddrinfo resolves the name again on every call"),
        "{}",
        f.title
    );
    assert!(f.remedy.contains("keepAlive"), "{}", f.remedy);
    // Its calls run through glibc's resolver on libuv's pool.
    assert!(
        f.culprit.frames.iter().any(|s| s.contains("getaddrinfo")),
        "{:?}",
        f.culprit.frames
    );
    // About fifteen calls per connection (here 25.7-28.6 k calls a second,
    // 39% of all the syscalls, about 16 per request).
    let per_s = evidence(f, "calls_per_s");
    let per_request = per_s * bad.duration_ns as f64 / 1e9 / requests as f64;
    assert!(
        (8.0..=20.0).contains(&per_request),
        "{per_s} calls/s for {requests} requests in {} ns",
        bad.duration_ns
    );
    // By address: no lookup, no pattern.
    let (healthy, _) = lookup("address");
    assert!(
        healthy.findings.iter().all(|f| f.id != ID),
        "{:?}",
        healthy.findings
    );
}
