//! The kernel's counters over one window of a live view: what they reached
//! at its end minus what they had reached at its start.
//!
//! The BPF maps only ever add, so a window is a subtraction, key by key:
//! the analyses and findings then run on the window exactly as they run on
//! a whole run (`kerntax top` shows findings appear and go away as the
//! program changes). Maxima cannot be subtracted: a window keeps the run's
//! maximum so far only where the window itself saw calls, and 0 elsewhere.

use std::collections::HashMap;
use std::hash::Hash;

use crate::model::{
    KernelCounters, KernelLoss, LockCounters, OffCpuCounters, PollCounters, SyscallCounters,
    ThreadCounters, WakeupCounters,
};

/// Slot by slot `later - earlier` of two log2 histograms.
fn hist_since(later: &[u64], earlier: &[u64]) -> Vec<u64> {
    later
        .iter()
        .enumerate()
        .map(|(i, &n)| n.saturating_sub(earlier.get(i).copied().unwrap_or(0)))
        .collect()
}

/// `later` minus `earlier`, matched by `key`, keeping the entries that
/// moved (`moved`).
fn keyed_since<T: Clone, K: Eq + Hash>(
    later: &[T],
    earlier: &[T],
    key: impl Fn(&T) -> K,
    sub: impl Fn(&T, &T) -> T,
    moved: impl Fn(&T) -> bool,
) -> Vec<T> {
    let before: HashMap<K, &T> = earlier.iter().map(|e| (key(e), e)).collect();
    later
        .iter()
        .map(|l| match before.get(&key(l)) {
            Some(e) => sub(l, e),
            None => l.clone(),
        })
        .filter(|d| moved(d))
        .collect()
}

fn syscall_since(l: &SyscallCounters, e: &SyscallCounters) -> SyscallCounters {
    let calls = l.calls.saturating_sub(e.calls);
    SyscallCounters {
        nr: l.nr,
        calls,
        returns: l.returns.saturating_sub(e.returns),
        errors: l.errors.saturating_sub(e.errors),
        timed: l.timed.saturating_sub(e.timed),
        total_ns: l.total_ns.saturating_sub(e.total_ns),
        max_ns: if l.timed > e.timed { l.max_ns } else { 0 },
        samples: l.samples.saturating_sub(e.samples),
        samples_deferred: l.samples_deferred.saturating_sub(e.samples_deferred),
        ret_sum: l.ret_sum.saturating_sub(e.ret_sum),
        req_sum: l.req_sum.saturating_sub(e.req_sum),
        hist_log2_ns: hist_since(&l.hist_log2_ns, &e.hist_log2_ns),
    }
}

fn lock_since(l: &LockCounters, e: &LockCounters) -> LockCounters {
    let s = |a: u64, b: u64| a.saturating_sub(b);
    LockCounters {
        waits: s(l.waits, e.waits),
        blocked: s(l.blocked, e.blocked),
        futile: s(l.futile, e.futile),
        timeouts: s(l.timeouts, e.timeouts),
        wait_ns: s(l.wait_ns, e.wait_ns),
        blocked_ns: s(l.blocked_ns, e.blocked_ns),
        max_wait_ns: if l.waits > e.waits { l.max_wait_ns } else { 0 },
        cpu_ns: s(l.cpu_ns, e.cpu_ns),
        wakes: s(l.wakes, e.wakes),
        woken: s(l.woken, e.woken),
        other: s(l.other, e.other),
        pi: s(l.pi, e.pi),
        samples: s(l.samples, e.samples),
        hist_log2_ns: hist_since(&l.hist_log2_ns, &e.hist_log2_ns),
    }
}

fn poll_since(l: &PollCounters, e: &PollCounters) -> PollCounters {
    let s = |a: u64, b: u64| a.saturating_sub(b);
    PollCounters {
        pid: l.pid,
        nr: l.nr,
        calls: s(l.calls, e.calls),
        fds: s(l.fds, e.fds),
        max_fds: if l.calls > e.calls { l.max_fds } else { 0 },
        ready: s(l.ready, e.ready),
        timeouts: s(l.timeouts, e.timeouts),
        errors: s(l.errors, e.errors),
        total_ns: s(l.total_ns, e.total_ns),
        cpu_ns: s(l.cpu_ns, e.cpu_ns),
    }
}

fn loss_since(l: &KernelLoss, e: &KernelLoss) -> KernelLoss {
    let s = |a: u64, b: u64| a.saturating_sub(b);
    KernelLoss {
        ringbuf_full: s(l.ringbuf_full, e.ringbuf_full),
        stack_read_failed: s(l.stack_read_failed, e.stack_read_failed),
        task_storage_failed: s(l.task_storage_failed, e.task_storage_failed),
        thread_map_full: s(l.thread_map_full, e.thread_map_full),
        errno_map_full: s(l.errno_map_full, e.errno_map_full),
        syscall_nr_out_of_range: s(l.syscall_nr_out_of_range, e.syscall_nr_out_of_range),
        lock_map_full: s(l.lock_map_full, e.lock_map_full),
        lock_thread_map_full: s(l.lock_thread_map_full, e.lock_thread_map_full),
        sched_map_full: s(l.sched_map_full, e.sched_map_full),
        poll_map_full: s(l.poll_map_full, e.poll_map_full),
        kernel_stack_lost: s(l.kernel_stack_lost, e.kernel_stack_lost),
        switch_in_unseen: s(l.switch_in_unseen, e.switch_in_unseen),
        trace_ringbuf_full: s(l.trace_ringbuf_full, e.trace_ringbuf_full),
        map_changes_unread: s(l.map_changes_unread, e.map_changes_unread),
        maps_lost_untracked: s(l.maps_lost_untracked, e.maps_lost_untracked),
    }
}

/// What the kernel counted between `earlier` and `later` (both cumulative
/// reads of the same run): the threads that exited in between, and every
/// counter's growth.
pub fn since(later: &KernelCounters, earlier: &KernelCounters) -> KernelCounters {
    let exited_before: std::collections::HashSet<(u32, u64)> = earlier
        .exited_threads
        .iter()
        .map(ThreadCounters::key)
        .collect();
    let errnos_before: HashMap<(u32, u32), u64> = earlier
        .errnos
        .iter()
        .map(|&(nr, errno, n)| ((nr, errno), n))
        .collect();
    KernelCounters {
        syscalls: keyed_since(
            &later.syscalls,
            &earlier.syscalls,
            |s| s.nr,
            syscall_since,
            |s| s.calls > 0 || s.returns > 0,
        ),
        errnos: later
            .errnos
            .iter()
            .map(|&(nr, errno, n)| {
                let was = errnos_before.get(&(nr, errno)).copied().unwrap_or(0);
                (nr, errno, n.saturating_sub(was))
            })
            .filter(|&(_, _, n)| n > 0)
            .collect(),
        exited_threads: later
            .exited_threads
            .iter()
            .filter(|t| !exited_before.contains(&t.key()))
            .cloned()
            .collect(),
        locks: {
            let before: HashMap<_, &LockCounters> =
                earlier.locks.iter().map(|(k, c)| (*k, c)).collect();
            later
                .locks
                .iter()
                .map(|(k, c)| match before.get(k) {
                    Some(e) => (*k, lock_since(c, e)),
                    None => (*k, c.clone()),
                })
                .filter(|(_, c)| c.waits + c.wakes + c.other + c.pi > 0)
                .collect()
        },
        lock_waiters: {
            let before: HashMap<_, u64> = earlier
                .lock_waiters
                .iter()
                .map(|&(k, tid, n)| ((k, tid), n))
                .collect();
            later
                .lock_waiters
                .iter()
                .map(|&(k, tid, n)| {
                    (
                        k,
                        tid,
                        n.saturating_sub(before.get(&(k, tid)).copied().unwrap_or(0)),
                    )
                })
                .filter(|&(_, _, n)| n > 0)
                .collect()
        },
        offcpu: keyed_since(
            &later.offcpu,
            &earlier.offcpu,
            OffCpuCounters::key,
            |l, e| OffCpuCounters {
                ns: l.ns.saturating_sub(e.ns),
                count: l.count.saturating_sub(e.count),
                ..l.clone()
            },
            |o| o.ns > 0 || o.count > 0,
        ),
        wakeups: keyed_since(
            &later.wakeups,
            &earlier.wakeups,
            WakeupCounters::key,
            |l, e| WakeupCounters {
                count: l.count.saturating_sub(e.count),
                wait_ns: l.wait_ns.saturating_sub(e.wait_ns),
                ..l.clone()
            },
            |w| w.count > 0,
        ),
        polls: keyed_since(
            &later.polls,
            &earlier.polls,
            |p| (p.pid, p.nr),
            poll_since,
            |p| p.calls > 0,
        ),
        loss: loss_since(&later.loss, &earlier.loss),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LockKey, OffReason};

    fn syscall(nr: u32, calls: u64, total_ns: u64) -> SyscallCounters {
        SyscallCounters {
            nr,
            calls,
            returns: calls,
            timed: calls,
            total_ns,
            max_ns: 50,
            hist_log2_ns: vec![calls, 1],
            ..Default::default()
        }
    }

    fn thread(tid: u32, start_ns: u64) -> ThreadCounters {
        ThreadCounters {
            pid: 1,
            tid,
            start_ns,
            exited: true,
            ..Default::default()
        }
    }

    #[test]
    fn a_window_holds_only_what_grew_in_it() {
        let key = LockKey::Private { pid: 1, addr: 0x10 };
        let earlier = KernelCounters {
            syscalls: vec![syscall(0, 10, 1000), syscall(1, 5, 500)],
            errnos: vec![(0, 11, 3)],
            exited_threads: vec![thread(7, 1)],
            locks: vec![(
                key,
                LockCounters {
                    waits: 4,
                    wait_ns: 400,
                    ..Default::default()
                },
            )],
            lock_waiters: vec![(key, 2, 4)],
            offcpu: vec![OffCpuCounters {
                pid: 1,
                tid: 2,
                reason: OffReason::RunQueue,
                uninterruptible: false,
                ns: 100,
                count: 1,
            }],
            ..Default::default()
        };
        let mut later = earlier.clone();
        later.syscalls = vec![syscall(0, 25, 4000), syscall(1, 5, 500), syscall(2, 1, 9)];
        later.errnos = vec![(0, 11, 3), (0, 4, 1)];
        later.exited_threads.push(thread(8, 2));
        later.locks[0].1.waits = 9;
        later.locks[0].1.wait_ns = 1000;
        later.lock_waiters[0].2 = 9;
        later.offcpu[0].ns = 350;
        later.offcpu[0].count = 3;
        later.loss.ringbuf_full = 2;

        let w = since(&later, &earlier);
        let calls: Vec<(u32, u64, u64)> = w
            .syscalls
            .iter()
            .map(|s| (s.nr, s.calls, s.total_ns))
            .collect();
        assert_eq!(calls, vec![(0, 15, 3000), (2, 1, 9)]);
        assert_eq!(w.syscalls[0].hist_log2_ns, vec![15, 0]);
        assert_eq!(w.errnos, vec![(0, 4, 1)]);
        assert_eq!(w.exited_threads, vec![thread(8, 2)]);
        assert_eq!((w.locks[0].1.waits, w.locks[0].1.wait_ns), (5, 600));
        assert_eq!(w.lock_waiters, vec![(key, 2, 5)]);
        assert_eq!((w.offcpu[0].ns, w.offcpu[0].count), (250, 2));
        assert_eq!(w.loss.ringbuf_full, 2);
    }

    #[test]
    fn an_idle_window_is_empty_and_keeps_no_stale_maximum() {
        let c = KernelCounters {
            syscalls: vec![syscall(0, 10, 1000)],
            ..Default::default()
        };
        let w = since(&c, &c);
        assert!(w.syscalls.is_empty());
        let mut more = c.clone();
        more.syscalls[0].returns += 1;
        let w = since(&more, &c);
        assert_eq!(w.syscalls[0].max_ns, 0, "no timed return in the window");
    }
}
