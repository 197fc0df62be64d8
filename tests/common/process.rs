//! Processes a test starts and signals: killed with their children and
//! reaped when a test fails before they end, and waited for by what /proc
//! shows of them (never by sleeping a fixed time).

use std::process::Child;
use std::time::{Duration, Instant};

/// How long a process may take to reach a state a test waits for.
const STATE_TIMEOUT: Duration = Duration::from_secs(20);

pub fn signal(pid: i32, sig: i32) {
    assert!(try_signal(pid, sig), "kill({pid}, {sig})");
}

pub fn try_signal(pid: i32, sig: i32) -> bool {
    // SAFETY: signalling a process the test started.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// A process a test started: killed with its children (a command kerntax
/// started) and reaped if the test fails before it ends.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let pid = self.0.id();
            let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .unwrap_or_default();
            for child in children.split_whitespace() {
                try_signal(child.parse().unwrap_or(0), libc::SIGKILL);
            }
            try_signal(pid as i32, libc::SIGCONT);
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The first child of process `parent` once it runs `comm` (a command
/// kerntax started, past its exec).
pub fn child_running(parent: u32, comm: &str) -> i32 {
    let deadline = Instant::now() + STATE_TIMEOUT;
    loop {
        let children = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
            .unwrap_or_default();
        for pid in children.split_whitespace() {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if name.trim_end() == comm {
                return pid.parse().unwrap();
            }
        }
        assert!(Instant::now() < deadline, "{comm} never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until process `pid` has `n` threads.
pub fn wait_threads(pid: i32, n: usize) {
    let deadline = Instant::now() + STATE_TIMEOUT;
    while std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count()) < n {
        assert!(Instant::now() < deadline, "{pid} never had {n} threads");
        std::thread::sleep(Duration::from_millis(20));
    }
}
