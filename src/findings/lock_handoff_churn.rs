//! `lock.handoff-churn` (RocketMQ): a plain mutex around a short critical
//! section, contended so often that most of its cost is the kernel handing
//! it over: a futex wait and a futex wake per contended acquisition, and the
//! context switches they bring. Spinning briefly before sleeping lets the
//! lock change hands in user space, since the holder is about to release it.
//!
//! Only pthread mutexes: a lock of the program's own that parks on a futex
//! may already be adaptive, and its fix would not be this one.

use super::common::*;
use crate::report::{Finding, LockKind, Report};
use crate::units::short;

pub const ID: &str = "lock.handoff-churn";
/// Futex wake-ups of waiters per second.
pub const MIN_WAKES_PER_S: f64 = 10_000.0;
/// Mean time per wait call: short critical sections hand over fast.
pub const MAX_MEAN_WAIT_NS: f64 = 50_000.0;
/// Share of the target's CPU time spent inside the lock's futex calls.
pub const MIN_LOCK_CPU_SHARE: f64 = 0.1;

pub fn check(r: &Report) -> Vec<Finding> {
    r.locks
        .iter()
        .filter(|l| l.contention && matches!(l.kind, LockKind::Mutex | LockKind::PiMutex))
        .filter_map(|l| {
            let cpu_share = ratio(l.cpu_ns as f64, cpu_ns(r));
            let mean_wait = ratio(l.wait_ns as f64, l.waits as f64);
            Draft {
                id: ID,
                title: format!(
                    "{} changes hands through the kernel {} times a second",
                    l.display_name(),
                    short(l.wakes_per_s)
                ),
                severity: cpu_share,
                evidence: vec![
                    at_least("wakes_per_s", l.wakes_per_s, MIN_WAKES_PER_S),
                    at_most("mean_wait_ns", mean_wait, MAX_MEAN_WAIT_NS),
                    at_least("lock_cpu_share", cpu_share, MIN_LOCK_CPU_SHARE),
                ],
                culprit: lock_culprit(l),
                remedy: "The critical section is short, but each contended acquisition costs a \
                         futex wait, a futex wake and often two context switches. Spin briefly \
                         before sleeping: an adaptive mutex (glibc: \
                         PTHREAD_MUTEX_ADAPTIVE_NP via pthread_mutexattr_settype) or a \
                         spin-then-park lock that spins k times with backoff, yields, adapts k \
                         and parks on a futex only when spinning keeps failing (RocketMQ's ABS \
                         lock). Shortening or splitting the critical section helps too."
                    .into(),
                expected_gain: cpu_gain(
                    r,
                    l.cpu_ns as f64,
                    "CPU time inside this lock's futex calls, which handoffs in user space avoid",
                ),
            }
            .fire()
        })
        .collect()
}
