//! `--perfetto` on a lab lock story (issue 22): the trace is read with
//! Perfetto's own schema (PyPI `perfetto`'s generated perfetto_trace_pb2,
//! in the venv scripts/test.sh sets up: KERNTAX_PERFETTO_PYTHON) by
//! tests/perfetto/check_trace.py, which asserts no unknown field anywhere,
//! a switch for every thread, a wake-up by the releasing thread, lock-wait
//! slices on several threads and paired flows; and a path that cannot be
//! written is one `kerntax:` line after the report.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

fn lab(name: &str) -> PathBuf {
    PathBuf::from(env!("KERNTAX_LAB_DIR")).join(name)
}

/// The venv's Python with Perfetto's schema, or None (the test then
/// skips, unless the whole suite must run: `common::unavailable`).
fn perfetto_python() -> Option<PathBuf> {
    let python = std::env::var_os("KERNTAX_PERFETTO_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/perfetto-venv/bin/python")
        });
    let ok = Command::new(&python)
        .args([
            "-c",
            "import perfetto.protos.perfetto.trace.perfetto_trace_pb2",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    unavailable(&format!(
        "{} cannot import Perfetto's schema",
        python.display()
    ));
    None
}

#[test]
fn issue_22_the_icinga_lock_story_reads_back_with_perfettos_schema() {
    if !bpf_available() {
        return;
    }
    let Some(python) = perfetto_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pftrace");
    let program = lab("icinga_namespace");
    let p = run(
        &["--perfetto", trace.to_str().unwrap()],
        &[program.to_str().unwrap(), "bad", "8", "250000"],
    );
    assert!(p.output.status.success(), "{}", p.stderr);
    let r = &p.report;
    assert_eq!(
        (r.loss.trace_ringbuf_full, r.loss.trace_records_unkept),
        (0, 0),
        "{:?}",
        r.loss
    );
    let lock = r
        .locks
        .iter()
        .find(|l| l.symbol.as_deref() == Some("g_namespace_lock"))
        .expect("the namespace lock is in the report");
    // The thread that woke another most often, and that one.
    let release = r
        .wakeups
        .iter()
        .filter(|w| w.waker_in_target && w.waker_tid != w.woken_tid)
        .max_by_key(|w| w.count)
        .expect("the target's threads wake each other");
    let threads: Vec<u32> = r
        .threads
        .iter()
        .filter(|t| t.pid == r.target_pid)
        .map(|t| t.tid)
        .collect();
    assert_eq!(threads.len(), 9, "main and 8 workers: {threads:?}");
    let expect = serde_json::json!({
        "threads": threads,
        "releasers": [release.waker_tid],
        "woken": [release.woken_tid],
        "lock_slice_prefix": format!("lock wait {}", lock.display_name()),
        "lock_slice_threads": 2,
    });
    let expect_path = dir.path().join("expect.json");
    std::fs::write(&expect_path, expect.to_string()).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/perfetto/check_trace.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(&trace)
        .arg(&expect_path)
        .output()
        .expect("running check_trace.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.ends_with("ok\n"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let figure = |key: &str| -> u64 {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key}= in {stdout}"))
    };
    // Every lock wait that slept is a slice; the releaser's wake-ups of
    // the woken thread are at least the ones the report counted.
    assert!(figure("lock_slice_threads") >= 2, "{stdout}");
    assert!(
        figure("wakings_by_releasers") >= release.count,
        "{stdout}: {release:?}"
    );
    assert!(figure("flows") >= release.count, "{stdout}");
    eprintln!(
        "trace {} bytes; {stdout}",
        std::fs::metadata(&trace).unwrap().len()
    );
}

#[test]
fn a_trace_that_cannot_be_written_is_one_line_after_the_report() {
    if !bpf_available() {
        return;
    }
    let program = lab("icinga_namespace");
    let out = kerntax()
        .args(["run", "--perfetto", "/nonexistent-dir/t.pftrace", "--"])
        .args([program.to_str().unwrap(), "bad", "2", "1000"])
        .output()
        .expect("running kerntax");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let report_at = stderr.find("kerntax run:").expect("the report is printed");
    let error_at = stderr
        .find("kerntax: cannot write /nonexistent-dir/t.pftrace")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(report_at < error_at, "{stderr}");
    assert_eq!(stderr.matches("kerntax: ").count(), 1, "{stderr}");
    assert!(wait_programs_gone().is_empty());
}
