//! Asking a running HotSpot JVM for what profiling its JIT code needs: the
//! perf map of its compiled code (`Compiler.perfmap`) and whether its JIT
//! code keeps frame pointers (`VM.flags`), through the JVM's own attach
//! mechanism (what `jcmd` does), so a JVM needs no tool of its own JDK.
//!
//! How: the JVM starts its attach listener when it gets SIGQUIT while a file
//! `.attach_pidNSPID` exists in its working directory (or /tmp); it then
//! listens on `/tmp/.java_pidNSPID` (its /tmp) for `1\0CMD\0ARG\0\0\0` and
//! answers with a result code line and the command's output. SIGQUIT is
//! sent only to a JVM that handles it (one started with `-Xrs` would dump
//! core); one started with `-XX:+DisableAttachMechanism` never answers and
//! is given up on after a few seconds.
//!
//! For `run`, the JVMs kerntax starts get what they need from
//! `JAVA_TOOL_OPTIONS` instead (`run_options`), which every JVM reads.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::target::status_field;

/// What `run` adds to `JAVA_TOOL_OPTIONS` (after the user's own): frame
/// pointers in JIT code, and the perf map written when the JVM exits.
/// JVMs too old to know a flag ignore it instead of refusing to start.
pub const RUN_OPTIONS: &str = "-XX:+IgnoreUnrecognizedVMOptions -XX:+PreserveFramePointer \
    -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit";

/// `JAVA_TOOL_OPTIONS` for a command kerntax starts: the user's options,
/// then kerntax's.
pub fn run_options(user: Option<&str>) -> String {
    match user.map(str::trim).filter(|u| !u.is_empty()) {
        Some(u) => format!("{u} {RUN_OPTIONS}"),
        None => RUN_OPTIONS.to_string(),
    }
}

/// How long a JVM gets to start its attach listener, and to answer.
const LISTENER_WAIT: Duration = Duration::from_secs(5);
const ANSWER_WAIT: Duration = Duration::from_secs(20);

/// Whether `pid` runs a HotSpot JVM (its memory maps libjvm.so).
pub fn is_jvm(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/maps"))
        .is_ok_and(|m| m.split(|&b| b == b'\n').any(|l| l.ends_with(b"/libjvm.so")))
}

/// The process's PID in its own PID namespace (the JVM names its files by it).
fn ns_pid(pid: u32) -> u32 {
    status_field(pid, "NSpid")
        .and_then(|v| innermost_pid(&v))
        .unwrap_or(pid)
}

/// The innermost namespace's PID of a status file's `NSpid:` value.
pub fn innermost_pid(nspid: &str) -> Option<u32> {
    nspid.split_whitespace().last()?.parse().ok()
}

/// Whether the process has a handler for SIGQUIT (a JVM without -Xrs).
fn catches_sigquit(pid: u32) -> bool {
    status_field(pid, "SigCgt").is_some_and(|v| catches(&v, libc::SIGQUIT))
}

/// Whether a status file's `SigCgt:` mask (hex) has `signal` caught.
pub fn catches(sigcgt: &str, signal: i32) -> bool {
    let Some(bit) = signal
        .checked_sub(1)
        .and_then(|b| u32::try_from(b).ok())
        .filter(|&b| b < 64)
    else {
        return false;
    };
    u64::from_str_radix(sigcgt, 16).is_ok_and(|mask| mask & (1 << bit) != 0)
}

fn socket_path(pid: u32, nspid: u32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/root/tmp/.java_pid{nspid}"))
}

/// Starts the JVM's attach listener if it is not running yet.
fn start_listener(pid: u32, nspid: u32) -> Result<(), String> {
    let socket = socket_path(pid, nspid);
    if socket.exists() {
        return Ok(());
    }
    if !catches_sigquit(pid) {
        return Err("the JVM does not handle SIGQUIT (started with -Xrs?)".into());
    }
    let candidates = [
        PathBuf::from(format!("/proc/{pid}/cwd/.attach_pid{nspid}")),
        PathBuf::from(format!("/proc/{pid}/root/tmp/.attach_pid{nspid}")),
    ];
    let trigger = candidates
        .into_iter()
        .find(|p| std::fs::File::create(p).is_ok())
        .ok_or("cannot create the JVM's attach trigger file")?;
    // SAFETY: signalling a process; no memory is involved.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGQUIT) };
    let t0 = Instant::now();
    let started = loop {
        if socket.exists() {
            break true;
        }
        if t0.elapsed() > LISTENER_WAIT {
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = std::fs::remove_file(&trigger);
    if started {
        Ok(())
    } else {
        Err(format!(
            "the JVM did not start its attach listener within {} s \
             (-XX:+DisableAttachMechanism?)",
            LISTENER_WAIT.as_secs()
        ))
    }
}

/// Runs a diagnostic command (`jcmd`'s) in JVM `pid`; its output.
pub fn jcmd(pid: u32, command: &str) -> Result<String, String> {
    let nspid = ns_pid(pid);
    start_listener(pid, nspid)?;
    let mut s = UnixStream::connect(socket_path(pid, nspid))
        .map_err(|e| format!("connecting to the JVM's attach listener: {e}"))?;
    s.set_read_timeout(Some(ANSWER_WAIT)).ok();
    s.set_write_timeout(Some(ANSWER_WAIT)).ok();
    let request = format!("1\0jcmd\0{command}\0\0\0");
    s.write_all(request.as_bytes())
        .map_err(|e| format!("asking the JVM: {e}"))?;
    let mut answer = Vec::new();
    (&mut s)
        .take(MAX_ANSWER_BYTES)
        .read_to_end(&mut answer)
        .map_err(|e| format!("reading the JVM's answer: {e}"))?;
    parse_answer(&answer)
}

/// The most of an answer read: `Compiler.perfmap` and `VM.flags` answer in
/// a few hundred bytes (the map goes to a file); whatever answers more is
/// not a JVM's attach listener.
const MAX_ANSWER_BYTES: u64 = 1 << 20;

/// What an attach listener's answer says: its first line is a result code,
/// 0 for success, and the command's output follows. Not UTF-8 in places
/// costs those characters only; the error quotes at most one short line.
pub fn parse_answer(answer: &[u8]) -> Result<String, String> {
    let answer = String::from_utf8_lossy(answer);
    let (code, output) = answer.split_once('\n').unwrap_or((&answer, ""));
    match code.trim() {
        "0" => Ok(output.to_string()),
        c => Err(format!(
            "the JVM answered {}: {}",
            crate::names::shown(c, 16),
            crate::names::shown(output.lines().next().unwrap_or("").trim(), 200)
        )),
    }
}

/// What kerntax learned from a JVM that was still running when profiling
/// stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    /// Whether it wrote its perf map, or why not.
    pub perf_map: Result<(), String>,
    /// Whether its JIT code keeps frame pointers (None: unknown).
    pub frame_pointers: Option<bool>,
}

/// Asks a running JVM for its perf map and its frame-pointer flag.
pub fn ask(pid: u32) -> Asked {
    let perf_map = jcmd(pid, "Compiler.perfmap").map(|_| ());
    let frame_pointers = perf_map
        .as_ref()
        .ok()
        .and_then(|_| jcmd(pid, "VM.flags").ok())
        .map(|flags| flags.contains("-XX:+PreserveFramePointer"));
    Asked {
        perf_map,
        frame_pointers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kerntax_options_follow_the_users_own() {
        assert_eq!(run_options(None), RUN_OPTIONS);
        assert_eq!(run_options(Some("  ")), RUN_OPTIONS);
        assert_eq!(
            run_options(Some("-Xmx64m")),
            format!("-Xmx64m {RUN_OPTIONS}")
        );
    }

    /// Issue 24: the answer comes from whatever listens on the socket.
    #[test]
    fn answers_are_read_as_untrusted_text() {
        assert_eq!(parse_answer(b"0\nflags\n").unwrap(), "flags\n");
        assert_eq!(parse_answer(b" 0 \n").unwrap(), "");
        let e = parse_answer(b"-1\nUnknown diagnostic command\nmore").unwrap_err();
        assert_eq!(e, "the JVM answered -1: Unknown diagnostic command");
        let e = parse_answer(b"1\x1b[2J\n\xff\x07bell").unwrap_err();
        assert_eq!(e, "the JVM answered 1\u{fffd}[2J: \u{fffd}\u{fffd}bell");
        let long = format!("7\n{}", "y".repeat(500));
        let e = parse_answer(long.as_bytes()).unwrap_err();
        assert_eq!(e.chars().count(), "the JVM answered 7: ".len() + 200 + 1);
        assert!(parse_answer(b"").is_err());
    }

    #[test]
    fn caught_signals_and_namespace_pids_from_status_values() {
        assert!(catches("0000000000000004", libc::SIGQUIT));
        assert!(!catches("0000000000000002", libc::SIGQUIT));
        assert!(catches("8000000000000000", 64));
        assert!(!catches("8000000000000000", 65));
        assert!(!catches("ffffffffffffffff", 0));
        assert!(!catches("ffffffffffffffff", i32::MIN));
        assert!(!catches("not hex", 3));
        assert_eq!(innermost_pid("4242\t17"), Some(17));
        assert_eq!(innermost_pid(""), None);
        let status = "Name:\tjava\nNSpid:\t4242\t17\nSigCgt:\t0000000000000004\n";
        assert_eq!(
            crate::target::status_value(status, "NSpid").as_deref(),
            Some("4242\t17")
        );
        assert_eq!(crate::target::status_value(status, "Nam"), None);
    }

    #[test]
    fn a_process_that_is_not_a_jvm_is_not_signalled() {
        let me = std::process::id();
        assert!(!is_jvm(me));
    }
}
