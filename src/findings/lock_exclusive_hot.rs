//! `lock.exclusive-hot` (Icinga 2): one exclusive lock takes most of the
//! waiting, and the threads queue on it mostly to *read*. Readers exclude
//! each other for nothing: a read/write lock lets them in together, and data
//! frozen after start-up needs no lock at all.
//!
//! Read paths are told from the waiters' stacks: the first function of the
//! program's own (above libc's lock code) whose name has a verb that reads
//! (`get`, `lookup`, `find`, ...) rather than one that writes (`set`, `put`,
//! `add`, ...); stacks with neither count as writes.

use super::common::*;
use crate::frame::words;
use crate::report::{Finding, LockKind, LockReport, Report};

pub const ID: &str = "lock.exclusive-hot";
/// The lock's share of all waiting on contended locks.
pub const MIN_SHARE_OF_LOCK_WAIT: f64 = 0.5;
/// Share of its waiting threads' time spent waiting for it.
pub const MIN_WAITING_SHARE: f64 = 0.1;
pub const MIN_THREADS: f64 = 2.0;
/// Share of waiting acquisitions made on read paths.
pub const MIN_READ_SHARE: f64 = 0.8;

const READ_VERBS: &[&str] = &[
    "get", "lookup", "find", "read", "query", "search", "contains", "resolve", "fetch", "load",
    "peek", "has", "is", "exists", "count", "evaluate", "match",
];
const WRITE_VERBS: &[&str] = &[
    "set", "put", "add", "insert", "update", "write", "remove", "delete", "del", "store", "push",
    "pop", "modify", "register", "append", "clear", "free", "alloc", "create", "destroy",
];

pub fn check(r: &Report) -> Vec<Finding> {
    let all_wait = r.contended_wait_ns();
    r.locks
        .iter()
        .filter(|l| l.contention && exclusive(l.kind))
        .filter_map(|l| {
            let waiting = waiting_share(r, l);
            let reads = read_share(l);
            Draft {
                id: ID,
                title: format!(
                    "{} is an exclusive lock that threads mostly queue on to read",
                    l.display_name()
                ),
                severity: waiting,
                evidence: vec![
                    at_least("share_of_lock_wait", ratio(l.wait_ns as f64, all_wait), MIN_SHARE_OF_LOCK_WAIT),
                    at_least("waiting_share", waiting, MIN_WAITING_SHARE),
                    at_least("waiting_threads", f64::from(l.threads), MIN_THREADS),
                    at_least("read_path_share", reads, MIN_READ_SHARE),
                ],
                culprit: lock_culprit(l),
                remedy: "Readers exclude each other on this lock. Take it shared for reads: a \
                         read/write lock (pthread_rwlock_rdlock on lookups, wrlock only on the rare \
                         update). Better, if the data stops changing after start-up, freeze it and \
                         read it with no lock at all (build it, publish it once, e.g. with an \
                         atomic pointer swap or RCU, and let lookups read the frozen copy)."
                    .into(),
                expected_gain: super::gain::fixes::of_lock(
                    r,
                    l,
                    format!(
                        "were reads no longer excluding each other on {}: its waits and its \
                         hand-overs' CPU gone",
                        l.display_name()
                    ),
                ),
            }
            .fire()
        })
        .collect()
}

fn exclusive(kind: LockKind) -> bool {
    matches!(
        kind,
        LockKind::Mutex | LockKind::PiMutex | LockKind::SysvSem | LockKind::Unknown
    )
}

/// Share of the waiters' acquisitions (by count) made on read paths.
pub fn read_share(l: &LockReport) -> f64 {
    let total: u64 = l.waiter_stacks.iter().map(|s| s.count).sum();
    let reads: u64 = l
        .waiter_stacks
        .iter()
        .filter(|s| reads(&s.frames))
        .map(|s| s.count)
        .sum();
    ratio(reads as f64, total as f64)
}

/// Whether a waiter stack (innermost first) is a read path.
pub fn reads(frames: &[crate::frame::Frame]) -> bool {
    for frame in frames {
        let words = words(frame.function());
        if words.iter().any(|w| WRITE_VERBS.contains(&w.as_str())) {
            return false;
        }
        if words.iter().any(|w| READ_VERBS.contains(&w.as_str())) {
            return true;
        }
    }
    false
}
