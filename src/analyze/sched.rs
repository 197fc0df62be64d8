//! Off-CPU time by reason, the wake-up graph and what the rest wait on:
//! from the kernel's exact per-thread counters and the sampled stacks.
//!
//! A sleep inside a lock wait counts as lock contention or as waiting for
//! work as the wait sites found for that lock (who ended its waits, how
//! they ended), not by its kind alone.

use crate::fixed_hash::HashMap;
use std::collections::{BTreeMap, BTreeSet};

use crate::model::{LockKey, OffCpuCounters, OffReason, WakeupCounters};
use crate::names::syscall_name;
use crate::report::{
    Blocker, CountedStack, OffCpuReason, OffCpuReasonReport, OffCpuThread, TimedStack, WakeupReport,
};

/// Stacks kept per (thread, reason) and per wake-up edge.
const MAX_STACKS: usize = 10;

fn is_lock_syscall(name: &str) -> bool {
    matches!(name, "futex" | "futex_waitv" | "semop" | "semtimedop")
}

/// The reason a sleep inside `nr` (waiting on `lock`, if one) counts under.
pub fn reason_of(reason: &OffReason, contended: &HashMap<LockKey, bool>) -> OffCpuReason {
    match reason {
        OffReason::RunQueue => OffCpuReason::Involuntary,
        OffReason::Other => OffCpuReason::Other,
        OffReason::Syscall { nr, lock } => {
            let name = syscall_name(*nr);
            match name.as_str() {
                n if is_lock_syscall(n) => match lock.and_then(|k| contended.get(&k)) {
                    Some(false) => OffCpuReason::WaitingForWork,
                    _ => OffCpuReason::Lock,
                },
                n if crate::names::is_poll(n) => OffCpuReason::IoMultiplexing,
                "nanosleep" | "clock_nanosleep" | "pause" | "rt_sigsuspend" | "rt_sigtimedwait" => {
                    OffCpuReason::Sleep
                }
                _ => OffCpuReason::BlockingSyscall,
            }
        }
    }
}

/// A sleep the kernel saw as uninterruptible (D state) is I/O (the disk, a
/// journal, a page read in, a kernel lock) whatever the call: a `write` or
/// an `fdatasync` that waits for the disk is not a thread waiting for an
/// event, and a page fault's read is no longer "other".
pub fn uninterruptible_or(reason: OffCpuReason, uninterruptible: bool) -> OffCpuReason {
    match reason {
        OffCpuReason::BlockingSyscall | OffCpuReason::Other if uninterruptible => OffCpuReason::Io,
        r => r,
    }
}

/// Where a call sleeps (thread, syscall; None outside any): the sampled
/// stacks carry no sleep state, so a call's stacks go where most of its
/// sleep went.
type CallKey = (u32, Option<u32>);

fn call_of(tid: u32, reason: &OffReason) -> Option<CallKey> {
    match reason {
        OffReason::Syscall { nr, .. } => Some((tid, Some(*nr))),
        OffReason::Other => Some((tid, None)),
        OffReason::RunQueue => None,
    }
}

/// The calls that slept uninterruptibly for most of their sleep.
fn mostly_uninterruptible(counters: &[OffCpuCounters]) -> BTreeSet<CallKey> {
    let mut by_call: BTreeMap<CallKey, (u64, u64)> = BTreeMap::new();
    for c in counters {
        if let Some(k) = call_of(c.tid, &c.reason) {
            let e = by_call.entry(k).or_default();
            if c.uninterruptible {
                e.0 += c.ns;
            } else {
                e.1 += c.ns;
            }
        }
    }
    by_call
        .into_iter()
        .filter(|(_, (d, other))| d > other)
        .map(|(k, _)| k)
        .collect()
}

/// Stacks by frames: (time or count they stand for, samples).
type StackSums = BTreeMap<Vec<crate::frame::Frame>, (u64, u64)>;

/// Per (thread, reason): the process, time, count and time by syscall.
type ReasonSums = BTreeMap<(u32, OffCpuReason), (u32, u64, u64, BTreeMap<String, u64>)>;

/// Scales sampled stacks so they add up to the exact `total`.
fn scale_stacks(mut stacks: StackSums, total: u64) -> Vec<TimedStack> {
    let sampled: u64 = stacks.values().map(|v| v.0).sum();
    let exact = sampled == total;
    let mut out: Vec<TimedStack> = std::mem::take(&mut stacks)
        .into_iter()
        .map(|(frames, (ns, samples))| TimedStack {
            frames,
            ns: if sampled == 0 {
                0
            } else {
                (ns as u128 * total as u128 / sampled as u128) as u64
            },
            samples,
            estimated: !exact,
        })
        .collect();
    out.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.frames.cmp(&b.frames)));
    out.truncate(MAX_STACKS);
    out
}

/// Sleep in a call that is not a lock wait, which a contended site can
/// make one.
fn movable(reason: OffCpuReason) -> bool {
    matches!(
        reason,
        OffCpuReason::IoMultiplexing | OffCpuReason::BlockingSyscall | OffCpuReason::Sleep
    )
}

/// Sampled off-CPU stacks: (pid, tid, nr, lock) and their symbolized frames,
/// with the sleep they stand for and their sample count.
pub struct OffCpuSite {
    pub tid: u32,
    pub reason: OffReason,
    pub frames: Vec<crate::frame::Frame>,
    pub ns: u64,
    pub samples: u64,
    /// Leading strings of `frames` in runtime libraries.
    pub runtime: usize,
}

/// What the wait sites found contended, for the off-CPU reasons.
#[derive(Default)]
pub struct Contended<'a> {
    /// Whether each lock's waits are contention.
    pub locks: HashMap<LockKey, bool>,
    /// Per (thread, syscall), sleep at contended sites.
    pub calls: HashMap<(u32, u32), u64>,
    /// The contended sites' functions, and how to find a stack's site.
    pub sites: BTreeSet<String>,
    pub site_of: Option<&'a dyn Fn(&OffCpuSite) -> String>,
}

/// Off-CPU time per thread by reason. A sleep in a lock wait is lock
/// contention or waiting for work as the wait sites found for that lock;
/// a sleep in another call (a latch's epoll_wait, a pipe's read) at a
/// contended site is lock contention too. Threads rank by what they
/// wanted to run and could not: run queue and contention.
pub fn offcpu(
    counters: &[OffCpuCounters],
    sites: &[OffCpuSite],
    contended: &Contended<'_>,
    comms: &HashMap<u32, String>,
) -> Vec<OffCpuThread> {
    let kinds = &contended.locks;
    // What of each (thread, syscall)'s sleep is still to move to Lock.
    let mut budget = contended.calls.clone();
    // (tid, reason) -> (pid, ns, count, ns by syscall)
    let mut per: ReasonSums = BTreeMap::new();
    for c in counters {
        let reason = uninterruptible_or(reason_of(&c.reason, kinds), c.uninterruptible);
        let (mut ns, mut count) = (c.ns, c.count);
        if let OffReason::Syscall { nr, .. } = c.reason
            && movable(reason)
            && let Some(b) = budget.get_mut(&(c.tid, nr))
        {
            let moved = ns.min(*b);
            *b -= moved;
            if moved > 0 {
                let moved_count = (count as u128 * moved as u128 / ns.max(1) as u128) as u64;
                let e = per.entry((c.tid, OffCpuReason::Lock)).or_default();
                e.0 = c.pid;
                e.1 += moved;
                e.2 += moved_count;
                *e.3.entry(syscall_name(nr)).or_default() += moved;
                ns -= moved;
                count -= moved_count.min(count);
            }
            if ns == 0 {
                continue;
            }
        }
        let e = per.entry((c.tid, reason)).or_default();
        e.0 = c.pid;
        e.1 += ns;
        e.2 += count;
        if let OffReason::Syscall { nr, .. } = c.reason {
            *e.3.entry(syscall_name(nr)).or_default() += ns;
        }
    }
    let in_d = mostly_uninterruptible(counters);
    let mut site_stacks: HashMap<(u32, OffCpuReason), StackSums> = HashMap::default();
    for s in sites {
        let d = call_of(s.tid, &s.reason).is_some_and(|k| in_d.contains(&k));
        let mut reason = uninterruptible_or(reason_of(&s.reason, kinds), d);
        if movable(reason)
            && let Some(site_of) = contended.site_of
            && contended.sites.contains(&site_of(s))
        {
            reason = OffCpuReason::Lock;
        }
        let e = site_stacks
            .entry((s.tid, reason))
            .or_default()
            .entry(s.frames.clone())
            .or_default();
        e.0 += s.ns;
        e.1 += s.samples;
    }
    let mut threads: BTreeMap<u32, OffCpuThread> = BTreeMap::new();
    for ((tid, reason), (pid, ns, count, syscalls)) in per {
        let t = threads.entry(tid).or_insert_with(|| OffCpuThread {
            tid,
            pid,
            comm: comms.get(&tid).cloned().unwrap_or_default(),
            total_ns: 0,
            wanted_ns: 0,
            reasons: vec![],
        });
        t.total_ns += ns;
        if matches!(reason, OffCpuReason::Involuntary | OffCpuReason::Lock) {
            t.wanted_ns += ns;
        }
        let stacks = site_stacks
            .remove(&(tid, reason))
            .map_or_else(Vec::new, |s| scale_stacks(s, ns));
        t.reasons.push(OffCpuReasonReport {
            reason,
            ns,
            count,
            syscalls,
            stacks,
        });
    }
    let mut out: Vec<OffCpuThread> = threads.into_values().collect();
    for t in &mut out {
        t.reasons
            .sort_by(|a, b| b.ns.cmp(&a.ns).then(a.reason.cmp(&b.reason)));
    }
    for t in &mut out {
        t.wanted_ns = t.wanted_ns.min(t.total_ns);
    }
    out.sort_by(|a, b| {
        b.wanted_ns
            .cmp(&a.wanted_ns)
            .then(b.total_ns.cmp(&a.total_ns))
            .then(a.tid.cmp(&b.tid))
    });
    out
}

/// How a waker woke: from the syscall it was in.
pub fn mechanism(w: &WakeupCounters) -> String {
    mechanism_of(w.waker_nr, w.waker_kernel, w.waker_tracked, &w.waker_comm)
}

/// How a waker woke, from the syscall it was in (`nr`), whether it is a
/// kernel thread or part of the target, and its name.
pub fn mechanism_of(nr: Option<u32>, kernel: bool, tracked: bool, comm: &str) -> String {
    match nr.map(syscall_name).as_deref() {
        Some("futex" | "futex_waitv") => "futex".into(),
        Some("kill" | "tkill" | "tgkill" | "rt_sigqueueinfo" | "rt_tgsigqueueinfo") => {
            "signal".into()
        }
        Some(
            "write" | "writev" | "pwrite64" | "pwritev" | "pwritev2" | "sendto" | "sendmsg"
            | "sendmmsg" | "splice" | "vmsplice" | "tee",
        ) => "write (pipe, socket, eventfd)".into(),
        Some("semop" | "semtimedop") => "sysv semaphore".into(),
        Some("exit" | "exit_group") => "exit".into(),
        Some(name) => format!("syscall {name}"),
        None if kernel => format!("kernel ({comm}: timer, interrupt or kernel thread)"),
        None if tracked => "outside a syscall (interrupt or fault)".into(),
        None => format!("another process ({comm})"),
    }
}

/// Sampled waker stacks: (waker tid, woken tid), frames, wake-ups, samples.
pub struct WakeSite {
    pub waker_tid: u32,
    pub woken_tid: u32,
    pub frames: Vec<crate::frame::Frame>,
    pub weight: u64,
    pub samples: u64,
}

pub fn wakeups(
    counters: &[WakeupCounters],
    sites: &[WakeSite],
    comms: &HashMap<u32, String>,
) -> Vec<WakeupReport> {
    // The same edge may appear once per waker syscall: one report per edge
    // and mechanism.
    let mut stacks: HashMap<(u32, u32), StackSums> = HashMap::default();
    for s in sites {
        let e = stacks
            .entry((s.waker_tid, s.woken_tid))
            .or_default()
            .entry(s.frames.clone())
            .or_default();
        e.0 += s.weight;
        e.1 += s.samples;
    }
    let mut edge_counts: HashMap<(u32, u32), u64> = HashMap::default();
    for w in counters {
        *edge_counts.entry((w.waker_tid, w.woken_tid)).or_default() += w.count;
    }
    let mut out: Vec<WakeupReport> = counters
        .iter()
        .map(|w| WakeupReport {
            waker_pid: w.waker_pid,
            waker_tid: w.waker_tid,
            waker_comm: w.waker_comm.clone(),
            waker_in_target: w.waker_tracked,
            woken_pid: w.woken_pid,
            woken_tid: w.woken_tid,
            woken_comm: comms.get(&w.woken_tid).cloned().unwrap_or_default(),
            mechanism: mechanism(w),
            count: w.count,
            wait_ns: w.wait_ns,
            waker_stacks: vec![],
        })
        .collect();
    out.sort_by(|a, b| {
        b.wait_ns
            .cmp(&a.wait_ns)
            .then(a.waker_tid.cmp(&b.waker_tid))
            .then(a.woken_tid.cmp(&b.woken_tid))
    });
    // Stacks go to the edge's first (largest) report, scaled to the edge's
    // exact wake-ups.
    let mut seen = BTreeSet::new();
    for r in &mut out {
        if !seen.insert((r.waker_tid, r.woken_tid)) {
            continue;
        }
        if let Some(s) = stacks.remove(&(r.waker_tid, r.woken_tid)) {
            let total = edge_counts[&(r.waker_tid, r.woken_tid)];
            r.waker_stacks = scale_stacks(s, total)
                .into_iter()
                .map(|t| CountedStack {
                    frames: t.frames,
                    count: t.ns,
                    samples: t.samples,
                    estimated: t.estimated,
                })
                .collect();
        }
    }
    out
}

/// The threads of the target whose wake-ups ended the most waiting by
/// others: what the rest wait on. A thread's exit (a join, a supervisor
/// reaping a child), a timer and a process outside the target (a client)
/// end waits without anyone waiting on their work: left out.
pub fn blockers(wakeups: &[WakeupReport]) -> Vec<Blocker> {
    let mut by: BTreeMap<(u32, u32), Blocker> = BTreeMap::new();
    let mut woken: HashMap<(u32, u32), BTreeSet<u32>> = HashMap::default();
    let counts = |w: &&WakeupReport| {
        w.waker_tid != w.woken_tid && w.waker_in_target && w.mechanism != "exit"
    };
    for w in wakeups.iter().filter(counts) {
        let b = by
            .entry((w.waker_pid, w.waker_tid))
            .or_insert_with(|| Blocker {
                pid: w.waker_pid,
                tid: w.waker_tid,
                comm: w.waker_comm.clone(),
                in_target: w.waker_in_target,
                wait_ns: 0,
                threads_woken: 0,
            });
        b.wait_ns += w.wait_ns;
        woken
            .entry((w.waker_pid, w.waker_tid))
            .or_default()
            .insert(w.woken_tid);
    }
    let mut out: Vec<Blocker> = by
        .into_iter()
        .map(|(k, mut b)| {
            b.threads_woken = woken.get(&k).map_or(0, |s| s.len() as u32);
            b
        })
        .collect();
    out.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(a.tid.cmp(&b.tid)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn off(tid: u32, reason: OffReason, ns: u64) -> OffCpuCounters {
        OffCpuCounters {
            pid: 1,
            tid,
            reason,
            uninterruptible: false,
            ns,
            count: 1,
        }
    }

    /// Issue 37: a sleep in D state is I/O whatever the call (an
    /// fdatasync, a write blocked on writeback, a page fault's read), and
    /// its stacks go with it; the same call asleep interruptibly stays a
    /// blocking syscall.
    #[test]
    fn uninterruptible_sleeps_are_io_with_their_stacks_issue_37() {
        let nr = |name: &str| crate::names::syscall_nr(name).unwrap();
        let sync = OffReason::Syscall {
            nr: nr("fdatasync"),
            lock: None,
        };
        let read = OffReason::Syscall {
            nr: nr("read"),
            lock: None,
        };
        let d = |c: OffCpuCounters| OffCpuCounters {
            uninterruptible: true,
            ..c
        };
        let counters = [
            d(off(5, sync, 900)),
            off(5, sync, 100),
            off(5, read, 300),
            d(off(5, OffReason::Other, 40)),
            off(5, OffReason::RunQueue, 20),
        ];
        let site = |reason| OffCpuSite {
            tid: 5,
            reason,
            frames: vec![format!("{reason:?}").into()],
            ns: 10,
            samples: 1,
            runtime: 0,
        };
        let sites = [site(sync), site(read)];
        let t = &offcpu(
            &counters,
            &sites,
            &Contended::default(),
            &HashMap::default(),
        )[0];
        let by = |r: OffCpuReason| t.reasons.iter().find(|x| x.reason == r);
        let io = by(OffCpuReason::Io).unwrap();
        assert_eq!(io.ns, 940);
        assert_eq!(io.syscalls.get("fdatasync"), Some(&900));
        assert_eq!(io.stacks.len(), 1);
        assert!(io.stacks[0].frames[0].contains(&nr("fdatasync").to_string()));
        let blocking = by(OffCpuReason::BlockingSyscall).unwrap();
        assert_eq!(blocking.ns, 400);
        assert_eq!(blocking.stacks.len(), 1);
        assert_eq!(by(OffCpuReason::Involuntary).unwrap().ns, 20);
        assert!(by(OffCpuReason::Other).is_none());
    }

    #[test]
    fn sleeps_are_classified_by_syscall_and_lock_contention() {
        let cond = LockKey::Private { pid: 1, addr: 0x10 };
        let mutex = LockKey::Private { pid: 1, addr: 0x20 };
        let kinds: HashMap<LockKey, bool> = [(cond, false), (mutex, true)].into_iter().collect();
        let futex = crate::names::syscall_nr("futex").unwrap();
        let sys = |name: &str, lock| OffReason::Syscall {
            nr: crate::names::syscall_nr(name).unwrap(),
            lock,
        };
        assert_eq!(
            reason_of(&sys("futex", Some(cond)), &kinds),
            OffCpuReason::WaitingForWork
        );
        assert_eq!(
            reason_of(
                &OffReason::Syscall {
                    nr: futex,
                    lock: Some(mutex)
                },
                &kinds
            ),
            OffCpuReason::Lock
        );
        assert_eq!(reason_of(&sys("futex", None), &kinds), OffCpuReason::Lock);
        assert_eq!(
            reason_of(&sys("semtimedop", None), &kinds),
            OffCpuReason::Lock
        );
        assert_eq!(
            reason_of(&sys("epoll_wait", None), &kinds),
            OffCpuReason::IoMultiplexing
        );
        assert_eq!(
            reason_of(&sys("poll", None), &kinds),
            OffCpuReason::IoMultiplexing
        );
        assert_eq!(
            reason_of(&sys("clock_nanosleep", None), &kinds),
            OffCpuReason::Sleep
        );
        assert_eq!(
            reason_of(&sys("read", None), &kinds),
            OffCpuReason::BlockingSyscall
        );
        assert_eq!(
            reason_of(&OffReason::RunQueue, &kinds),
            OffCpuReason::Involuntary
        );
        assert_eq!(reason_of(&OffReason::Other, &kinds), OffCpuReason::Other);
    }

    #[test]
    fn per_thread_reasons_add_up_and_stacks_scale_to_the_exact_time() {
        let read = crate::names::syscall_nr("read").unwrap();
        let counters = [
            off(
                5,
                OffReason::Syscall {
                    nr: read,
                    lock: None,
                },
                1_000,
            ),
            off(5, OffReason::RunQueue, 300),
            off(6, OffReason::RunQueue, 50),
        ];
        let sites = [
            OffCpuSite {
                tid: 5,
                reason: OffReason::Syscall {
                    nr: read,
                    lock: None,
                },
                frames: vec!["a".into()],
                ns: 60,
                samples: 3,
                runtime: 0,
            },
            OffCpuSite {
                tid: 5,
                reason: OffReason::Syscall {
                    nr: read,
                    lock: None,
                },
                frames: vec!["b".into()],
                ns: 40,
                samples: 2,
                runtime: 0,
            },
        ];
        let comms: HashMap<u32, String> = [(5, "reader".to_string())].into_iter().collect();
        let out = offcpu(&counters, &sites, &Contended::default(), &comms);
        assert_eq!(
            (out[0].tid, out[0].total_ns, out[0].comm.as_str()),
            (5, 1_300, "reader")
        );
        let r = &out[0].reasons[0];
        assert_eq!(
            (r.reason, r.ns, r.syscalls.get("read")),
            (OffCpuReason::BlockingSyscall, 1_000, Some(&1_000))
        );
        assert_eq!(
            r.stacks
                .iter()
                .map(|s| (s.ns, s.estimated))
                .collect::<Vec<_>>(),
            vec![(600, true), (400, true)]
        );
        assert_eq!(out[0].reasons[1].reason, OffCpuReason::Involuntary);
        assert_eq!(out[1].tid, 6);
    }

    /// Issue #10: threads rank by the time they wanted to run (run queue,
    /// contended waits), not by idle time.
    #[test]
    fn threads_that_wanted_to_run_rank_before_idle_ones() {
        let read = crate::names::syscall_nr("read").unwrap();
        let idle = OffReason::Syscall {
            nr: read,
            lock: None,
        };
        let counters = [
            off(7, idle, 5_000),
            off(5, idle, 1_000),
            off(5, OffReason::RunQueue, 30),
            off(6, OffReason::RunQueue, 50),
        ];
        // 100 ns of thread 5's read was at a contended site (a pipe used
        // as a lock): lock time, and time it wanted to run.
        let contended = Contended {
            calls: [((5, read), 100)].into_iter().collect(),
            ..Default::default()
        };
        let out = offcpu(&counters, &[], &contended, &HashMap::default());
        let order: Vec<(u32, u64)> = out.iter().map(|t| (t.tid, t.wanted_ns)).collect();
        assert_eq!(order, vec![(5, 130), (6, 50), (7, 0)]);
        let reasons: Vec<(OffCpuReason, u64)> =
            out[0].reasons.iter().map(|r| (r.reason, r.ns)).collect();
        assert_eq!(
            reasons,
            vec![
                (OffCpuReason::BlockingSyscall, 900),
                (OffCpuReason::Lock, 100),
                (OffCpuReason::Involuntary, 30)
            ]
        );
    }

    #[test]
    fn wakeups_name_their_mechanism_and_blockers_rank_by_ended_waiting() {
        let w = |waker_tid, woken_tid, nr: Option<&str>, kernel, ns| WakeupCounters {
            waker_pid: 1,
            waker_tid,
            waker_comm: if kernel {
                "swapper/0".into()
            } else {
                "app".into()
            },
            waker_tracked: !kernel,
            waker_kernel: kernel,
            waker_nr: nr.map(|n| crate::names::syscall_nr(n).unwrap()),
            woken_pid: 1,
            woken_tid,
            count: 2,
            wait_ns: ns,
        };
        let counters = [
            w(10, 11, Some("write"), false, 500),
            w(10, 12, Some("futex"), false, 700),
            w(0, 11, None, true, 100),
        ];
        let sites = [WakeSite {
            waker_tid: 10,
            woken_tid: 12,
            frames: vec!["unlock".into()],
            weight: 2,
            samples: 2,
        }];
        let out = wakeups(&counters, &sites, &HashMap::default());
        assert_eq!(out[0].mechanism, "futex");
        assert_eq!(out[0].waker_stacks[0].count, 2);
        assert_eq!(out[1].mechanism, "write (pipe, socket, eventfd)");
        assert!(out[2].mechanism.starts_with("kernel (swapper/0"));
        let b = blockers(&out);
        assert_eq!((b[0].tid, b[0].wait_ns, b[0].threads_woken), (10, 1_200, 2));
        // Issue #10: a supervisor woken by its children's exits, or a
        // thread woken by a timer, waits on no one's work.
        assert_eq!(b.len(), 1, "{b:?}");
        let mut exit = w(20, 21, Some("exit"), false, 9_000);
        exit.waker_tracked = true;
        let b = blockers(&wakeups(&[exit], &[], &HashMap::default()));
        assert!(b.is_empty(), "{b:?}");
    }
}
