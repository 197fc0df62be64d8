//! Issue 19: busy-waits found however they spin. The fixture `waits` has
//! known truth: `turns T MS` runs T workers that wait for their turn by
//! polling a shared counter with plain loads (wait_turn: no PAUSE, no CAS,
//! no syscall), and prints the turns served; `spinyield MS N` spins with
//! PAUSE in one thread (pause_spinner) while another calls sched_yield N
//! times (yielder).

mod common;

use std::process::Command;

use common::*;
use kerntax::report::{Report, WaitClass};

fn spin_findings(r: &Report) -> Vec<&str> {
    r.findings
        .iter()
        .filter(|f| f.id == "spin.waste")
        .map(|f| f.culprit.name.as_str())
        .collect()
}

#[test]
fn four_workers_polling_their_turn_with_plain_loads_on_two_cpus_spin_and_one_does_not() {
    if !bpf_available() {
        return;
    }
    let four = run_ok("waits", &["turns", "4", "1500"]);
    let one = run_ok("waits", &["turns", "1", "1500"]);
    // The ground truth: one worker serves many times the turns of four.
    let (served4, served1) = (printed(&four, "turns"), printed(&one, "turns"));
    assert!(
        served1 > 5 * served4,
        "1 worker {served1}, 4 workers {served4}"
    );
    let r = &four.report;
    let f = &r.findings[0];
    assert_eq!(f.id, "spin.waste", "{:?}", r.findings);
    assert_eq!(f.culprit.name, "wait_turn", "{f:?}");
    assert!(f.title.contains("plain loads"), "{}", f.title);
    let l = &r.spin.loops[0];
    assert_eq!(
        (l.function.as_str(), l.kind.as_str()),
        ("wait_turn", "plain-loads")
    );
    assert!(l.threads >= 3 && l.share > 0.5, "{l:?}");
    assert_eq!(r.spin.load_spin_samples, l.samples);
    assert!(f.remedy.contains("condition variable"), "{}", f.remedy);
    // One worker never waits for a turn: no spinning at all.
    assert!(
        spin_findings(&one.report).is_empty(),
        "{:?}",
        one.report.findings
    );
    assert_eq!(
        one.report.spin.load_spin_samples, 0,
        "{:?}",
        one.report.spin
    );
}

#[test]
fn a_spin_loop_and_a_yield_loop_in_one_run_are_two_findings_and_yielding_is_never_io() {
    if !bpf_available() {
        return;
    }
    let p = run_ok("waits", &["spinyield", "800", "123456"]);
    let r = &p.report;
    let named = spin_findings(r);
    assert!(named.contains(&"pause_spinner"), "{:?}", r.findings);
    assert!(named.contains(&"yielder"), "{:?}", r.findings);
    let y = r.spin.yields.iter().map(|t| t.calls).max().unwrap_or(0);
    assert_eq!(y, 123_456, "{:?}", r.spin.yields);
    for s in r
        .waits
        .iter()
        .filter(|s| s.syscalls.contains_key("sched_yield"))
    {
        assert_eq!(s.class, WaitClass::Spin, "{s:?}");
    }
}

/// Issue 19 (found on the way): a command run by a relative path named
/// none of its own frames once it had exited, its mappings' path being
/// the relative one the exec gave.
#[test]
fn a_command_run_by_a_relative_path_has_its_frames_named() {
    if !bpf_available() {
        return;
    }
    let exe = fixture("waits");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_kerntax"))
        .current_dir(exe.parent().unwrap())
        .args(["run", "--json"])
        .arg(&json)
        .args(["--", "./waits", "cpu", "300"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = read_report(&json);
    assert_eq!(
        r.cpu_samples.functions[0].name, "burn_cpu",
        "{:?}",
        r.cpu_samples.functions
    );
}
