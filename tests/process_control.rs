//! Issue #2: exit statuses, a target killed mid-run, Ctrl-C, --duration,
//! attach, and no BPF program left behind whatever the ending.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::process::{signal, try_signal};
use common::*;
use kerntax::report::{EndReason, Mode, Report};

/// `kerntax run --json JSON -- calls sleep 30000`, stderr captured.
fn sleeping_run(json: &std::path::Path) -> Command {
    let mut cmd = kerntax();
    cmd.args(["run", "--json"])
        .arg(json)
        .arg("--")
        .arg(fixture("calls"))
        .args(["sleep", "30000"]);
    cmd.stderr(Stdio::piped());
    cmd
}

#[test]
fn kerntax_exits_with_the_commands_status() {
    if !bpf_available() {
        return;
    }
    let p = run_fixture(&["exit", "7"]);
    assert_eq!(p.output.status.code(), Some(7));
    assert_eq!(p.report.exit_status, Some(7));
    assert_eq!(p.report.end_reason, EndReason::TargetExited);
    assert_eq!(p.report.mode, Mode::Run);
    assert_eq!(
        p.report.command.as_ref().unwrap()[1..],
        ["exit".to_string(), "7".to_string()]
    );
}

#[test]
fn a_target_killed_mid_run_still_gets_a_report_and_128_plus_signal() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let child = sleeping_run(&json).spawn().unwrap();
    // Find the fixture (kerntax's child) and kill it.
    let target = loop {
        std::thread::sleep(Duration::from_millis(100));
        let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id()))
            .unwrap_or_default();
        if let Some(pid) = children.split_whitespace().next() {
            break pid.parse::<i32>().unwrap();
        }
    };
    std::thread::sleep(Duration::from_millis(200));
    signal(target, libc::SIGKILL);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(137));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("killed by SIGKILL"), "{stderr}");
    let r = read_report(&json);
    assert_eq!(
        (r.exit_status, r.exit_signal.as_deref()),
        (Some(137), Some("SIGKILL"))
    );
    assert_eq!(r.processes[0].exit_status, Some(137));
    assert_eq!(syscall(&r, "clock_nanosleep").calls, 1);
    assert_eq!(
        syscall(&r, "clock_nanosleep").unfinished,
        0,
        "the sleep ended by the kill is still a return"
    );
    assert!(wait_programs_gone().is_empty());
}

/// Ctrl-C in a terminal signals the whole foreground process group.
#[test]
fn ctrl_c_prints_and_writes_the_report_and_exits_130() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut cmd = sleeping_run(&json);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(800));
    // The process group this test created.
    signal(-(child.id() as i32), libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("interrupted") && stderr.contains("SYSCALL"),
        "{stderr}"
    );
    let r = read_report(&json);
    assert_eq!(r.end_reason, EndReason::Interrupted);
    assert_eq!(
        (r.exit_status, r.exit_signal.as_deref()),
        (Some(130), Some("SIGINT"))
    );
    assert!(
        r.duration_ns >= 500_000_000,
        "profiled until the signal, not the end of the sleep"
    );
    assert!(wait_programs_gone().is_empty());
}

/// SIGINT sent to kerntax alone is forwarded to the command.
#[test]
fn sigint_to_kerntax_alone_is_forwarded_to_the_command() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let child = sleeping_run(&json).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(800));
    signal(child.id() as i32, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(read_report(&json).end_reason, EndReason::Interrupted);
}

#[test]
fn duration_stops_profiling_and_terminates_the_command() {
    if !bpf_available() {
        return;
    }
    let exe = fixture("calls");
    let p = run(
        &["--duration", "0.5"],
        &[exe.to_str().unwrap(), "sleep", "30000"],
    );
    assert_eq!(p.report.end_reason, EndReason::Duration);
    assert_eq!(p.output.status.code(), Some(128 + libc::SIGTERM));
    assert!(p.report.duration_ns >= 500_000_000 && p.report.duration_ns < 10_000_000_000);
    assert!(p.stderr.contains("duration reached"), "{}", p.stderr);
}

/// Attaches to `calls MODE N`, which waits for stdin, lets it go, and
/// returns the report once it has exited.
fn attach_to_gated(mode: &str, n: &str) -> Report {
    let mut target = Command::new(fixture("calls"))
        .args([mode, n])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut k = kerntax()
        .arg("attach")
        .arg(target.id().to_string())
        .arg("--json")
        .arg(&json)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(k.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(
        line.contains(&format!("profiling pid {}", target.id())),
        "{line}"
    );
    target.stdin.take().unwrap().write_all(b"go").unwrap();
    assert!(target.wait().unwrap().success());
    assert_eq!(k.wait().unwrap().code(), Some(0));
    read_report(&json)
}

#[test]
fn attach_counts_exactly_what_happens_while_attached() {
    if !bpf_available() {
        return;
    }
    let r = attach_to_gated("gated", "30000");
    assert_eq!(r.mode, Mode::Attach);
    assert_eq!(r.command, None);
    assert_eq!(r.end_reason, EndReason::TargetExited);
    assert_eq!(r.exit_status, Some(0));
    assert_eq!(syscall(&r, "getppid").calls, 30_000);
    assert_eq!(syscall(&r, "exit_group").calls, 1);
    assert!(has_frame(
        &syscall(&r, "getppid").callsites[0].frames,
        "call_getppid"
    ));
    assert!(wait_programs_gone().is_empty());
}

#[test]
fn attach_adopts_children_that_existed_before() {
    if !bpf_available() {
        return;
    }
    let r = attach_to_gated("childgated", "20000");
    assert_eq!(syscall(&r, "getppid").calls, 20_000);
    assert_eq!(r.processes.len(), 2);
    let child = r.processes.iter().find(|p| p.pid != r.target_pid).unwrap();
    assert_eq!((child.ppid, child.exit_status), (r.target_pid, Some(0)));
}

#[test]
fn attach_stops_at_duration_and_leaves_the_target_running() {
    if !bpf_available() {
        return;
    }
    let mut target = Command::new(fixture("calls"))
        .args(["sleep", "30000"])
        .spawn()
        .unwrap();
    let out = kerntax()
        .args(["attach", &target.id().to_string(), "--duration", "0.3"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("duration reached"));
    assert_eq!(
        target.try_wait().unwrap(),
        None,
        "the attached process keeps running"
    );
    target.kill().unwrap();
    target.wait().unwrap();
}

#[test]
fn a_killed_kerntax_leaves_no_bpf_program_attached() {
    if !bpf_available() {
        return;
    }
    let mut k = kerntax()
        .args(["run", "--"])
        .arg(fixture("calls"))
        .args(["sleep", "30000"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut loaded = vec![];
    for _ in 0..50 {
        loaded = kerntax_programs();
        if loaded.iter().any(|n| n == "kt_sys_enter") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        loaded.iter().any(|n| n == "kt_sys_enter"),
        "kerntax attached: {loaded:?}"
    );
    let target = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", k.id())).unwrap();
    k.kill().unwrap();
    k.wait().unwrap();
    assert_eq!(wait_programs_gone(), Vec::<String>::new());
    for pid in target.split_whitespace() {
        // The orphaned fixture this test started.
        try_signal(pid.parse().unwrap(), libc::SIGKILL);
    }
}

/// Starting a command needs no ptrace, so kerntax itself can be traced.
#[test]
fn kerntax_runs_under_strace() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = Command::new("strace")
        .args(["-f", "-o", "/dev/null"])
        .arg(env!("CARGO_BIN_EXE_kerntax"))
        .args(["run", "--json"])
        .arg(&json)
        .arg("--")
        .arg(fixture("calls"))
        .args(["getppid", "1000"])
        .output()
        .expect("strace is installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(syscall(&read_report(&json), "getppid").calls, 1000);
}

/// kerntax attached to its own parent must not profile itself.
#[test]
fn attaching_to_kerntaxs_parent_leaves_kerntax_out() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let k = kerntax()
        .args([
            "attach",
            &std::process::id().to_string(),
            "--duration",
            "0.3",
            "--json",
        ])
        .arg(&json)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let kerntax_pid = k.id();
    let out = k.wait_with_output().unwrap();
    assert!(out.status.success());
    let r = read_report(&json);
    assert_eq!(r.target_pid, std::process::id());
    assert!(
        r.processes.iter().all(|p| p.pid != kerntax_pid),
        "{:?}",
        r.processes
    );
}
