//! Issue #2: `kerntax demo` runs the Ruby lab scenario, bad then fixed, and
//! its figures are exact.

mod common;

use common::*;
use kerntax::report::Report;

fn load(path: std::path::PathBuf) -> Report {
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn demo_lists_its_scenarios() {
    let out = kerntax().args(["demo", "--list"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("ruby-switch"));
}

#[test]
fn ruby_switch_bad_makes_one_sigprocmask_per_switch_and_fixed_none() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = kerntax()
        .args(["demo", "ruby-switch", "--json"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("--- bad:")
            && stdout.contains("--- fixed:")
            && stdout.contains("bad vs fixed"),
        "{stdout}"
    );
    // The lab program prints its own throughput.
    assert!(
        stdout.contains("ruby-switch bad: 2000000 switches in"),
        "{stdout}"
    );

    let bad = load(dir.path().join("ruby-switch-bad.json"));
    let fixed = load(dir.path().join("ruby-switch-fixed.json"));
    // 2,000,000 swapcontext switches plus the one getcontext that set up the green thread.
    let sigmask = syscall(&bad, "rt_sigprocmask");
    assert_eq!(sigmask.calls, 2_000_001);
    assert!(
        has_frame(&sigmask.callsites[0].frames, "swapcontext"),
        "{:?}",
        sigmask.callsites[0].frames
    );
    let sites: Vec<String> = sigmask
        .callsites
        .iter()
        .flat_map(|c| c.frames.clone())
        .collect();
    assert!(has_frame(&sites, "scheduler_swapcontext"), "{sites:?}");
    assert!(has_frame(&sites, "green_thread_swapcontext"), "{sites:?}");
    // getcontext, the bootstrap swapcontext and the green thread's first hop back.
    assert_eq!(syscall(&fixed, "rt_sigprocmask").calls, 3);
    assert!(bad.summary.syscalls > 100 * fixed.summary.syscalls);
}
