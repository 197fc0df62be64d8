//! `lock.handoff-churn` (RocketMQ): a plain mutex around a short critical
//! section, contended so often that most of its cost is the kernel handing
//! it over: a futex wait and a futex wake per contended acquisition, and the
//! context switches they bring. Spinning briefly before sleeping lets the
//! lock change hands in user space, since the holder is about to release it.
//!
//! Only pthread mutexes: a lock of the program's own that parks on a futex
//! may already be adaptive, and its fix would not be this one. An
//! interpreter's global lock (a GIL, a GVL: a runtime lock with a churn
//! remedy in analyze/runtime_locks.rs) is judged whole, its mutex and its
//! condition variables together, with the runtime's remedy: its threads
//! hand it over around every small blocking call, and no setting of a
//! mutex changes that (issue 37). Idle CPUs are not asked for: the
//! hand-overs themselves keep the CPUs busy.

use std::collections::BTreeMap;

use super::common::*;
use crate::report::{Culprit, CulpritKind, Finding, LockKind, LockReport, Report};
use crate::units::short;

pub const ID: &str = "lock.handoff-churn";
/// Futex wake-ups of waiters per second.
pub const MIN_WAKES_PER_S: f64 = 10_000.0;
/// Mean time per wait call: short critical sections hand over fast.
pub const MAX_MEAN_WAIT_NS: f64 = 50_000.0;
/// Share of the target's CPU time spent inside the lock's futex calls.
pub const MIN_LOCK_CPU_SHARE: f64 = 0.1;
/// An interpreter's lock: the mean wait per thread queued for it (its
/// threads waiting on average, at least one), at most. Its threads give it
/// up at every blocking call and queue behind one another by design, so a
/// wait lasts as many turns as there are threads ahead, each turn short: on
/// a machine where CPython's four churning threads hand the GIL over 44 k
/// times a second, their waits averaged 79 us, 2.5 threads queued, 32 us a
/// turn (python-gil-churn; another machine's, with 5x the hand-overs, were
/// shorter than 50 us whole).
pub const MAX_TURN_NS: f64 = MAX_MEAN_WAIT_NS;

/// An interpreter lock's words together (its mutex and condition
/// variables): one finding per runtime lock.
fn runtime_churn(r: &Report) -> Vec<Finding> {
    let mut by_lock: BTreeMap<&str, Vec<&LockReport>> = BTreeMap::new();
    for l in r.locks.iter().filter(|l| l.contention) {
        if churn_remedy(l).is_some() {
            by_lock
                .entry(l.runtime_lock.as_deref().unwrap_or_default())
                .or_default()
                .push(l);
        }
    }
    by_lock
        .into_iter()
        .filter_map(|(name, words)| {
            let remedy = churn_remedy(words[0])?;
            let waits: u64 = words.iter().map(|l| l.waits).sum();
            let wait_ns: u64 = words.iter().map(|l| l.wait_ns).sum();
            let cpu = words.iter().map(|l| l.cpu_ns).sum::<u64>() as f64;
            let wakes_per_s: f64 = words.iter().map(|l| l.wakes_per_s).sum();
            let cpu_share = ratio(cpu, cpu_ns(r));
            let queued = ratio(wait_ns as f64, wall_ns(r)).max(1.0);
            let turn_ns = ratio(wait_ns as f64, waits as f64) / queued;
            // Where its threads give it up: the waiters' heaviest stack.
            let frames = words
                .iter()
                .flat_map(|l| l.waiter_stacks.iter())
                .max_by_key(|s| s.count)
                .map(|s| s.frames.clone())
                .unwrap_or_default();
            let at = interpreted_callers(&frames)
                .map(|c| format!(", taken back after calls in {c}"))
                .unwrap_or_default();
            Draft {
                id: ID,
                title: format!(
                    "{name} changes hands through the kernel {} times a second{at}: {:.0}% of the CPU goes to handing it over",
                    short(wakes_per_s),
                    cpu_share * 100.0
                ),
                severity: cpu_share,
                evidence: vec![
                    at_least("wakes_per_s", wakes_per_s, MIN_WAKES_PER_S),
                    at_most("turn_ns", turn_ns, MAX_TURN_NS),
                    at_least("lock_cpu_share", cpu_share, MIN_LOCK_CPU_SHARE),
                ],
                culprit: Culprit {
                    kind: CulpritKind::Lock,
                    name: name.to_string(),
                    frames,
                },
                remedy: remedy.to_string(),
                expected_gain: super::gain::predict(
                    r,
                    &super::gain::fixes::lock(
                        r,
                        &[],
                        words.iter().map(|l| l.blocked_ns as f64).sum(),
                        ratio(cpu, all_lock_cpu_ns(r)),
                        format!("were {name} handed over far less often"),
                    ),
                ),
            }
            .fire()
        })
        .collect()
}

pub fn check(r: &Report) -> Vec<Finding> {
    let mut found = runtime_churn(r);
    found.extend(mutex_churn(r));
    found
}

fn mutex_churn(r: &Report) -> Vec<Finding> {
    r.locks
        .iter()
        .filter(|l| l.contention && matches!(l.kind, LockKind::Mutex | LockKind::PiMutex))
        .filter(|l| churn_remedy(l).is_none())
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
                expected_gain: super::gain::fixes::of_lock(
                    r,
                    l,
                    format!(
                        "were {} handed over in user space: its futex calls gone",
                        l.display_name()
                    ),
                ),
            }
            .fire()
        })
        .collect()
}
