//! `lock.futile-churn`: a lock taken so often by several threads, for such
//! short holds, that its cost is not sleep but the kernel calls around it:
//! wait calls that return at once because the lock changed meanwhile
//! (EAGAIN), wake calls that find nobody to wake, and the cache line
//! bouncing between CPUs. Little time is spent asleep, so rules that look
//! for waiting miss it; the system time and the rate give it away.
//!
//! A word of an interpreter's global lock (a GIL's mutex) churns because
//! its threads give the lock up at every blocking call: no striping or
//! lock-free structure applies, and the runtime's churn remedy is the fix
//! (a CI run named the GIL's mutex here with the generic remedy).

use super::common::*;
use crate::report::{Finding, Report};
use crate::units::short;

pub const ID: &str = "lock.futile-churn";

/// What to do about a lock of the program's own that churns.
const GENERAL_REMEDY: &str = "Threads take this lock for very short holds, so often that they keep \
    colliding: most wait calls find it already changed and return at once, \
    most wake calls find nobody asleep, and its cache line moves from CPU \
    to CPU on every acquisition. Take it less often (batch the operations, \
    keep a per-thread cache in front of it), split it (a striped lock: N \
    locks chosen by hash of the key, as a sharded cache does), or make the \
    structure lock-free for reads; fewer threads than CPUs on it also \
    stops the futile calls.";
/// Wait calls on the lock per second.
pub const MIN_WAITS_PER_S: f64 = 5_000.0;
/// Share of the wait calls that returned at once (EAGAIN).
pub const MIN_FUTILE_SHARE: f64 = 0.3;
/// Share of the target's CPU time spent inside the lock's futex calls.
pub const MIN_LOCK_CPU_SHARE: f64 = 0.02;
/// Threads taking part.
pub const MIN_THREADS: f64 = 2.0;

pub fn check(r: &Report) -> Vec<Finding> {
    let wall_s = wall_ns(r) / 1e9;
    r.locks
        .iter()
        .filter(|l| l.contention)
        .filter_map(|l| {
            let waits_per_s = ratio(l.waits as f64, wall_s);
            let futile_share = ratio(l.futile as f64, l.waits as f64);
            let cpu_share = ratio(l.cpu_ns as f64, cpu_ns(r));
            let missed = l.wakes.saturating_sub(l.woken);
            Draft {
                id: ID,
                title: format!(
                    "{} is fought over {} times a second: {:.0}% of the waits return at once, \
                     {:.0}% of the wakes wake nobody",
                    l.display_name(),
                    short(waits_per_s),
                    futile_share * 100.0,
                    ratio(missed as f64, l.wakes as f64) * 100.0
                ),
                severity: cpu_share,
                evidence: vec![
                    at_least("waits_per_s", waits_per_s, MIN_WAITS_PER_S),
                    at_least("futile_share", futile_share, MIN_FUTILE_SHARE),
                    at_least("lock_cpu_share", cpu_share, MIN_LOCK_CPU_SHARE),
                    at_least("waiting_threads", f64::from(l.threads), MIN_THREADS),
                ],
                culprit: lock_culprit(l),
                remedy: churn_remedy(l).unwrap_or(GENERAL_REMEDY).to_string(),
                expected_gain: super::gain::fixes::of_churn(
                    r,
                    l,
                    format!(
                        "were threads no longer colliding on {}: its futex calls and its \
                         lock functions' CPU gone",
                        l.display_name()
                    ),
                ),
            }
            .fire()
        })
        .collect()
}
