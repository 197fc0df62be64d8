//! `wait.bottleneck` (in the spirit of wPerf's wait-for graph): one thread
//! ends most of the waiting of the others — they sleep until it hands them
//! something. Speeding up anything else cannot help: the chain goes through
//! that thread, so its own work (or what it waits for) is the bottleneck.
//!
//! Wake-ups by exits (joins) and by the kernel (timers, interrupts) are left
//! out: those waits end on time or at the end, not on another thread's work.
//! So are wake-ups of threads that are not consumers: only the waiting of
//! threads at sites classed waiting for work counts (a thread's wake-ups in
//! the share of its waiting it spends there: a database backend queued on
//! a row lock that once waited for a page is no consumer), and each must
//! have been handed work again and again (an idle pool woken once at start-up, a
//! join or a supervisor paces nothing). A waker outside the
//! target (a client, a feeding process) is its I/O, not its bottleneck.
//!
//! Waiting passes up a pipeline: a stage that itself waits for work from
//! an earlier one can hand on work no faster than it gets it. So a waker's
//! ended waiting is its own only for the share of the run it does not wait
//! for other threads' work; the rest goes to the threads that end its own
//! waits, in proportion, until it settles at the stages that wait for
//! nothing in the target (pigz's reader behind a pipe, not the compressors
//! it feeds, though they wake the writer as often as it wakes them).
//! Likewise a waker that sleeps on a timer hands out work on a schedule:
//! the waiting it ended in that share of the run is no one's (a JVM's VM
//! thread wakes the GC workers at safepoints it mostly starts when its
//! timed wait runs out).
//!
//! And the threads it paces must do a real share of the program's work: a
//! background thread that wakes an idle helper pool (a database's purge
//! workers, a runtime's service threads) holds nothing back when those
//! helpers, woken, find little to do; the program's work is elsewhere.

use std::collections::{BTreeMap, BTreeSet};

use super::common::*;
use crate::report::{
    Culprit, CulpritKind, Finding, OffCpuReason, Report, TIMER_WAKER, WaitClass, WaitPrior,
    WakeupReport,
};

pub const ID: &str = "wait.bottleneck";
/// The thread's share of all waiting that other threads' wake-ups ended.
/// Less than half: in a pipeline the stages after the consumers wait on
/// them in turn, and their waiting counts for the consumers' wakers.
pub const MIN_SHARE_OF_ENDED_WAIT: f64 = 0.4;
/// Distinct threads it woke.
pub const MIN_THREADS_WOKEN: f64 = 2.0;
/// Threads waiting on it, on average over the run.
pub const MIN_WAITING_THREADS: f64 = 0.5;
/// Wake-ups of one consumer by the producer: handed work again and again.
pub const MIN_WAKES_PER_CONSUMER: u64 = 10;
/// Share of the run the thread sleeps on a timer (nanosleep, pause) at or
/// under which it can pace the others: one that mostly sleeps on purpose
/// hands out work on a schedule (a dispatcher, a heartbeat), and the threads
/// it wakes are an idle pool, not a pipeline it holds back.
pub const MAX_TIMER_SLEEP_SHARE: f64 = 0.5;
/// Times waiting is passed up the wait-for graph: a pipeline's stages
/// settle within a few.
const PASSES: usize = 8;
/// CPUs left idle while they wait (of the CPUs the target may use, or its
/// threads if fewer): a pipeline whose stages keep every CPU busy is paced
/// by its work, not by a waiting producer.
pub const MIN_IDLE_CPUS: f64 = 0.5;
/// The CPU time of the threads it hands work to, as a share of the
/// target's: under it they are an idle helper pool, not the program's
/// workers held back (pigz's compressors use most of its CPU; a database's
/// purge workers almost none of it).
pub const MIN_CONSUMERS_CPU_SHARE: f64 = 0.25;
/// ... unless the waker itself runs this share of the run: a saturated
/// producer, whose consumers idle because it cannot make their work any
/// faster, however little of it there is (the textbook bottleneck; a
/// background thread waking idle helpers runs almost never).
pub const MIN_PRODUCER_BUSY_SHARE: f64 = 0.5;

/// A thread's CPU time over the run.
fn busy_share(r: &Report, tid: u32) -> f64 {
    let ns: f64 = r
        .threads
        .iter()
        .filter(|t| t.tid == tid)
        .map(|t| (t.user_ns + t.sys_ns) as f64)
        .sum();
    ratio(ns, wall_ns(r))
}

/// The CPU time of `tids` as a share of the target's.
fn cpu_share_of(r: &Report, tids: &BTreeSet<u32>) -> f64 {
    let theirs: f64 = r
        .threads
        .iter()
        .filter(|t| tids.contains(&t.tid))
        .map(|t| (t.user_ns + t.sys_ns) as f64)
        .sum();
    ratio(theirs, cpu_ns(r))
}

fn counts(w: &WakeupReport) -> bool {
    // A process outside the target (a client) ending its waits is I/O.
    w.waker_in_target
        && w.mechanism != "exit"
        && !w.mechanism.starts_with("kernel")
        && w.waker_tid != w.woken_tid
        && w.count >= MIN_WAKES_PER_CONSUMER
}

/// Each thread's share of its waiting spent at sites classed waiting for
/// work (a site's time split evenly among its waiters); None for a report
/// with no wait sites (written before kerntax had them): all of it.
fn consumer_shares(r: &Report) -> Option<BTreeMap<u32, f64>> {
    if r.waits.is_empty() {
        return None;
    }
    // tid -> (waiting for work, all waiting), ns.
    let mut by: BTreeMap<u32, (f64, f64)> = BTreeMap::new();
    for s in &r.waits {
        let each = s.wait_ns as f64 / s.waiter_tids.len().max(1) as f64;
        for tid in &s.waiter_tids {
            let e = by.entry(*tid).or_default();
            e.1 += each;
            // A runtime's scheduler parking its idle threads (Go's stopm)
            // hands goroutines from thread to thread: its threads are
            // interchangeable, and none paces another (caddy-serve: one
            // thread "paced" the others by waking them in startm).
            if s.class == WaitClass::WaitingForWork && s.prior != WaitPrior::RuntimeIdle {
                e.0 += each;
            }
        }
    }
    Some(
        by.into_iter()
            .map(|(tid, (work, all))| (tid, ratio(work, all)))
            .collect(),
    )
}

/// A wake-up of a consumer: who woke whom, and the waiting for work it
/// ended.
struct Edge<'a> {
    wakeup: &'a WakeupReport,
    /// The woken thread's share of its waiting that is for work.
    share: f64,
    wait_ns: f64,
}

#[derive(Default)]
struct Waker<'a> {
    comm: &'a str,
    /// Waiting its own wake-ups ended.
    ended_ns: f64,
    /// The waiting that traces back to it, through the threads it feeds.
    wait_ns: f64,
    woken: BTreeSet<u32>,
    /// (wake-ups, frames) of its sampled stacks.
    top_stack: Option<(u64, &'a [Frame])>,
}

/// The runtime's event loop thread `tid` runs, from the stacks it woke
/// others from (any of them: a loop's wake-ups are made from its callbacks,
/// under its frames).
fn event_loop(r: &Report, tid: u32) -> Option<&'static crate::runtime::EventLoop> {
    r.wakeups
        .iter()
        .filter(|w| w.waker_tid == tid)
        .flat_map(|w| &w.waker_stacks)
        .find_map(|s| crate::runtime::event_loop_of(s.frames.iter().map(|f| f.function())))
}

/// A thread's own largest off-CPU reason other than the run queue.
fn longest_own_wait(t: &crate::report::OffCpuThread) -> Option<&crate::report::OffCpuReasonReport> {
    t.reasons
        .iter()
        .filter(|x| x.reason != OffCpuReason::Involuntary)
        .max_by_key(|x| x.ns)
}

/// The longest wait of the pacing thread `tid` itself (what paces it: its
/// source, its disk) gone too, with `fix`: the most a faster producer
/// could give (read from a file instead of a slow pipe).
fn own_wait_gone(r: &Report, tid: u32, fix: &super::gain::Fix) -> Option<super::gain::Fix> {
    let t = r.offcpu.iter().find(|t| t.tid == tid)?;
    let top = longest_own_wait(t)?;
    let mut most = fix.clone();
    most.fixed_waits.push((tid, top.ns as f64));
    Some(most)
}

/// What the producer itself waits for: its largest off-CPU reason other
/// than the run queue, and who ended those waits.
fn own_wait(r: &Report, tid: u32) -> String {
    let Some(t) = r.offcpu.iter().find(|t| t.tid == tid) else {
        return "Look at what the thread itself waits for, too.".into();
    };
    let Some(top) = longest_own_wait(t) else {
        return "It never waits itself: its own work is the limit.".into();
    };
    // Its syscalls with a tenth of that time or more, most first.
    let mut calls: Vec<(&str, u64)> = top
        .syscalls
        .iter()
        .filter(|(_, ns)| **ns * 10 >= top.ns)
        .map(|(n, ns)| (n.as_str(), *ns))
        .collect();
    calls.sort_by_key(|c| std::cmp::Reverse(c.1));
    let calls: Vec<&str> = calls.into_iter().map(|c| c.0).collect();
    let by = r
        .wakeups
        .iter()
        .filter(|w| w.woken_tid == tid)
        .max_by_key(|w| w.wait_ns)
        .map_or(String::new(), |w| {
            format!(", woken mostly by {} ({})", w.waker_comm, w.mechanism)
        });
    format!(
        "It waits itself for {} of the run ({}{}){by}: that is what paces it.",
        crate::units::duration(top.ns),
        top.reason.name(),
        if calls.is_empty() {
            String::new()
        } else {
            format!(" in {}", calls.join(", "))
        }
    )
}

/// Time thread `tid` slept on a timer: in nanosleep and the like, or in
/// waits a timer's expiry ended (a timed wait that timed out, as a JVM's
/// Thread.sleep or a dispatcher's timed wait for requests is).
fn timer_sleep_ns(r: &Report, tid: u32) -> f64 {
    let sleeping: f64 = r
        .offcpu
        .iter()
        .filter(|t| t.tid == tid)
        .flat_map(|t| &t.reasons)
        .filter(|x| x.reason == OffCpuReason::Sleep)
        .map(|x| x.ns as f64)
        .sum();
    let timed_out: f64 = r
        .wakeups
        .iter()
        .filter(|w| w.woken_tid == tid && w.waker_comm == TIMER_WAKER)
        .map(|w| w.wait_ns as f64)
        .sum();
    sleeping.max(timed_out)
}

/// Each waker's ended waiting, passed up the wait-for graph `edges` (see
/// the module's doc). Of the waiting that reaches a thread, it keeps the
/// share of the run it neither waits for a waker in the graph nor sleeps
/// on a timer (`timer_ns`, by waker); it hands the waiting share to its wakers in
/// proportion to the waiting they ended for it, and the timer's share to
/// no one: work handed out on a schedule is not held back by the thread
/// that hands it out. What it keeps stays kept.
fn traced_ns(
    edges: &[Edge<'_>],
    wall_ns: f64,
    timer_ns: &BTreeMap<u32, f64>,
) -> BTreeMap<u32, f64> {
    let mut waited_ns: BTreeMap<u32, f64> = BTreeMap::new();
    let mut moving: BTreeMap<u32, f64> = BTreeMap::new();
    for e in edges {
        *waited_ns.entry(e.wakeup.woken_tid).or_default() += e.wait_ns;
        *moving.entry(e.wakeup.waker_tid).or_default() += e.wait_ns;
    }
    let mut kept: BTreeMap<u32, f64> = BTreeMap::new();
    for _ in 0..PASSES {
        let mut next: BTreeMap<u32, f64> = BTreeMap::new();
        for (&tid, &ns) in &moving {
            let waited = waited_ns.get(&tid).copied().unwrap_or(0.0);
            let waiting = clamp01(ratio(waited, wall_ns));
            let timer = timer_ns.get(&tid).copied().unwrap_or(0.0);
            let on_timer = clamp01(ratio(timer, wall_ns)).min(1.0 - waiting);
            *kept.entry(tid).or_default() += ns * (1.0 - waiting - on_timer);
            let passed = ns * waiting;
            if passed <= 0.0 {
                continue;
            }
            for e in edges.iter().filter(|e| e.wakeup.woken_tid == tid) {
                *next.entry(e.wakeup.waker_tid).or_default() += passed * e.wait_ns / waited;
            }
        }
        moving = next;
    }
    // What still moves after the last pass (a cycle) stays where it is.
    for (tid, ns) in moving {
        *kept.entry(tid).or_default() += ns;
    }
    kept
}

pub fn check(r: &Report) -> Vec<Finding> {
    let mut wakers: BTreeMap<u32, Waker> = BTreeMap::new();
    let mut total = 0.0;
    let shares = consumer_shares(r);
    let share = |tid: u32| {
        shares
            .as_ref()
            .map_or(1.0, |s| s.get(&tid).copied().unwrap_or(0.0))
    };
    let edges: Vec<Edge<'_>> = r
        .wakeups
        .iter()
        .filter(|w| counts(w))
        .map(|w| {
            let share = share(w.woken_tid);
            Edge {
                wakeup: w,
                share,
                wait_ns: w.wait_ns as f64 * share,
            }
        })
        .filter(|e| e.wait_ns > 0.0)
        .collect();
    for e in &edges {
        let w = e.wakeup;
        total += e.wait_ns;
        let k = wakers.entry(w.waker_tid).or_default();
        k.comm = &w.waker_comm;
        k.ended_ns += e.wait_ns;
        // A thread that mostly waits for something else is not one it
        // hands work to.
        if e.share >= 0.5 {
            k.woken.insert(w.woken_tid);
        }
        for s in &w.waker_stacks {
            if k.top_stack.is_none_or(|t| s.count > t.0) {
                k.top_stack = Some((s.count, &s.frames));
            }
        }
    }
    // Each waker's time asleep on a timer, for the passing and its evidence.
    let timer_ns: BTreeMap<u32, f64> = wakers
        .keys()
        .map(|&tid| (tid, timer_sleep_ns(r, tid)))
        .collect();
    for (tid, traced) in traced_ns(&edges, wall_ns(r), &timer_ns) {
        if let Some(k) = wakers.get_mut(&tid) {
            k.wait_ns = traced;
        }
    }
    wakers
        .iter()
        .filter_map(|(tid, k)| {
            let waiting = ratio(k.wait_ns, wall_ns(r));
            let threads = r.threads.len().max(2) as f64 - 1.0;
            let idle_cpus = idle_cpus(r, r.threads.len() as f64);
            let busy = busy_share(r, *tid);
            let event_loop = event_loop(r, *tid);
            let thread = match event_loop {
                Some(l) => format!("{} (tid {tid}), {},", k.comm, l.name),
                None => format!("{} (tid {tid})", k.comm),
            };
            let remedy = match event_loop {
                Some(l) => format!(
                    "{} threads sleep until this one hands them work or data, so it sets the \
                     pace. {}",
                    k.woken.len(),
                    l.remedy
                ),
                None => format!(
                    "{} threads sleep until this one hands them work or data, so it sets the \
                     pace. Make its part faster or parallel: split its work across several \
                     producers, hand over work in batches, or let the waiting threads take \
                     work themselves (a shared queue or work stealing) instead of waiting for \
                     it to be handed out.",
                    k.woken.len()
                ),
            };
            Draft {
                id: ID,
                title: format!(
                    "{thread} paces the others: {:.0}% of their waiting ends with it{}",
                    ratio(k.wait_ns, total) * 100.0,
                    if k.wait_ns > k.ended_ns * 1.05 {
                        " or with the threads it feeds"
                    } else {
                        ""
                    }
                ),
                severity: ratio(k.wait_ns, wall_ns(r) * threads),
                evidence: vec![
                    at_least(
                        "share_of_ended_wait",
                        ratio(k.wait_ns, total),
                        MIN_SHARE_OF_ENDED_WAIT,
                    ),
                    at_least("threads_woken", k.woken.len() as f64, MIN_THREADS_WOKEN),
                    at_least("waiting_threads", waiting, MIN_WAITING_THREADS),
                    at_least("idle_cpus", idle_cpus, MIN_IDLE_CPUS),
                    if busy >= MIN_PRODUCER_BUSY_SHARE {
                        at_least("producer_busy_share", busy, MIN_PRODUCER_BUSY_SHARE)
                    } else {
                        at_least(
                            "consumers_cpu_share",
                            cpu_share_of(r, &k.woken),
                            MIN_CONSUMERS_CPU_SHARE,
                        )
                    },
                    at_most(
                        "timer_sleep_share",
                        ratio(timer_ns[tid], wall_ns(r)),
                        MAX_TIMER_SLEEP_SHARE,
                    ),
                ],
                culprit: Culprit {
                    kind: CulpritKind::Thread,
                    name: format!("{} (tid {tid})", k.comm),
                    frames: k.top_stack.map(|t| t.1.to_vec()).unwrap_or_default(),
                },
                remedy: format!("{remedy} {}", own_wait(r, *tid)),
                expected_gain: {
                    let woken: Vec<u32> = k.woken.iter().copied().collect();
                    let mut fix = super::gain::fixes::waits(
                        r,
                        &woken,
                        k.wait_ns,
                        super::gain::fixes::LOCK_WAIT_REASONS,
                        format!(
                            "were the {} threads it feeds never kept waiting for it (its own \
                             work as it is)",
                            woken.len()
                        ),
                    );
                    fix.at_most = own_wait_gone(r, *tid, &fix).map(Box::new);
                    super::gain::predict(r, &fix)
                },
            }
            .fire()
        })
        .collect()
}
