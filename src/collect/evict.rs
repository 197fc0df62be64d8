//! Idle entries out of the BPF maps, for a session that runs for days
//! (`kerntax agent`). Its windows are deltas of cumulative maps, so every
//! lock, thread pair, wake-up pair and kernel stack ever seen stayed in
//! them: each window read them all (on memcached the lock and stack keys
//! grew by ~1,000 a minute, and so did the agent's CPU per window), and a
//! full map drops new keys, so after hours the agent would not see a lock
//! it had not met before.
//!
//! An entry that did not move over a window is deleted from its map and
//! left out of the snapshot the next window is subtracted from: if it
//! comes back, it counts from zero, and the window's delta is right.
//! Between the read and the delete a BPF program can add to the entry;
//! that addition is lost (microseconds, once per idle entry), which is why
//! only a windows-only session (its whole-run totals are not reported)
//! evicts.

use std::collections::{HashMap, HashSet};

use crate::model::{KernelCounters, LockCounters, LockKey, OffReason, PollCounters, WakeupKey};

/// The entries of the last read, by key, to tell which did not move.
pub struct Earlier<'a> {
    pub locks: HashMap<LockKey, &'a LockCounters>,
    pub lock_waiters: HashMap<(LockKey, u32), u64>,
    pub offcpu: HashMap<(u32, u32, OffReason, bool), (u64, u64)>,
    pub wakeups: HashMap<WakeupKey, (u64, u64)>,
    pub polls: HashMap<(u32, u32), &'a PollCounters>,
    /// Exited threads already read: they will not move again.
    pub exited: HashSet<(u32, u64)>,
}

impl<'a> Earlier<'a> {
    pub fn of(k: &'a KernelCounters) -> Earlier<'a> {
        Earlier {
            locks: k.locks.iter().map(|(key, c)| (*key, c)).collect(),
            lock_waiters: k
                .lock_waiters
                .iter()
                .map(|&(l, tid, n)| ((l, tid), n))
                .collect(),
            offcpu: k
                .offcpu
                .iter()
                .map(|o| (o.key(), (o.ns, o.count)))
                .collect(),
            wakeups: k
                .wakeups
                .iter()
                .map(|w| (w.key(), (w.count, w.wait_ns)))
                .collect(),
            polls: k.polls.iter().map(|p| ((p.pid, p.nr), p)).collect(),
            exited: k
                .exited_threads
                .iter()
                .map(crate::model::ThreadCounters::key)
                .collect(),
        }
    }
}

/// What one read evicted, by map.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Evicted {
    pub locks: u64,
    pub lock_waiters: u64,
    pub offcpu: u64,
    pub wakeups: u64,
    pub polls: u64,
    pub exited_threads: u64,
    pub kernel_stacks: u64,
}

impl Evicted {
    pub fn add(&mut self, o: &Evicted) {
        self.locks += o.locks;
        self.lock_waiters += o.lock_waiters;
        self.offcpu += o.offcpu;
        self.wakeups += o.wakeups;
        self.polls += o.polls;
        self.exited_threads += o.exited_threads;
        self.kernel_stacks += o.kernel_stacks;
    }
}
