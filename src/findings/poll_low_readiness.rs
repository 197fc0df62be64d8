//! `poll.low-readiness` (ProL2TP): poll or select over many fds of which few
//! are ready per call. Each call hands the kernel the whole set and has it
//! check every fd, so the cost grows with the fds watched, not with the
//! work found. epoll keeps the set in the kernel and returns only what is
//! ready.

use super::common::*;
use crate::report::{Culprit, CulpritKind, Finding, Report};

pub const ID: &str = "poll.low-readiness";
/// The scanning calls; epoll's cost already follows readiness.
pub const SCANNING: &[&str] = &["poll", "ppoll", "select", "pselect6"];
pub const MIN_FDS_PER_CALL: f64 = 64.0;
/// Ready fds per fd passed.
pub const MAX_READY_RATIO: f64 = 0.05;
pub const MIN_CALLS: f64 = 100.0;
/// Share of the target's CPU time spent inside the calls.
pub const MIN_CPU_SHARE: f64 = 0.05;

pub fn check(r: &Report) -> Vec<Finding> {
    r.polls
        .iter()
        .filter(|p| SCANNING.contains(&p.syscall.as_str()))
        .filter_map(|p| {
            let cpu_share = ratio(p.cpu_ns as f64, cpu_ns(r));
            let ready_ratio = p.ready_ratio.unwrap_or(1.0);
            Draft {
                id: ID,
                title: format!(
                    "{} scans {:.0} fds per call to find {:.1} ready ({:.1}%)",
                    p.syscall,
                    p.fds_per_call,
                    p.ready_per_call,
                    ready_ratio * 100.0
                ),
                severity: cpu_share,
                evidence: vec![
                    at_least("fds_per_call", p.fds_per_call, MIN_FDS_PER_CALL),
                    at_most("ready_ratio", ready_ratio, MAX_READY_RATIO),
                    at_least("calls", p.calls as f64, MIN_CALLS),
                    at_least("cpu_share", cpu_share, MIN_CPU_SHARE),
                ],
                culprit: Culprit {
                    kind: CulpritKind::Syscall,
                    name: p.syscall.clone(),
                    frames: p
                        .callsites
                        .first()
                        .map(|s| s.frames.clone())
                        .unwrap_or_default(),
                },
                remedy: format!(
                    "Every {} call passes all {:.0} fds and the kernel checks each, to find about \
                     {:.1} ready. Register the fds once with epoll (epoll_create1, epoll_ctl \
                     EPOLL_CTL_ADD when a socket opens, EPOLL_CTL_DEL when it closes) and wait \
                     with epoll_wait, which costs per ready fd, not per fd watched. Timers kept \
                     in a sorted list have the same shape: use a heap or a timer wheel.",
                    p.syscall, p.fds_per_call, p.ready_per_call
                ),
                expected_gain: {
                    let frames = p
                        .callsites
                        .first()
                        .map(|s| s.frames.as_slice())
                        .unwrap_or(&[]);
                    let fix = super::gain::fixes::calls(
                        r,
                        &[(p.syscall.as_str(), frames)],
                        ratio(p.cpu_ns as f64 * (1.0 - ready_ratio), cpu_ns(r)),
                        format!(
                            "were the fds registered once with epoll instead of passed to {} \
                             on every call",
                            p.syscall
                        ),
                    );
                    super::gain::predict(r, &fix)
                },
            }
            .fire()
        })
        .collect()
}
