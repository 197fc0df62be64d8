//! Signals and waiting: SIGINT/SIGTERM arrive on a socket the event loop
//! polls with the ring buffer and the target's pidfd; a started command is
//! let finish (or told to) when profiling stops first.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::target::{ExitStatus, Target};

/// SIGINT/SIGTERM arrive as bytes on a socket the event loop polls.
pub(super) struct Signals {
    pub(super) rx: UnixStream,
    ids: Vec<signal_hook::SigId>,
}

impl Signals {
    pub(super) fn new() -> Result<Signals> {
        let (rx, tx) = UnixStream::pair().context("creating the signal pipe")?;
        rx.set_nonblocking(true)?;
        let mut ids = vec![];
        for sig in [libc::SIGINT, libc::SIGTERM] {
            ids.push(
                signal_hook::low_level::pipe::register(sig, tx.try_clone()?)
                    .context("installing signal handlers")?,
            );
        }
        Ok(Signals { rx, ids })
    }

    /// True if a signal arrived since the last call.
    pub(super) fn take(&mut self) -> bool {
        let mut buf = [0u8; 16];
        let mut got = false;
        while let Ok(n) = self.rx.read(&mut buf) {
            if n == 0 {
                break;
            }
            got = true;
        }
        got
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// Waits until one of `fds` is readable or `timeout` passes.
pub(super) fn wait_readable(fds: &[i32], timeout: Option<Duration>) {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    // SAFETY: valid array of pollfd of the given length.
    unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
}

/// After profiling stopped early: lets a `run` command finish (it was sent
/// `forward` unless it exits on its own within a grace period) and returns
/// its status. A second Ctrl-C kills it.
pub(super) fn finish_child(
    target: &Target,
    signals: &mut Signals,
    forward: i32,
    grace: Duration,
) -> ExitStatus {
    let deadline = Instant::now() + grace;
    let mut forwarded = false;
    loop {
        if let Some(st) = target.try_reap() {
            return st;
        }
        let now = Instant::now();
        if !forwarded && now >= deadline {
            target.signal(forward);
            forwarded = true;
        }
        if signals.take() {
            target.signal(libc::SIGKILL);
        }
        let wait = if forwarded {
            None
        } else {
            Some(deadline - now)
        };
        wait_readable(&[target.pidfd(), signals.rx.as_raw_fd()], wait);
    }
}

/// Whether the target has exited; a command is reaped, its status put in
/// `reaped`.
pub(super) fn exited(target: &Target, reaped: &mut Option<ExitStatus>) -> bool {
    if target.is_child {
        *reaped = target.try_reap();
        reaped.is_some()
    } else {
        pidfd_ready(target.pidfd())
    }
}

fn pidfd_ready(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    unsafe { libc::poll(&mut p, 1, 0) > 0 && p.revents & libc::POLLIN != 0 }
}
