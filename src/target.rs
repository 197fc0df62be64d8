//! The profiled process: started stopped right after its exec (so not one of
//! its own system calls is missed), or found by PID; watched through a pidfd
//! so its exit wakes the event loop at once.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use anyhow::{Context, Result};

use crate::error::Exit;

pub struct Target {
    pub pid: u32,
    pidfd: OwnedFd,
    /// We started it, so we reap it and report its exit status.
    pub is_child: bool,
}

fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the returned fd is owned by us on success.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The process (thread group) a thread id belongs to.
fn thread_group_of(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// How a process ended, as a shell reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
}

impl ExitStatus {
    /// From a wait status (`exit code << 8 | signal`).
    pub fn from_wait_status(status: i32) -> ExitStatus {
        if libc::WIFSIGNALED(status) {
            ExitStatus::Signal(libc::WTERMSIG(status))
        } else {
            ExitStatus::Code(libc::WEXITSTATUS(status))
        }
    }

    /// The shell convention: the code, or 128 + the signal number.
    pub fn shell_code(self) -> i32 {
        match self {
            ExitStatus::Code(c) => c,
            ExitStatus::Signal(s) => 128 + s,
        }
    }
}

impl Target {
    /// Starts `argv` stopped just after its exec. Call `release` once it is
    /// tracked. Unknown commands exit 127 and unexecutable ones 126, as in a shell.
    pub fn spawn_stopped(argv: &[OsString]) -> Result<Target> {
        let program = &argv[0];
        let mut cmd = Command::new(program);
        cmd.args(&argv[1..]);
        // SAFETY: the closure runs between fork and exec and makes only an
        // async-signal-safe system call.
        unsafe {
            cmd.pre_exec(|| {
                if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) == -1 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| {
            let name = program.to_string_lossy();
            match e.kind() {
                io::ErrorKind::NotFound => Exit::new(127, format!("{name}: command not found")),
                io::ErrorKind::PermissionDenied => {
                    Exit::new(126, format!("{name}: permission denied"))
                }
                _ => Exit::new(126, format!("{name}: cannot execute: {e}")),
            }
        })?;
        let pid = child.id();
        // Once exec succeeded the child stops with SIGTRAP (PTRACE_TRACEME).
        let mut status = 0;
        // SAFETY: waiting on our own child.
        let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, 0) };
        if r < 0 {
            return Err(io::Error::last_os_error()).context("waiting for the command to start");
        }
        if !libc::WIFSTOPPED(status) {
            let st = ExitStatus::from_wait_status(status);
            return Err(Exit::new(
                st.shell_code(),
                format!(
                    "{} ended before it could be profiled",
                    program.to_string_lossy()
                ),
            )
            .into());
        }
        let pidfd = pidfd_open(pid).context("opening a pidfd for the command")?;
        Ok(Target {
            pid,
            pidfd,
            is_child: true,
        })
    }

    /// Lets a target started by `spawn_stopped` run, untraced.
    pub fn release(&self) -> Result<()> {
        // SAFETY: detaching from our stopped tracee; signal 0 means none.
        let r = unsafe { libc::ptrace(libc::PTRACE_DETACH, self.pid as libc::pid_t, 0, 0) };
        if r == -1 {
            return Err(io::Error::last_os_error()).context("letting the command run");
        }
        Ok(())
    }

    /// An existing process. Fails clearly for a missing or foreign PID.
    pub fn attach(pid: u32) -> Result<Target> {
        if pid == 0 || pid > i32::MAX as u32 {
            return Err(Exit::new(1, format!("{pid} is not a valid process id")).into());
        }
        let pidfd = pidfd_open(pid).map_err(|e| match e.raw_os_error() {
            Some(libc::ESRCH) => Exit::new(1, format!("no such process: {pid}")),
            Some(libc::EINVAL) | Some(libc::ENOENT) => match thread_group_of(pid) {
                Some(tgid) if tgid != pid => Exit::new(
                    1,
                    format!("{pid} is a thread id, not a process id: attach to its process {tgid}"),
                ),
                _ => Exit::new(1, format!("no such process: {pid}")),
            },
            Some(libc::EPERM) | Some(libc::EACCES) => {
                Exit::new(1, format!("no permission to observe process {pid}"))
            }
            _ => Exit::new(1, format!("cannot open process {pid}: {e}")),
        })?;
        // Reading its memory map for stacks needs ptrace-level access.
        if let Err(e) = std::fs::File::open(format!("/proc/{pid}/maps")) {
            return Err(Exit::new(
                1,
                format!("no permission to observe process {pid}: /proc/{pid}/maps: {e}"),
            )
            .into());
        }
        Ok(Target {
            pid,
            pidfd,
            is_child: false,
        })
    }

    pub fn pidfd(&self) -> RawFd {
        self.pidfd.as_raw_fd()
    }

    /// Reaps our child if it has exited, without blocking.
    pub fn try_reap(&self) -> Option<ExitStatus> {
        if !self.is_child {
            return None;
        }
        let mut status = 0;
        // SAFETY: waiting on our own child.
        let r = unsafe { libc::waitpid(self.pid as libc::pid_t, &mut status, libc::WNOHANG) };
        (r == self.pid as i32).then(|| ExitStatus::from_wait_status(status))
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: pidfd_send_signal on our pidfd cannot hit a recycled PID.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_codes_of_exit_and_signal() {
        assert_eq!(ExitStatus::from_wait_status(3 << 8), ExitStatus::Code(3));
        assert_eq!(ExitStatus::from_wait_status(9), ExitStatus::Signal(9));
        assert_eq!(ExitStatus::Signal(9).shell_code(), 137);
        assert_eq!(ExitStatus::Code(0).shell_code(), 0);
    }
}
