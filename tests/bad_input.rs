//! Issue #2: bad input gets one clear `kerntax:` line and the right exit
//! status, never a panic.

mod common;

use std::process::{Command, Stdio};

use common::*;

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_clean_error(out: &std::process::Output, code: i32, needle: &str) {
    let err = stderr_of(out);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("kerntax:")).collect();
    assert_eq!(lines.len(), 1, "one kerntax: line in: {err}");
}

#[test]
fn unknown_command_exits_127() {
    if !bpf_available() {
        return;
    }
    let out = kerntax()
        .args(["run", "--", "/nonexistent/program", "x"])
        .output()
        .unwrap();
    assert_clean_error(
        &out,
        127,
        "kerntax: /nonexistent/program: command not found",
    );
    let out = kerntax()
        .args(["run", "--", "no-such-command-kerntax"])
        .output()
        .unwrap();
    assert_clean_error(&out, 127, "command not found");
    assert!(wait_programs_gone().is_empty());
}

#[test]
fn non_executable_command_exits_126() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("data.txt");
    std::fs::write(&f, "not a program").unwrap();
    let out = kerntax().args(["run", "--"]).arg(&f).output().unwrap();
    assert_clean_error(&out, 126, "permission denied");
}

#[test]
fn a_failing_exec_exits_126_with_the_reason() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script");
    std::fs::write(&script, "#!/nonexistent/interpreter\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = kerntax().args(["run", "--"]).arg(&script).output().unwrap();
    assert_clean_error(&out, 126, "cannot execute: No such file or directory");
    let out = kerntax().args(["run", "--", "/"]).output().unwrap();
    assert_clean_error(&out, 126, "/: is a directory");
}

#[test]
fn nonexistent_pid() {
    if !bpf_available() {
        return;
    }
    let out = kerntax().args(["attach", "4194000"]).output().unwrap();
    assert_clean_error(&out, 1, "no such process: 4194000");
    let out = kerntax().args(["attach", "0"]).output().unwrap();
    assert_clean_error(&out, 1, "not a valid process id");
}

#[test]
fn a_thread_id_is_not_a_process() {
    if !bpf_available() {
        return;
    }
    // Tests run on threads of the test process: this thread's id is no pid.
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let pid = std::process::id();
    assert_ne!(
        tid as u32, pid,
        "the test harness runs tests off the main thread"
    );
    let out = kerntax()
        .args(["attach", &tid.to_string()])
        .output()
        .unwrap();
    assert_clean_error(
        &out,
        1,
        &format!("{tid} is a thread id, not a process id: attach to its process {pid}"),
    );
}

#[test]
fn usage_errors_exit_2() {
    let out = kerntax().args(["run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = kerntax().args(["attach", "notapid"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = kerntax()
        .args(["run", "--duration", "-1", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("positive number of seconds"));
    let out = kerntax()
        .args(["demo", "no-such-scenario"])
        .output()
        .unwrap();
    assert_clean_error(&out, 2, "no lab scenario named \"no-such-scenario\"");
}

#[test]
fn without_privileges_says_which_capabilities_are_missing() {
    if !bpf_available() {
        return;
    }
    // Drop to nobody with no capabilities (util-linux setpriv).
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_kerntax"))
        .args(["run", "--", "true"])
        .output()
        .expect("setpriv (util-linux) is installed");
    assert_clean_error(&out, 1, "missing CAP_BPF and CAP_PERFMON");
}

#[test]
fn bpf_refused_by_the_kernel_is_explained() {
    if !bpf_available() {
        return;
    }
    // In a new user namespace kerntax looks like root, but the kernel refuses BPF.
    let out = Command::new("unshare")
        .args(["--user", "--map-root-user"])
        .arg(env!("CARGO_BIN_EXE_kerntax"))
        .args(["run", "--", "true"])
        .stdin(Stdio::null())
        .output()
        .expect("unshare (util-linux) is installed");
    assert_clean_error(&out, 1, "the kernel refused BPF (EPERM)");
}

#[test]
fn missing_kernel_btf_is_explained() {
    if !bpf_available() {
        return;
    }
    let out = kerntax()
        .env("KERNTAX_BTF", "/nonexistent/vmlinux")
        .args(["run", "--", "true"])
        .output()
        .unwrap();
    assert_clean_error(&out, 1, "kernel BTF not found at /nonexistent/vmlinux");
}

#[test]
fn unwritable_json_path_is_an_error_after_the_run() {
    if !bpf_available() {
        return;
    }
    let out = kerntax()
        .args(["run", "--json", "/nonexistent-dir/r.json", "--", "true"])
        .output()
        .unwrap();
    assert_clean_error(&out, 1, "/nonexistent-dir/r.json");
    assert!(
        stderr_of(&out).contains("SYSCALL"),
        "the text report is still printed"
    );
}
