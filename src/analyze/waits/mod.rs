//! Wait sites: every blocking wait of the target attributed to the place in
//! the program's own code where it waits, over all its threads and
//! processes, and classified from what the run shows rather than from the
//! primitive used.
//!
//! Why by code and not by futex word: a lock whose words are one per waiter
//! (a semaphore per process, a per-thread parker, a latch woken by a
//! signal) spreads over as many words as it has waiters, and a global
//! interpreter lock built from a mutex and a condition variable over two;
//! the code that waits is the same for all of them.
//!
//! Why by evidence: a condition variable can be a lock (threads with work
//! queue on it and hand it to each other) and a mutex can park an idle pool.
//! The pieces, one module each:
//! - `site`: where a wait is;
//! - `naming`: its name as people read it;
//! - `acc`: the samples gathered by site, scaled to the exact counters;
//! - `merge`: one wait under two names (a JIT's inlining);
//! - `prior`: what the standard runtime's frames say the wait is;
//! - `signals`: turns, relays, work in hand;
//! - `fed`: how far up the wait-for graph a thread's waits come from I/O,
//!   and the peer there (a reply passed on by the target's own threads);
//! - `classify`: the class from the signals;
//! - `runtime`: a standard runtime's well-known lock, and what its frames
//!   say of the class;
//! - `report`: the site as the report shows it.
//!
//! Classes depend on each other in one way: a thread's waits for work at
//! one site are left out of how busy it is between its waits at another
//! (a pool's threads idle in their queue between requests, yet queue on a
//! lock within one). So sites are classed once without that, then again
//! with the first pass's waits for work left out.

mod acc;
mod classify;
mod fed;
mod merge;
mod naming;
pub mod prior;
mod report;
mod runtime;
mod signals;
mod site;

use crate::fixed_hash::HashMap;
use std::collections::{BTreeMap, BTreeSet};

use crate::analyze::aggregate::ThreadUsage;
use crate::model::{LockKey, OffCpuCounters, Waker};
use crate::recording::LockName;
use crate::report::{WaitClass, WaitSite};
use crate::tally::{SleepKey, SleepTally};

pub use acc::MIN_UNSAMPLED_WORD_SHARE;
pub use classify::{
    MAX_PARKED_WAITS, MIN_BUSY_BETWEEN_SHARE, MIN_BUSY_SHARE, MIN_FUTILE_PER_S, MIN_FUTILE_SHARE,
    MIN_NESTING_SHARE, MIN_PARKED_SHARE, MIN_RELEASE_SHARE, MIN_RETRY_WOKEN_SHARE,
    MIN_TIMEOUT_SHARE, MIN_TURNS_SHARE, work_in_hand,
};
pub use naming::{display, displays, release_site, wait_function, with_callers};
pub use signals::{MIN_WAKERS_PER_WAITER, RELAY_MAX_RAN_NS};
pub use site::{PLATFORM_WAIT_WORDS, VM_CALLING, WAIT_WORDS, WAKE_WORDS, site_of};

/// Sites kept in the report (most time first).
const MAX_SITES: usize = 200;
/// Share of a lock's sleeping at contended sites from which the lock is
/// contention.
pub const MIN_CONTENDED_SHARE_OF_LOCK: f64 = 0.25;

/// A sampled sleep and where it was.
#[derive(Clone, Debug)]
pub struct SleepSample {
    pub key: SleepKey,
    pub frames: Vec<crate::frame::Frame>,
    /// Leading strings of `frames` in runtime libraries.
    pub runtime: usize,
    /// The stack was cut short at its outer end (its depth is unknown).
    pub truncated: bool,
    pub tally: SleepTally,
}

/// Sampled wait calls on a lock from one stack (futile ones included).
#[derive(Clone, Debug)]
pub struct LockWaitSample {
    pub key: LockKey,
    pub frames: crate::analyze::cpu::Frames,
    pub runtime: usize,
    /// Waits that returned at once (EAGAIN) the samples stand for.
    pub futile: u64,
}

/// A sampled wake-up: the waker's stack.
#[derive(Clone, Debug)]
pub struct WakeSample {
    pub waker_tid: u32,
    pub woken_tid: u32,
    /// What the waker had run since its own last sleep (`Waker::ran_log2`).
    pub waker_ran_log2: u8,
    pub frames: Vec<crate::frame::Frame>,
    pub runtime: usize,
    pub weight: u64,
}

pub struct Inputs<'a> {
    pub sleeps: &'a [SleepSample],
    pub lock_waits: &'a [LockWaitSample],
    pub wakes: &'a [WakeSample],
    /// Exact off-CPU counters (to scale the samples to).
    pub offcpu: &'a [OffCpuCounters],
    /// Exact futile waits per lock.
    pub futile: &'a HashMap<LockKey, u64>,
    pub threads: &'a [ThreadUsage],
    /// Thread names, also of wakers outside the target.
    pub comms: &'a HashMap<u32, String>,
    /// Each lock word's name: the variable it lives in, where named, is
    /// what a runtime's lock is known by (CPython's `_PyRuntime`).
    pub lock_names: &'a HashMap<LockKey, LockName>,
    pub duration_ns: u64,
}

/// How a waker woke (its syscall), as the wake-up graph says it.
pub fn mechanism(w: &Waker, comm: &str) -> String {
    if w.kernel && w.nr.is_none() {
        return "kernel (timer, interrupt or kernel thread)".into();
    }
    super::sched::mechanism_of(w.nr, w.kernel, w.tracked, comm)
}

/// What the wait-site analysis hands on besides the sites.
#[derive(Default)]
pub struct Waits {
    pub sites: Vec<WaitSite>,
    /// Per site (same order), its lock words, most time first.
    pub site_locks: Vec<Vec<LockKey>>,
    /// The class each lock word's waits got (the site holding most of them).
    pub lock_class: HashMap<LockKey, WaitClass>,
    /// Per (thread, syscall), time asleep at contended sites: a latch's
    /// epoll_wait or a pipe's read that is a lock wait.
    pub contended_calls: HashMap<(u32, u32), u64>,
    /// The contended sites' functions (and the other names they go by).
    pub contended_sites: BTreeSet<String>,
    /// The contended sites' sleeps in time: (when each ended, CLOCK_MONOTONIC
    /// ns; its length, ns), scaled to the exact counters.
    pub contended_spans: Vec<(u64, u64, f64)>,
}

/// Per thread, its time asleep at the sites classed waiting for work.
fn idle_time(
    sites: &BTreeMap<String, acc::SiteAcc>,
    classes: &HashMap<String, WaitClass>,
) -> BTreeMap<u32, f64> {
    let mut idle: BTreeMap<u32, f64> = BTreeMap::new();
    for (name, a) in sites {
        if classes.get(name) == Some(&WaitClass::WaitingForWork) {
            for (tid, ns) in &a.by_thread {
                *idle.entry(*tid).or_default() += ns;
            }
        }
    }
    idle
}

/// A site's waiting passed on from I/O, with the threads that passed it
/// and the peer behind them named.
fn from_peer(r: &fed::Relayed, comms: &HashMap<u32, String>) -> classify::FromPeer {
    let comm = |tid: &u32| {
        comms
            .get(tid)
            .cloned()
            .unwrap_or_else(|| format!("thread {tid}"))
    };
    let mut names: Vec<String> = r.via.iter().map(comm).collect();
    names.dedup();
    let mut who = names.join(", ");
    if let Some((pid, tid)) = r.peer {
        let process = comms
            .get(&pid)
            .map_or_else(|| format!("pid {pid}"), |c| format!("{c} (pid {pid})"));
        who.push_str(&format!(
            "; behind them {process}, its thread {}",
            comm(&tid)
        ));
    }
    classify::FromPeer { ns: r.ns, who }
}

/// The wait sites, most at stake first.
pub fn build(inp: &Inputs<'_>) -> Waits {
    let acc::Gathered {
        mut sites,
        placed,
        pair_sites,
        lock_sites,
    } = acc::gather(inp);
    merge::inlined(&mut sites);
    let merged_into: HashMap<String, String> = sites
        .iter()
        .flat_map(|(name, a)| a.aliases.iter().map(move |x| (x.clone(), name.clone())))
        .collect();
    let canonical = |s: &str| merged_into.get(s).cloned().unwrap_or_else(|| s.to_string());
    let nesting = signals::nesting(&placed, inp.sleeps, &canonical);
    let nest = |name: &str| nesting.get(name).copied().unwrap_or_default();
    let wall = inp.duration_ns.max(1) as f64;
    let usage = acc::thread_times(inp, wall);
    let from = signals::wake_from(inp.wakes);
    let handovers: HashMap<String, signals::Handovers> = sites
        .iter()
        .map(|(name, a)| (name.clone(), signals::handovers(a, name, inp, &from)))
        .collect();
    // First pass: how busy the waiters are, all their other waits counted.
    let none = BTreeMap::new();
    let none_peer = classify::FromPeer::default();
    let first: HashMap<String, WaitClass> = sites
        .iter()
        .map(|(name, a)| {
            let b = signals::busy(a, &usage, &none, wall);
            (
                name.clone(),
                classify::classify(a, b, &handovers[name], nest(name), &none_peer, wall).0,
            )
        })
        .collect();
    let idle = idle_time(&sites, &first);
    let fed = fed::io_fed(&sites, &first);
    let mut verdicts: HashMap<String, report::Verdict> = HashMap::default();
    for (name, a) in &sites {
        // This site's own waits are left out as the time it waits here.
        let mut elsewhere = idle.clone();
        if first[name] == WaitClass::WaitingForWork {
            for (tid, ns) in &a.by_thread {
                if let Some(e) = elsewhere.get_mut(tid) {
                    *e = (*e - ns).max(0.0);
                }
            }
        }
        let busy = signals::busy(a, &usage, &elsewhere, wall);
        let h = handovers[name];
        let peer = from_peer(&fed::relayed(a, &fed), inp.comms);
        let (class, evidence) = classify::classify(a, busy, &h, nest(name), &peer, wall);
        verdicts.insert(
            name.clone(),
            report::Verdict {
                class,
                evidence,
                busy,
                handovers: h,
                nesting: nest(name),
            },
        );
    }
    let mut contended_calls: HashMap<(u32, u32), u64> = HashMap::default();
    let mut contended_sites = BTreeSet::new();
    let mut contended_spans = Vec::new();
    let mut aliases_of: HashMap<String, String> = HashMap::default();
    let mut out: Vec<(WaitSite, Vec<LockKey>)> = sites
        .into_iter()
        .map(|(function, mut a)| {
            let v = verdicts.remove(&function).expect("a verdict per site");
            let by_call = std::mem::take(&mut a.by_call);
            let spans = std::mem::take(&mut a.spans);
            let mut keys: Vec<(LockKey, f64)> = a.by_lock.iter().map(|(k, v)| (*k, *v)).collect();
            keys.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
            let keys: Vec<LockKey> = keys.into_iter().map(|k| k.0).collect();
            for alias in &a.aliases {
                aliases_of.insert(alias.clone(), function.clone());
            }
            let aliases = a.aliases.clone();
            let mut site = report::site_report(function, a, v, inp, &pair_sites, wall);
            let symbol = keys
                .first()
                .and_then(|k| inp.lock_names.get(k))
                .and_then(|n| n.symbol.as_deref());
            runtime::name_and_class(&mut site, symbol);
            if site.class == WaitClass::Contention {
                for (call, ns) in by_call {
                    *contended_calls.entry(call).or_default() += ns.round() as u64;
                }
                contended_sites.insert(site.function.clone());
                contended_sites.extend(aliases);
                contended_spans.extend(spans);
            }
            (site, keys)
        })
        .collect();
    out.sort_by(|(a, _), (b, _)| {
        (b.class == WaitClass::Contention)
            .cmp(&(a.class == WaitClass::Contention))
            .then(b.wait_ns.cmp(&a.wait_ns))
            .then(b.futile.cmp(&a.futile))
            .then(a.function.cmp(&b.function))
    });
    let class_of: HashMap<&str, WaitClass> = out
        .iter()
        .map(|(s, _)| (s.function.as_str(), s.class))
        .collect();
    let class_of_site = |site: &str| {
        let name = aliases_of.get(site).map_or(site, String::as_str);
        class_of.get(name).copied()
    };
    // A lock waited on at several sites is contention if contended sites
    // hold a fair share of its waiting (a GIL's mutex is taken inside the
    // condvar wait and around it); else it is what its main site is.
    let lock_class = lock_sites
        .into_iter()
        .filter_map(|(k, by)| {
            let total: f64 = by.values().sum();
            let contended: f64 = by
                .iter()
                .filter(|(site, _)| class_of_site(site) == Some(WaitClass::Contention))
                .map(|(_, ns)| ns)
                .sum();
            if total > 0.0 && contended / total >= MIN_CONTENDED_SHARE_OF_LOCK {
                return Some((k, WaitClass::Contention));
            }
            let top = by.iter().max_by(|a, b| a.1.total_cmp(b.1))?;
            Some((k, class_of_site(top.0)?))
        })
        .collect();
    out.truncate(MAX_SITES);
    let (sites, site_locks) = out.into_iter().unzip();
    Waits {
        sites,
        site_locks,
        lock_class,
        contended_calls,
        contended_sites,
        contended_spans,
    }
}

#[cfg(test)]
mod tests;
