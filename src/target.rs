//! The profiled process: started stopped just before its exec (so not one of
//! its system calls is missed), or found by PID; watched through a pidfd so
//! its exit wakes the event loop at once.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::error::Exit;

pub struct Target {
    pub pid: u32,
    pidfd: OwnedFd,
    /// We started it, so we reap it and report its exit status.
    pub is_child: bool,
    /// Until `release`: closes at a successful exec, or carries its errno.
    exec_report: Option<OwnedFd>,
    name: String,
}

/// Finds a command as a shell would: a name with a slash is a path, others
/// are looked up in PATH.
fn resolve_command(cmd: &OsStr) -> Result<PathBuf, Exit> {
    let name = cmd.to_string_lossy();
    let executable = |p: &Path| {
        let c = CString::new(p.as_os_str().as_bytes()).ok();
        // SAFETY: access on a valid C string.
        c.is_some_and(|c| unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0) && p.is_file()
    };
    if cmd.as_bytes().contains(&b'/') {
        let p = PathBuf::from(cmd);
        return match p.metadata() {
            Err(_) => Err(Exit::new(127, format!("{name}: command not found"))),
            Ok(m) if m.is_dir() => Err(Exit::new(126, format!("{name}: is a directory"))),
            Ok(_) if !executable(&p) => Err(Exit::new(126, format!("{name}: permission denied"))),
            Ok(_) => Ok(p),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let candidates: Vec<PathBuf> = std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .filter(|p| p.exists())
        .collect();
    if let Some(p) = candidates.iter().find(|p| executable(p)) {
        return Ok(p.clone());
    }
    match candidates.first() {
        Some(_) => Err(Exit::new(126, format!("{name}: permission denied"))),
        None => Err(Exit::new(127, format!("{name}: command not found"))),
    }
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

/// A line's value from /proc/WHO/status (WHO a pid, or `self`), trimmed.
/// The file is read as bytes: a process's name there is whatever bytes it
/// chose, and must not cost the other fields.
pub fn status_field(who: impl std::fmt::Display, field: &str) -> Option<String> {
    let status = std::fs::read(format!("/proc/{who}/status")).ok()?;
    status_value(&String::from_utf8_lossy(&status), field)
}

/// `field`'s value in the text of a /proc status file, trimmed.
pub fn status_value(status: &str, field: &str) -> Option<String> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// The process (thread group) a thread id belongs to.
fn thread_group_of(tid: u32) -> Option<u32> {
    status_field(tid, "Tgid")?.parse().ok()
}

/// How a process ended, as a shell reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// Starts `argv` stopped just before its exec: call `release` once it is
    /// tracked, and the exec is the first thing it does. Unknown commands
    /// exit 127 and unexecutable ones 126, as in a shell.
    ///
    /// Why not std::process::Command: its spawn waits for the exec, which a
    /// child stopped before it never reaches. Why not ptrace: kerntax must
    /// work under strace or gdb too.
    /// `stdout`, if given, becomes the command's standard output; `env`
    /// sets (or replaces) variables of kerntax's environment for it.
    pub fn spawn_stopped(
        argv: &[OsString],
        stdout: Option<RawFd>,
        quiet: Option<RawFd>,
        env: &[(OsString, OsString)],
    ) -> Result<Target> {
        let name = argv[0].to_string_lossy().into_owned();
        let path = resolve_command(&argv[0])?;
        let cstr = |s: &OsStr| {
            CString::new(s.as_bytes())
                .map_err(|_| Exit::new(126, format!("{name}: argument contains a NUL byte")))
        };
        let path_c = cstr(path.as_os_str())?;
        let args_c: Vec<CString> = argv.iter().map(|a| cstr(a)).collect::<Result<_, _>>()?;
        let mut args_p: Vec<*const libc::c_char> = args_c.iter().map(|a| a.as_ptr()).collect();
        args_p.push(std::ptr::null());
        let mut vars: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(k, _)| !env.iter().any(|(e, _)| e == k))
            .collect();
        vars.extend(env.iter().cloned());
        let env_c: Vec<CString> = vars
            .iter()
            .filter_map(|(k, v)| {
                let mut kv = k.clone();
                kv.push("=");
                kv.push(v);
                CString::new(kv.into_vec()).ok()
            })
            .collect();
        let mut env_p: Vec<*const libc::c_char> = env_c.iter().map(|e| e.as_ptr()).collect();
        env_p.push(std::ptr::null());
        let mut report = [0i32; 2];
        // SAFETY: creating a pipe into a valid array.
        if unsafe { libc::pipe2(report.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error()).context("creating a pipe");
        }
        // SAFETY: each fd is fresh and owned once.
        let (rd, wr) = unsafe {
            (
                OwnedFd::from_raw_fd(report[0]),
                OwnedFd::from_raw_fd(report[1]),
            )
        };

        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the child makes only async-signal-safe calls (signal,
        // prctl, getppid, kill, execve, write, _exit) on data prepared
        // before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error()).context("starting the command");
        }
        if pid == 0 {
            unsafe {
                // Rust ignores SIGPIPE; a command must start with the default.
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                if let Some(fd) = stdout
                    && libc::dup2(fd, 1) < 0
                {
                    libc::_exit(126);
                }
                if let Some(fd) = quiet
                    && (libc::dup2(fd, 0) < 0 || libc::dup2(fd, 2) < 0)
                {
                    libc::_exit(126);
                }
                // Stopped until kerntax releases it, the child holds copies
                // of kerntax's BPF fds: were kerntax killed meanwhile, it
                // would stay stopped for ever and keep every program loaded
                // (suite 15: a SIGKILL landed between attach and release).
                // So it dies with kerntax until then, and not after.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                if libc::getppid() != parent {
                    libc::_exit(127);
                }
                libc::kill(libc::getpid(), libc::SIGSTOP);
                libc::prctl(libc::PR_SET_PDEATHSIG, 0 as libc::c_ulong);
                libc::execve(path_c.as_ptr(), args_p.as_ptr(), env_p.as_ptr());
                let err = *libc::__errno_location();
                libc::write(wr.as_raw_fd(), (&err as *const i32).cast(), 4);
                libc::_exit(127);
            }
        }
        drop(wr);
        let pid = pid as u32;
        let mut status = 0;
        // SAFETY: waiting on our own child.
        let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WUNTRACED) };
        if r < 0 || !libc::WIFSTOPPED(status) {
            return Err(Exit::new(126, format!("{name}: could not be started")).into());
        }
        let pidfd = pidfd_open(pid).context("opening a pidfd for the command")?;
        Ok(Target {
            pid,
            pidfd,
            is_child: true,
            exec_report: Some(rd),
            name,
        })
    }

    /// Lets a target started by `spawn_stopped` run, and waits for its exec:
    /// a failed exec ends kerntax with the shell's status for it. Nothing to
    /// do for an attached process.
    pub fn release(&mut self) -> Result<()> {
        self.signal(libc::SIGCONT);
        let Some(rd) = self.exec_report.take() else {
            return Ok(());
        };
        let mut err = [0u8; 4];
        // SAFETY: reading into a valid buffer; EOF means execve succeeded.
        let n = unsafe { libc::read(rd.as_raw_fd(), err.as_mut_ptr().cast(), 4) };
        if n == 4 {
            let errno = i32::from_ne_bytes(err);
            while self.try_reap().is_none() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let e = io::Error::from_raw_os_error(errno);
            return Err(Exit::new(126, format!("{}: cannot execute: {e}", self.name)).into());
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
            exec_report: None,
            name: pid.to_string(),
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
