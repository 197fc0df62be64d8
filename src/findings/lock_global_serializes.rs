//! `lock.global-serializes` (Zabbix; an interpreter's global lock): one
//! lock serialises the program's threads or processes. Several of them have
//! work and want to run, CPUs sit idle, and they queue at one contended
//! place — whatever the primitive: a mutex, a semaphore, a condition
//! variable used as a lock (a GIL), per-waiter parkers. Throughput is that
//! of one holder at a time. The remedy is to shard what the lock protects
//! and to take it out of paths that rarely need it.
//!
//! Judged on contention units (wait sites classed contention, gathered by
//! the lock they share): the class already says the waiters have work and
//! take turns; this rule adds that the CPUs could have run more of them.
//! A lock of the program's own handed over across processes by signals or
//! latches is `lock.contended-site`'s, which names that hand-over.

use super::common::*;
use crate::report::{Culprit, CulpritKind, Finding, Report};

pub const ID: &str = "lock.global-serializes";
/// Threads (or processes) queuing on it.
pub const MIN_THREADS: f64 = 3.0;
/// Threads queued on it on average over the run: one or more always
/// waiting while one holds it.
pub const MIN_QUEUED_THREADS: f64 = 1.0;
/// Its share of all waiting at contended sites.
pub const MIN_SHARE_OF_CONTENDED_WAIT: f64 = 0.5;
/// CPUs left idle while they queue: of the CPUs the waiters could use
/// (as many as there are CPUs, or waiters if fewer), those not used.
pub const MIN_IDLE_CPUS: f64 = 0.5;
/// Lock words its biggest site waits on that its waiters share (fewer
/// words than waiters), at most: a mutex and its condition variable are
/// two. Three or more are a set of locks one wrapper takes, each shared by
/// a few (the fixed Zabbix's queue shards behind one `zbx_mutex_lock`),
/// not one lock; a word per waiter (a parker, a semaphore per process) is
/// one lock's queue, counted as one.
pub const MAX_SHARED_LOCK_WORDS: f64 = 2.0;

/// The shared lock words of a unit's biggest site (see MAX_SHARED_LOCK_WORDS);
/// a runtime's well-known lock (a GIL: its mutex and condition variables)
/// is one lock whatever its words.
fn shared_lock_words(u: &Unit<'_>) -> f64 {
    if u.runtime.is_some() {
        return 1.0;
    }
    u.sites.first().map_or(1.0, |s| {
        if s.lock_words < s.waiters {
            f64::from(s.lock_words.max(1))
        } else {
            1.0
        }
    })
}

/// What to do: fewer workers when more contend than the CPUs serve; the
/// runtime's own remedy for its well-known lock; else shard the lock and
/// take it out of paths that rarely need it.
fn remedy(r: &Report, u: &Unit<'_>, queued: f64) -> String {
    // An interpreter's lock lets one thread run whatever the CPUs: its own
    // remedy says what helps, after the code that holds it (where its
    // holders hand it over, when the interpreter's frames were read).
    if let Some(rl) = u.runtime {
        let held = u
            .top_release()
            .filter(|x| x.in_target)
            .and_then(|x| x.stacks.first())
            .and_then(|s| interpreted_callers(&s.frames))
            .map(|c| {
                format!(
                    "Its holders hand it over in {c}: the code that runs while the others wait. "
                )
            })
            .unwrap_or_default();
        return format!("{held}{}", rl.remedy);
    }
    let fewer = fewer_workers(r, u.waiters.len(), u.processes, queued).unwrap_or_default();
    format!(
        "{fewer}One lock funnels independent work ({}) through one holder at a time, so the \
         program runs no faster than one thread. Shard what it protects: one lock per queue or \
         partition chosen by key (the record, queue or client each worker serves), so workers \
         on different keys never meet; take the lock out of paths that rarely need it \
         (resolve rarely-changing values once, or read them from a copy).",
        u.callers().join(", ")
    )
}

pub fn check(r: &Report) -> Vec<Finding> {
    let all_wait = contended_site_wait_ns(r);
    contention_units(r)
        .into_iter()
        .filter(|u| u.cross_process_handoff().is_none())
        .filter_map(|u| {
            let waiting = u.waiting_share(r);
            let queued = ratio(u.wait_ns, wall_ns(r));
            let threads = u.waiters.len() as f64;
            let idle_cpus = idle_cpus(r, threads);
            let who = if u.processes > 1 {
                format!("{} processes", u.processes)
            } else {
                format!("{} threads", u.waiters.len())
            };
            // An interpreter's lock: the program's code its threads queue
            // from, when the interpreter's frames were read.
            let from = u
                .runtime
                .and_then(|_| interpreted_callers(&u.frames()))
                .map(|c| format!(", queued in {c}"))
                .unwrap_or_default();
            Draft {
                id: ID,
                title: format!(
                    "{} serializes {who}{from}: {queued:.1} of them wait for it at any time while {:.1} CPUs idle",
                    u.name,
                    idle_cpus.max(0.0)
                ),
                severity: waiting,
                evidence: vec![
                    at_least("waiting_threads", threads, MIN_THREADS),
                    at_least("queued_threads", queued, MIN_QUEUED_THREADS),
                    at_least(
                        "share_of_contended_wait",
                        ratio(u.wait_ns, all_wait),
                        MIN_SHARE_OF_CONTENDED_WAIT,
                    ),
                    at_least("idle_cpus", idle_cpus, MIN_IDLE_CPUS),
                    at_most(
                        "shared_lock_words",
                        shared_lock_words(&u),
                        MAX_SHARED_LOCK_WORDS,
                    ),
                ],
                culprit: Culprit {
                    kind: CulpritKind::Lock,
                    name: u.name.clone(),
                    frames: u.frames(),
                },
                remedy: remedy(r, &u, queued),
                expected_gain: super::gain::fixes::of_site(r, &u.waiters.iter().copied().collect::<Vec<_>>(), u.wait_ns, all_wait, format!(
                            "were {} no longer serializing them: its waits gone and the work \
                             it serialized run in parallel up to the CPUs",
                            u.name
                        )),
            }
            .fire()
        })
        .collect()
}
