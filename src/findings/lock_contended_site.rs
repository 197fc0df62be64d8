//! `lock.contended-site`: threads or processes with work queue at one place
//! in the program for something one of them holds, and it costs them a real
//! share of their time. The general lock finding: it holds whatever the
//! lock is made of, including a lock of the program's own whose waiters
//! each sleep on their own semaphore or latch and are woken by the holder
//! with a signal or a write across processes (a database's row and lock
//! manager waits), where no single futex word shows the contention.
//!
//! A more specific finding on the same lock (read-mostly, global, churning)
//! comes first; this one follows it.

use super::common::*;
use crate::report::{Culprit, CulpritKind, Finding, Report};
use crate::units::short;

pub const ID: &str = "lock.contended-site";
/// Threads or processes waiting there.
pub const MIN_WAITERS: f64 = 2.0;
/// Share of their time spent waiting there.
pub const MIN_WAITING_SHARE: f64 = 0.2;
/// Its share of all waiting at contended sites.
pub const MIN_SHARE_OF_CONTENDED_WAIT: f64 = 0.5;

pub fn check(r: &Report) -> Vec<Finding> {
    let all_wait = contended_site_wait_ns(r);
    contention_units(r)
        .into_iter()
        .filter_map(|u| {
            let waiting = u.waiting_share(r);
            let handoff = u.cross_process_handoff();
            let release = u.top_release();
            let released_at = release
                .and_then(|x| {
                    let lock = u.sites.first().and_then(|s| s.runtime_lock.as_deref());
                    crate::analyze::waits::release_site(x, lock)
                })
                .unwrap_or_else(|| "the holder".into());
            let rate = release.map_or(0.0, |x| ratio(x.count as f64, wall_ns(r) / 1e9));
            let (title, how) = match handoff {
                Some(h) => (
                    format!(
                        "{} processes queue at {}: each sleeps on its own semaphore or latch until \
                         the holder wakes it ({}, {}/s)",
                        u.processes,
                        u.name,
                        h.mechanism,
                        short(rate)
                    ),
                    format!(
                        "Each waiter sleeps on a semaphore or latch of its own and the process \
                         that releases the lock ({released_at}) wakes the next ones with a {}: \
                         a syscall and a context switch per waiter per hand-over, and every \
                         waiter woken may find the lock taken again. ",
                        h.mechanism
                    ),
                ),
                None => (
                    format!(
                        "{} {} queue at {}: {:.0}% of their time",
                        u.waiters.len(),
                        if u.processes > 1 {
                            "processes' threads"
                        } else {
                            "threads"
                        },
                        u.name,
                        waiting * 100.0
                    ),
                    format!(
                        "The waits end when {released_at} releases it{}. ",
                        release.map_or(String::new(), |x| format!(" ({})", x.mechanism))
                    ),
                ),
            };
            Draft {
                id: ID,
                title,
                severity: waiting,
                evidence: vec![
                    at_least("waiters", u.waiters.len() as f64, MIN_WAITERS),
                    at_least("waiting_share", waiting, MIN_WAITING_SHARE),
                    at_least(
                        "share_of_contended_wait",
                        ratio(u.wait_ns, all_wait),
                        MIN_SHARE_OF_CONTENDED_WAIT,
                    ),
                ],
                culprit: Culprit {
                    kind: CulpritKind::Lock,
                    name: u.name.clone(),
                    frames: u.frames(),
                },
                remedy: format!(
                    "{}{how}{}",
                    if u.runtime.is_some() {
                        None
                    } else {
                        fewer_workers(
                            r,
                            u.waiters.len(),
                            u.processes,
                            ratio(u.wait_ns, wall_ns(r)),
                        )
                    }
                    .unwrap_or_default(),
                    match u.runtime {
                        Some(rl) => rl.remedy.to_string(),
                        None => format!(
                            "Threads with work wait here for what one of them holds ({}). Hold \
                             it for less time (move work out of the critical section, commit \
                             sooner), take it less often (batch, cache what it guards), or \
                             split what it protects by key so waiters stop meeting; a record \
                             that every worker updates (one counter row, one queue head) is hot \
                             by design: spread it over N records and sum them, or queue the \
                             updates and apply them in batches.",
                            u.callers().join(", ")
                        ),
                    }
                ),
                expected_gain: super::gain::fixes::of_site(
                    r,
                    &u.waiters.iter().copied().collect::<Vec<_>>(),
                    u.wait_ns,
                    all_wait,
                    format!(
                        "were the waits at {} gone (what they queue for split or held \
                             briefly)",
                        u.name
                    ),
                ),
            }
            .fire()
        })
        .collect()
}
