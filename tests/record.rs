//! Issue 36: a recording analysed later gives the report its run gave.
//! `kerntax run --json A --record R` then `kerntax report R --json B`:
//! A and B are the same bytes (the live run analyses the same recording),
//! for every lab story's variants and for an attach to a running server;
//! `kerntax record` writes a recording `report`, `diff` and every output
//! read; a damaged one is one clear line and exit status 2.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

fn lab(program: &str) -> String {
    PathBuf::from(env!("KERNTAX_LAB_DIR"))
        .join(program)
        .to_string_lossy()
        .into_owned()
}

/// `kerntax ARGS`, which must succeed; its stderr.
fn ok(args: &[&str]) -> String {
    let out = kerntax().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {stderr}");
    stderr
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The report `kerntax report REC --json` writes, as bytes.
fn replayed(rec: &Path, dir: &Path) -> Vec<u8> {
    let json = dir.join("replayed.json");
    ok(&["report", s(rec), "--json", s(&json)]);
    std::fs::read(&json).unwrap()
}

/// The live run's JSON and the recording's analysed again are the same
/// bytes, and hold the same findings.
fn same_report(live: &Path, rec: &Path, dir: &Path, what: &str) {
    let live_bytes = std::fs::read(live).unwrap();
    let again = replayed(rec, dir);
    if live_bytes != again {
        let a: serde_json::Value = serde_json::from_slice(&live_bytes).unwrap();
        let b: serde_json::Value = serde_json::from_slice(&again).unwrap();
        let differing: Vec<&String> = a
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, v)| b.get(k.as_str()) != Some(v))
            .map(|(k, _)| k)
            .collect();
        panic!("{what}: the replayed report differs from the live one in {differing:?}");
    }
    let r = read_report(live);
    assert!(r.cpu_samples.samples > 0, "{what}: no samples");
}

/// Every lab story's variants (as `kerntax demo` runs them), each run
/// with --record and its recording analysed again.
#[test]
fn each_lab_variant_recorded_and_reported_gives_its_run_s_report() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut findings = 0;
    for sc in kerntax::demo::SCENARIOS {
        for (variant, args) in sc.variants {
            let what = format!("{} {variant}", sc.name);
            let json = dir.path().join("live.json");
            let rec = dir.path().join("live.rec");
            let mut argv = vec!["run", "--json", s(&json), "--record", s(&rec), "--"];
            let program = lab(sc.program);
            argv.push(&program);
            argv.extend_from_slice(args);
            ok(&argv);
            same_report(&json, &rec, dir.path(), &what);
            findings += read_report(&json).findings.len();
        }
    }
    assert!(findings > 0, "no lab variant had a finding");
}

/// `kerntax record -- CMD`: one file, `report` reads it with every output,
/// and `diff` compares it with a JSON report.
#[test]
fn record_writes_a_file_report_and_diff_read() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("zabbix.rec");
    let says = ok(&["record", "-o", s(&rec), "--", &lab("zabbix_config"), "bad"]);
    assert!(
        says.contains("recorded") && says.contains("kerntax report"),
        "{says}"
    );
    let bytes = std::fs::read(&rec).unwrap();
    assert_eq!(&bytes[..2], [0x1f, 0x8b], "gzip-compressed");
    // The text report on stdout, with its finding.
    let out = kerntax().args(["report", s(&rec)]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("sysv-sem"), "{text}");
    // Every file output.
    let files: Vec<PathBuf> = ["r.json", "r.html", "r.pb.gz", "r.folded"]
        .iter()
        .map(|f| dir.path().join(f))
        .collect();
    ok(&[
        "report",
        s(&rec),
        "--json",
        s(&files[0]),
        "--html",
        s(&files[1]),
        "--pprof",
        s(&files[2]),
        "--folded",
        s(&files[3]),
    ]);
    for f in &files {
        assert!(std::fs::metadata(f).unwrap().len() > 0, "{}", f.display());
    }
    let r = read_report(&files[0]);
    assert!(
        r.findings.iter().any(|f| f.id == "lock.global-serializes"),
        "{:?}",
        r.findings.iter().map(|f| &f.id).collect::<Vec<_>>()
    );
    // A recording compared with itself as JSON: nothing resolved, nothing new.
    let out = kerntax()
        .args(["diff", s(&rec), s(&files[0])])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    // No scheduling records in it: a Perfetto trace is refused in one line.
    let trace = dir.path().join("t.perfetto");
    let out = kerntax()
        .args(["report", s(&rec), "--perfetto", s(&trace)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--sched-trace"), "{stderr}");
}

/// `record --sched-trace` keeps the scheduling records: `report --perfetto`
/// writes the trace from the recording.
#[test]
fn a_recording_with_its_sched_trace_gives_a_perfetto_trace() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("icinga.rec");
    ok(&[
        "record",
        "--sched-trace",
        "-o",
        s(&rec),
        "--",
        &lab("icinga_namespace"),
        "bad",
        "4",
        "20000",
    ]);
    let trace = dir.path().join("t.perfetto");
    ok(&["report", s(&rec), "--perfetto", s(&trace)]);
    assert!(std::fs::metadata(&trace).unwrap().len() > 1000);
}

/// An attach to a running server: the live report and the recording's are
/// the same bytes; `record -p` records it too.
#[test]
fn an_attach_recorded_and_reported_gives_its_run_s_report() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut server = Command::new(lab("icinga_namespace"))
        .args(["bad", "8", "100000000"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = server.id().to_string();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let json = dir.path().join("attach.json");
    let rec = dir.path().join("attach.rec");
    let done = || {
        ok(&[
            "attach",
            &pid,
            "--duration",
            "2",
            "--json",
            s(&json),
            "--record",
            s(&rec),
        ]);
        same_report(&json, &rec, dir.path(), "attach");
        let again = dir.path().join("p.rec");
        ok(&["record", "-p", &pid, "--duration", "1", "-o", s(&again)]);
        let r: kerntax::report::Report =
            serde_json::from_slice(&replayed(&again, dir.path())).unwrap();
        assert_eq!(r.mode, kerntax::report::Mode::Attach);
        assert!(!r.findings.is_empty(), "{:?}", r.locks);
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(done));
    let _ = server.kill();
    let _ = server.wait();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

/// Damaged recordings: truncated, not gzip, gzip of something else, from
/// a newer kerntax, a sample whose stack is missing. Each is one line and
/// exit status 2, for `report` and `diff` alike.
#[test]
fn a_damaged_recording_is_one_line_and_status_2() {
    use kerntax::recording::file::{decode, encode};
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/recordings/lab/zabbix-config/bad-1.rec"
    ))
    .unwrap();
    let rec = decode(&good).expect("the recorded corpus reads");
    let gz = |json: &[u8]| {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(json).unwrap();
        e.finish().unwrap()
    };
    let mut newer: serde_json::Value = serde_json::to_value(&rec).unwrap();
    newer["version"] = 999.into();
    let mut unnamed = rec.clone();
    unnamed.named.stacks.clear();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated", good[..good.len() / 2].to_vec(), "truncated"),
        ("empty", vec![], "not valid JSON"),
        ("gzip of text", gz(b"hello"), "not valid JSON"),
        (
            "gzip of a report",
            gz(b"{\"schema_version\": 3}"),
            "does not say",
        ),
        (
            "newer",
            gz(&serde_json::to_vec(&newer).unwrap()),
            "newer kerntax",
        ),
        ("unnamed stacks", encode(&unnamed), "not among its stacks"),
    ];
    for (what, bytes, says) in cases {
        let path = dir.path().join(format!("{}.rec", what.replace(' ', "-")));
        std::fs::write(&path, &bytes).unwrap();
        for args in [vec!["report", s(&path)], vec!["diff", s(&path), s(&path)]] {
            let out = kerntax().args(&args).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{what} {args:?}: {stderr}");
            assert!(
                stderr.starts_with("kerntax: ") && stderr.contains(says),
                "{what}: {stderr}"
            );
            assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
        }
    }
}

/// `kerntax top --record FILE`: the whole watched run's recording at the
/// end, which `report` analyses like any other.
#[test]
fn top_records_the_whole_run_it_watched() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("top.rec");
    ok(&[
        "top",
        "-n",
        "2",
        "-d",
        "0.5",
        "--json",
        "--record",
        s(&rec),
        "--",
        &lab("icinga_namespace"),
        "bad",
        "4",
        "100000000",
    ]);
    let r: kerntax::report::Report = serde_json::from_slice(&replayed(&rec, dir.path())).unwrap();
    assert!(r.duration_ns >= 900_000_000, "{}", r.duration_ns);
    assert!(
        r.locks
            .iter()
            .any(|l| l.symbol.as_deref() == Some("g_namespace_lock"))
    );
}
