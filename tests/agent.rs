//! Issue 23: `kerntax agent` pushes each window's profile to a real Parca
//! server (v0.28.0, built by scripts/parca.sh; its path in KERNTAX_PARCA),
//! and to a stand-in for Pyroscope's push API that checks each request as
//! Pyroscope's own validation does; it keeps profiling through a backend
//! outage with its queue bounded.

mod common;
#[path = "agent/pyroscope_stub.rs"]
mod pyroscope_stub;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{bpf_available, kerntax, unavailable, wait_programs_gone};
use serde_json::Value;

fn lab(name: &str) -> PathBuf {
    PathBuf::from(env!("KERNTAX_LAB_DIR")).join(name)
}

/// The lab's Icinga story, bad: 4 threads on one namespace mutex, for far
/// longer than any test runs (the agent's --duration ends it).
fn icinga() -> Vec<String> {
    let p = lab("icinga_namespace");
    vec![
        p.to_str().unwrap().into(),
        "bad".into(),
        "4".into(),
        "2000000000".into(),
    ]
}

const TYPES: [(&str, &str); 7] = [
    ("samples", "count"),
    ("cpu", "nanoseconds"),
    ("syscalls", "count"),
    ("syscall_time", "nanoseconds"),
    ("contentions", "count"),
    ("delay", "nanoseconds"),
    ("off_cpu", "nanoseconds"),
];

fn parca_binary() -> Option<PathBuf> {
    match std::env::var_os("KERNTAX_PARCA").map(PathBuf::from) {
        Some(p) if p.is_file() => Some(p),
        _ => {
            unavailable("no Parca server: KERNTAX_PARCA is not set to its binary");
            None
        }
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A Parca server on loopback with a filesystem bucket, stopped by pid.
struct Parca {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

impl Parca {
    fn start(bin: &PathBuf, port: u16) -> Parca {
        let dir = tempfile::tempdir().unwrap();
        let config = "object_storage:\n  bucket:\n    type: \"FILESYSTEM\"\n    config:\n      directory: \"./data\"\n";
        std::fs::write(dir.path().join("parca.yaml"), config).unwrap();
        let log = std::fs::File::create(dir.path().join("parca.log")).unwrap();
        let child = Command::new(bin)
            .current_dir(dir.path())
            .arg("--config-path=parca.yaml")
            .arg(format!("--http-address=127.0.0.1:{port}"))
            // Keeps it off the network (it would ask debuginfod.elfutils.org).
            .arg("--debuginfod-upstream-servers=127.0.0.1:1")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting parca");
        let p = Parca {
            child: Some(child),
            port,
            dir,
        };
        let t = Instant::now();
        while p.try_get("/api/profiles/types", &[]).is_none() {
            assert!(
                t.elapsed() < Duration::from_secs(90),
                "parca did not answer in 90 s: {}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("parca.log")).unwrap_or_default()
    }

    fn try_get(&self, path: &str, query: &[(&str, &str)]) -> Option<Value> {
        let mut req = ureq::get(format!("{}{path}", self.url()));
        for (k, v) in query {
            req = req.query(*k, *v);
        }
        let mut resp = req.call().ok()?;
        serde_json::from_str(&resp.body_mut().read_to_string().ok()?).ok()
    }

    fn get(&self, path: &str, query: &[(&str, &str)]) -> Value {
        self.try_get(path, query)
            .unwrap_or_else(|| panic!("GET {path} {query:?} failed: {}", self.log()))
    }

    /// Parca's merge of one kerntax type over [start, end]: its total and
    /// the function names it holds.
    fn merged(
        &self,
        ty: (&str, &str),
        selector: &str,
        range: &(String, String),
    ) -> (i64, Vec<String>) {
        let query = format!(
            "kerntax:{}:{}:cpu:nanoseconds:delta{{{selector}}}",
            ty.0, ty.1
        );
        let v = self.get(
            "/api/profiles/query",
            &[
                ("mode", "MODE_MERGE"),
                ("merge.query", &query),
                ("merge.start", &range.0),
                ("merge.end", &range.1),
                ("reportType", "REPORT_TYPE_TOP"),
            ],
        );
        let total = v["total"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        let names = v["top"]["list"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["meta"]["function"]["name"].as_str().map(str::to_string))
            .collect();
        (total, names)
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Parca {
    fn drop(&mut self) {
        self.stop();
    }
}

/// RFC 3339 of `t` (what Parca's query API takes).
fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap().as_secs();
    let out = Command::new("date")
        .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The range every profile of a test falls in.
fn range(since: SystemTime) -> (String, String) {
    (
        rfc3339(since - Duration::from_secs(60)),
        rfc3339(SystemTime::now() + Duration::from_secs(60)),
    )
}

/// `kerntax agent --json ...`, its stdout read line by line.
struct Agent {
    child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Agent {
    fn start(args: &[&str], cmd: &[String]) -> Agent {
        let mut child = kerntax()
            .arg("agent")
            .arg("--json")
            .args(args)
            .arg("--")
            .args(cmd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Agent { child, lines }
    }

    fn next(&mut self) -> Option<Value> {
        let line = self.lines.next()?.unwrap();
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")))
    }

    /// The rest of the lines, the exit status and stderr.
    fn finish(mut self) -> (Vec<Value>, Option<i32>, String) {
        let mut rest = vec![];
        while let Some(v) = self.next() {
            rest.push(v);
        }
        let out = self.child.wait_with_output().unwrap();
        (
            rest,
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// Sum of each type's `profile_totals` over the windows.
fn totals(lines: &[Value]) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for l in lines {
        for (k, v) in l["profile_totals"].as_object().unwrap() {
            *out.entry(k.clone()).or_insert(0) += v.as_i64().unwrap();
        }
    }
    out
}

fn findings(l: &Value) -> Vec<&str> {
    l["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect()
}

/// What the command's status is when --duration ends it: SIGTERM.
const ENDED_BY_DURATION: Option<i32> = Some(128 + libc::SIGTERM);

#[test]
fn issue_23_the_agent_pushes_every_type_to_a_real_parca_for_30_s() {
    if !bpf_available() {
        return;
    }
    let Some(bin) = parca_binary() else { return };
    let parca = Parca::start(&bin, free_port());
    let since = SystemTime::now();
    let agent = Agent::start(
        &[
            "--push",
            &parca.url(),
            "--interval",
            "5",
            "--duration",
            "30",
            "--service-name",
            "kerntax-e2e",
            "--label",
            "suite=issue23",
        ],
        &icinga(),
    );
    let (lines, status, stderr) = agent.finish();
    assert_eq!(status, ENDED_BY_DURATION, "{stderr}");
    assert!(wait_programs_gone().is_empty());
    // Six windows of 5 s, and the last short one.
    assert!((6..=7).contains(&lines.len()), "{lines:?}");
    let last = lines.last().unwrap();
    let pushed = lines
        .iter()
        .filter(|l| l["samples"].as_u64() > Some(0))
        .count() as u64;
    assert_eq!(last["push"]["dropped_queue_full"], 0, "{stderr}");
    assert!(
        stderr.contains(&format!("{pushed} profiles pushed")),
        "{stderr}"
    );
    for l in &lines[..6] {
        assert!(findings(l).contains(&"lock.futile-churn"), "{l}");
    }

    // Every kerntax type, with the fleet's labels.
    let types = parca.get("/api/profiles/types", &[]);
    for (t, unit) in TYPES {
        assert!(
            types["types"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x["name"] == "kerntax"
                    && x["sampleType"] == t
                    && x["sampleUnit"] == unit
                    && x["delta"] == true),
            "{t}: {types}"
        );
    }
    let names = parca.get("/api/profiles/labels", &[]);
    for l in [
        "service_name",
        "job",
        "hostname",
        "pid",
        "comm",
        "kernel",
        "kerntax_findings",
        "suite",
    ] {
        assert!(
            names["labelNames"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n == l),
            "{l}: {names}"
        );
    }
    let values = parca.get("/api/profiles/labels/kerntax_findings/values", &[]);
    assert!(values.to_string().contains("lock.futile-churn"), "{values}");

    // Totals: Parca's merge of the run equals the sum of kerntax's windows.
    let sums = totals(&lines);
    let r = range(since);
    let selector = r#"service_name="kerntax-e2e""#;
    for ty in TYPES {
        let (total, _) = parca.merged(ty, selector, &r);
        // Parca reads any `samples:count` type as CPU samples, each worth
        // the period (parcacol/querier.go isSamplesCount): kerntax's cpu.
        let kerntax = match ty.0 {
            "samples" => sums["cpu"],
            t => sums[t],
        };
        assert_eq!(total, kerntax, "{}: parca {total}, kerntax {kerntax}", ty.0);
    }
    assert!(sums["delay"] > 1_000_000_000, "{sums:?}");
    // Entries idle over a window were evicted from the maps (and came back
    // counting from zero): the totals above are still exact.
    let evicted = &last["evicted"];
    let evicted_total: u64 = evicted
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert!(evicted_total > 0, "{evicted}");
    // The waiters' stacks name the lab's lock and the function taking it.
    let (_, functions) = parca.merged(("delay", "nanoseconds"), selector, &r);
    for f in ["[lock mutex g_namespace_lock]", "ns_lock", "evaluate_rules"] {
        assert!(functions.iter().any(|n| n == f), "{f}: {functions:?}");
    }
    // Over time: a point per window.
    let series = parca.get(
        "/api/profiles/query_range",
        &[
            (
                "query",
                &format!("kerntax:delay:nanoseconds:cpu:nanoseconds:delta{{{selector}}}"),
            ),
            ("start", &r.0),
            ("end", &r.1),
            ("step", "1s"),
        ],
    );
    let points = series["series"][0]["samples"]
        .as_array()
        .map_or(0, Vec::len);
    assert!(points >= 6, "{series}");
}

#[test]
fn issue_23_the_agent_keeps_profiling_through_20_s_of_parca_down() {
    if !bpf_available() {
        return;
    }
    let Some(bin) = parca_binary() else { return };
    let port = free_port();
    let mut parca = Parca::start(&bin, port);
    let mut agent = Agent::start(
        &[
            "--push",
            &parca.url(),
            "--interval",
            "2",
            "--duration",
            "44",
            "--service-name",
            "kerntax-outage",
        ],
        &icinga(),
    );
    let mut lines = vec![];
    // Down after window 3, for 10 windows of 2 s.
    while lines.len() < 3 {
        lines.push(agent.next().expect("window"));
    }
    parca.stop();
    while lines.len() < 13 {
        lines.push(agent.next().expect("window during the outage"));
    }
    let since_restart = SystemTime::now();
    let parca = Parca::start(&bin, port);
    let at_restart = lines.last().unwrap()["push"].clone();
    let (rest, status, stderr) = agent.finish();
    lines.extend(rest);
    assert_eq!(status, ENDED_BY_DURATION, "{stderr}");
    // It kept profiling: every window came, numbered without a gap.
    assert!(lines.len() >= 20, "{}", lines.len());
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["window"], i as u64 + 1);
        // Bounded: at most 4 profiles queued, 64 MiB held.
        assert!(l["push"]["queued"].as_u64().unwrap() <= 4, "{l}");
        assert!(
            l["push"]["queued_bytes_peak"].as_u64().unwrap() <= 64 << 20,
            "{l}"
        );
    }
    let before = &lines[2];
    let end = lines.last().unwrap();
    // The outage is counted: retries, and profiles dropped.
    assert!(at_restart["retries"].as_u64() > Some(0), "{at_restart}");
    let dropped = |p: &Value| {
        ["dropped_queue_full", "dropped_after_retries"]
            .iter()
            .map(|k| p[k].as_u64().unwrap())
            .sum::<u64>()
    };
    assert!(dropped(&at_restart) >= 5, "{at_restart}");
    assert!(stderr.contains("failed"), "{stderr}");
    assert!(stderr.contains("again"), "{stderr}");
    // Pushing resumed, and the new server holds them.
    let pushed_after =
        end["push"]["pushed"].as_u64().unwrap() - at_restart["pushed"].as_u64().unwrap();
    assert!(pushed_after >= 5, "{end}");
    let (total, _) = parca.merged(
        ("cpu", "nanoseconds"),
        r#"service_name="kerntax-outage""#,
        &range(since_restart),
    );
    assert!(total > 0, "{}", parca.log());
    // Memory flat over the outage.
    let rss = |l: &Value| l["agent_rss_kib"].as_u64().unwrap();
    assert!(
        rss(&lines[12]) < rss(before) + 32 * 1024,
        "{} -> {}",
        rss(before),
        rss(&lines[12])
    );
}

#[test]
fn issue_23_pyroscope_pushes_pass_its_validation() {
    if !bpf_available() {
        return;
    }
    let stub = pyroscope_stub::Stub::start();
    // A user in the URL, as Grafana Cloud takes it: basic auth.
    let url = format!("http://kt-user:s%40cret@127.0.0.1:{}", stub.port);
    let agent = Agent::start(
        &[
            "--push",
            &url,
            "--backend",
            "pyroscope",
            "--tenant",
            "t1",
            "--interval",
            "2",
            "--duration",
            "7",
        ],
        &icinga(),
    );
    let (lines, status, stderr) = agent.finish();
    assert_eq!(status, ENDED_BY_DURATION, "{stderr}");
    let log = stub.log.lock().unwrap();
    assert!(log.refused.is_empty(), "{:?}", log.refused);
    // base64("kt-user:s@cret"), and the tenant.
    let auth = ("Basic a3QtdXNlcjpzQGNyZXQ=".to_string(), "t1".to_string());
    assert!(log.auth.iter().all(|a| *a == auth), "{:?}", log.auth);
    assert!(
        !stderr.contains("s%40cret") && !stderr.contains("s@cret"),
        "{stderr}"
    );
    assert_eq!(log.accepted.len(), lines.len(), "{stderr}");
    for seen in &log.accepted {
        let get = |k: &str| {
            seen.labels
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("__name__"), Some("kerntax"));
        assert_eq!(get("service_name"), Some("icinga_namespace"));
        assert!(get("hostname").is_some_and(|h| !h.is_empty()));
    }
    // The delay pushed is kerntax's, and its stacks name the lock.
    let p = &log.accepted[0].profile;
    let delay = p
        .sample_type
        .iter()
        .position(|t| p.string_table[t.r#type as usize] == "delay")
        .unwrap();
    let pushed: i64 = log
        .accepted
        .iter()
        .flat_map(|s| s.profile.sample.iter().map(|x| x.value[delay]))
        .sum();
    assert_eq!(pushed, totals(&lines)["delay"]);
    assert!(
        p.string_table
            .iter()
            .any(|s| s == "[lock mutex g_namespace_lock]")
    );
    assert!(p.string_table.iter().any(|s| s == "ns_lock"));
}

#[test]
fn issue_23_an_unreachable_backend_ends_in_one_line_and_status_1() {
    if !bpf_available() {
        return;
    }
    // Port 1 on loopback: nothing listens, every push is refused at once.
    let out = kerntax()
        .args([
            "agent",
            "--push",
            "http://127.0.0.1:1",
            "--interval",
            "1",
            "--duration",
            "3",
        ])
        .arg("--")
        .args(icinga())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The command ended by --duration, but no profile went: status 1.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with("kerntax: no profile reached http://127.0.0.1:1/"),
        "{stderr}"
    );
    assert!(
        stderr.contains("pushing to http://127.0.0.1:1/api/profiles/writeraw failed"),
        "{stderr}"
    );
    assert!(wait_programs_gone().is_empty());
}

#[test]
fn issue_23_bad_agent_arguments_are_one_line_and_status_2() {
    for (args, says) in [
        (
            &["agent", "--push", "http://h:7070"][..],
            "agent needs a process",
        ),
        (
            &["agent", "--push", "ftp://h", "-p", "1"][..],
            "must start with http",
        ),
        (
            &[
                "agent",
                "--push",
                "http://h",
                "--interval",
                "0.5",
                "-p",
                "1",
            ][..],
            "shorter than 1 s",
        ),
        (
            &[
                "agent",
                "--push",
                "http://h:7070/api/profiles/writeraw",
                "--backend",
                "pyroscope",
                "-p",
                "1",
            ][..],
            "parca endpoint",
        ),
    ] {
        common::refused_in_one_line(args, says);
    }
    // clap's own checks: status 2 and the reason.
    for (args, says) in [
        (
            &["agent", "--push", "http://h", "--label", "a-b=1", "-p", "1"][..],
            "a label name",
        ),
        (
            &["agent", "--push", "http://h", "--backend", "x", "-p", "1"][..],
            "parca or pyroscope",
        ),
    ] {
        let out = kerntax().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}
