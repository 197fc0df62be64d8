//! `lock.global-serializes` (Zabbix): one lock, shared by many threads or
//! processes doing otherwise independent work, keeps them queued most of
//! their time: they sit idle while throughput is capped by one holder at a
//! time. The remedy is to shard what the lock protects (by item, key or
//! queue) and to take the lock out of paths that rarely need it.

use std::collections::BTreeMap;

use super::common::*;
use crate::report::{Finding, Report};

pub const ID: &str = "lock.global-serializes";
/// Threads (or processes) queuing on the lock.
pub const MIN_THREADS: f64 = 4.0;
/// Share of those threads' time spent waiting for it.
pub const MIN_WAITING_SHARE: f64 = 0.5;
/// The lock's share of all waiting on contended locks.
pub const MIN_SHARE_OF_LOCK_WAIT: f64 = 0.5;
/// Distinct functions taking it: independent work funnelled through it.
pub const MIN_CALLERS: f64 = 2.0;

pub fn check(r: &Report) -> Vec<Finding> {
    let all_wait = r.contended_wait_ns();
    r.locks
        .iter()
        .filter(|l| l.contention)
        .filter_map(|l| {
            let waiting = waiting_share(r, l);
            // Waiting acquisitions by the function that takes the lock.
            let mut callers: BTreeMap<&str, u64> = BTreeMap::new();
            for s in &l.waiter_stacks {
                if let Some(c) = caller_above_wrapper(&s.frames) {
                    *callers.entry(c).or_default() += s.count;
                }
            }
            let mut ranked: Vec<(&str, u64)> = callers.into_iter().collect();
            ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let names: Vec<&str> = ranked.iter().map(|c| c.0).collect();
            let per_thread_wait = l.wait_ns as f64 / f64::from(l.threads.max(1));
            let who = if l.pids.len() > 1 {
                format!("{} processes", l.pids.len())
            } else {
                format!("{} threads", l.threads)
            };
            Draft {
                id: ID,
                title: format!(
                    "{} serializes {who}: they wait for it {:.0}% of their time",
                    l.display_name(),
                    waiting * 100.0
                ),
                severity: waiting,
                evidence: vec![
                    at_least("waiting_threads", f64::from(l.threads), MIN_THREADS),
                    at_least("waiting_share", waiting, MIN_WAITING_SHARE),
                    at_least(
                        "share_of_lock_wait",
                        ratio(l.wait_ns as f64, all_wait),
                        MIN_SHARE_OF_LOCK_WAIT,
                    ),
                    at_least("distinct_callers", names.len() as f64, MIN_CALLERS),
                ],
                culprit: lock_culprit(l),
                remedy: format!(
                    "One lock funnels independent work ({}) through one holder at a time. Shard \
                     what it protects: one lock per queue or partition chosen by key (e.g. \
                     itemid % N), so workers on different keys never meet; and take the lock out \
                     of paths that rarely need it (resolve rarely-changing values once, or read \
                     them from a copy, instead of locking for every item).",
                    names.join(", ")
                ),
                expected_gain: wall_gain(
                    r,
                    per_thread_wait,
                    "the wait in this lock per waiting thread: with disjoint shards it goes away",
                ),
            }
            .fire()
        })
        .collect()
}

/// The function that takes the lock, above the program's own lock wrapper
/// (`zbx_mutex_lock`, `ns_lock`): the work that needs it.
fn caller_above_wrapper(frames: &[String]) -> Option<&str> {
    let own: Vec<&str> = frames
        .iter()
        .map(|f| function(f))
        .skip_while(|f| caller(&[f.to_string()]).is_none())
        .collect();
    own.iter()
        .copied()
        .find(|f| !f.to_ascii_lowercase().contains("lock"))
}
