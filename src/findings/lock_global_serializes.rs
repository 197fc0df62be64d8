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
            let callers = u.callers();
            let who = if u.processes > 1 {
                format!("{} processes", u.processes)
            } else {
                format!("{} threads", u.waiters.len())
            };
            Draft {
                id: ID,
                title: format!(
                    "{} serializes {who}: {queued:.1} of them wait for it at any time while {:.1} CPUs idle",
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
                ],
                culprit: Culprit {
                    kind: CulpritKind::Lock,
                    name: u.name.clone(),
                    frames: u.frames(),
                },
                remedy: format!(
                    "One lock funnels independent work ({}) through one holder at a time, so the \
                     program runs no faster than one thread. Shard what it protects: one lock \
                     per queue or partition chosen by key (e.g. itemid % N), so workers on \
                     different keys never meet; take the lock out of paths that rarely need it \
                     (resolve rarely-changing values once, or read them from a copy); for an \
                     interpreter's global lock, run the CPU-bound work in processes or in \
                     native code that releases the lock.",
                    callers.join(", ")
                ),
                expected_gain: wall_gain(
                    r,
                    u.wait_ns / threads.max(1.0),
                    "the wait in this lock per waiting thread: with disjoint shards it goes away",
                ),
            }
            .fire()
        })
        .collect()
}
