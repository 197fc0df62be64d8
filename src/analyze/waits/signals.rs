//! The evidence a site's class rests on, each a named signal:
//!
//! - **turns**: the share of the woken waiting ended by threads that wait
//!   here themselves, handing over what they held (a lock's holder wakes
//!   the next waiter);
//! - **relays** (wPerf's cascade): a waiter that wakes the next waiter right
//!   after it was woken itself, from code on the woken's own wait path,
//!   passes a signal on (a queue's consumers: a take that leaves items
//!   behind signals the next taker) and hands over nothing it held: not
//!   turns;
//! - **work in hand**: what the waiters do between their waits here, their
//!   waits for work elsewhere left out: a pool's threads idle in their
//!   queue between requests, and a lock inside the request path must not
//!   look idle for it.
//!
//! Each is computed from the sampled sleeps and the exact per-thread
//! counters, with its threshold documented where it is used.

use crate::fixed_hash::HashMap;
use crate::frame::Frame;
use std::collections::{BTreeMap, BTreeSet};

use super::acc::{LockObject, SiteAcc, ThreadTime, object};
use super::prior::WaitPrior;
use super::site::{WAKE_WORDS, site_of};
use super::{Inputs, WakeSample};

/// The most a waker may have run since its own last sleep ended for its
/// wake-up to pass that one on: the few microseconds a queue's consumer
/// takes from its wake-up to signalling the next (measured on HotSpot's
/// LinkedBlockingQueue, 2-16 us; a lock's holder runs its critical section
/// first: 65-130 us in the same run).
pub const RELAY_MAX_RAN_NS: u64 = 16_384;

/// Share of a site's time asleep on lock objects that spent on objects of
/// one waiter each, from which its waiters sleep on objects of their own.
/// Not all of it: CI saw a JVM's workers, parked each on its own parker,
/// also block a little at a safepoint on one word they all share.
pub const MIN_PER_WAITER_SHARE: f64 = 0.9;

/// Distinct wakers (among the waiters) per woken waiter, on average, above
/// which the waiters hand over to one another in no fixed order.
pub const MIN_WAKERS_PER_WAITER: f64 = 2.0;

/// Whether the site's waiters sleep on lock objects of their own.
/// A mutex slept on inside its lock call (a condvar's re-acquisition of its
/// mutex, as a GVL's waiters all make) is not counted either way: its
/// waker held it, which the held-objects signal already says (ruby-gvl:
/// the GVL's shared mutex took over a tenth of its site's time in 2 suite
/// runs of 8, and the threads' hand-overs read as waiting for work).
fn per_waiter_objects(a: &SiteAcc) -> bool {
    let mut by_object: HashMap<LockObject, f64> = HashMap::default();
    for (k, ns) in &a.by_lock {
        if a.held_objects.contains(&object(k)) {
            continue;
        }
        *by_object.entry(object(k)).or_default() += ns;
    }
    let alone = |o: &LockObject| a.lock_waiters.get(&Some(*o)).is_some_and(|t| t.len() == 1);
    let total: f64 = by_object.values().sum();
    let own: f64 = by_object
        .iter()
        .filter(|(o, _)| alone(o))
        .map(|(_, ns)| ns)
        .sum();
    by_object.keys().filter(|o| alone(o)).count() >= 2
        && total > 0.0
        && own / total >= MIN_PER_WAITER_SHARE
}

/// Whether the waiters woke one another in no fixed order: each woken
/// waiter was woken by several of the others (a lock handed to whoever is
/// next), not by one fixed neighbour (a pipeline's stages).
/// The average is weighted by each waiter's woken waiting: a thread that
/// waited there once (a Ruby main thread taking the GVL at start, woken by
/// one thread) does not dilute how the busy waiters hand over.
fn mixed_wakes(a: &SiteAcc) -> bool {
    let mut wakers: HashMap<u32, (BTreeSet<u32>, f64)> = HashMap::default();
    for w in &a.woken_sleeps {
        if w.waker != w.woken && a.waiters.contains(&w.waker) && a.waiters.contains(&w.woken) {
            let e = wakers.entry(w.woken).or_default();
            e.0.insert(w.waker);
            e.1 += w.ns;
        }
    }
    let ns: f64 = wakers.values().map(|w| w.1).sum();
    let weighted: f64 = wakers.values().map(|w| w.0.len() as f64 * w.1).sum();
    a.waiters.len() >= 3 && ns > 0.0 && weighted / ns >= MIN_WAKERS_PER_WAITER
}

/// Where the wake-ups that could pass one on came from (those whose waker
/// had run at most RELAY_MAX_RAN_NS since its own last sleep): the
/// functions past the runtime's wake primitives and wrappers, with their
/// weights, per (waker, woken) pair and per waker (wake-ups are sampled, and
/// a pair may have none).
#[derive(Default)]
pub struct WakeFrom {
    pairs: HashMap<(u32, u32), Vec<WakeAt>>,
    wakers: HashMap<u32, Vec<WakeAt>>,
}

/// A sampled wake-up: the function it came from, the functions on the
/// waker's stack, and the wake-ups it stands for.
#[derive(Clone, Debug)]
pub struct WakeAt {
    pub from: String,
    pub stack: BTreeSet<String>,
    pub weight: f64,
}

impl WakeFrom {
    fn get(&self, waker: u32, woken: u32) -> Option<&Vec<WakeAt>> {
        self.pairs
            .get(&(waker, woken))
            .or_else(|| self.wakers.get(&waker))
    }
}

/// Whether a waker that had run for `ran_log2` (`Waker::ran_log2`) may be
/// passing a wake-up on.
fn just_woken(ran_log2: u8) -> bool {
    ran_log2 > 0 && 1u64 << ran_log2.min(63) <= RELAY_MAX_RAN_NS
}

pub fn wake_from(wakes: &[WakeSample]) -> WakeFrom {
    let mut out = WakeFrom::default();
    for w in wakes.iter().filter(|w| just_woken(w.waker_ran_log2)) {
        let at = WakeAt {
            from: site_of(&w.frames, w.runtime, WAKE_WORDS).0,
            stack: w.frames.iter().map(|f| f.function().to_string()).collect(),
            weight: w.weight as f64,
        };
        out.pairs
            .entry((w.waker_tid, w.woken_tid))
            .or_default()
            .push(at.clone());
        out.wakers.entry(w.waker_tid).or_default().push(at);
    }
    out
}

/// The turns and relays of a site, as shares of the waiting threads of the
/// target ended.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Handovers {
    /// Woken waiting ended by threads of the target, ns.
    pub by_target_ns: f64,
    /// Of it: passed on by waiters just woken themselves.
    pub relay_ns: f64,
    /// Of the rest: ended by waiters handing over what they held.
    pub turns_ns: f64,
}

impl Handovers {
    /// Turns over the woken waiting that was not relayed.
    pub fn turns_share(&self, woken_ns: f64) -> f64 {
        let base = woken_ns - self.relay_ns;
        if base > 0.0 {
            self.turns_ns / base
        } else {
            0.0
        }
    }

    pub fn relay_share(&self, woken_ns: f64) -> f64 {
        if woken_ns > 0.0 {
            self.relay_ns / woken_ns
        } else {
            0.0
        }
    }
}

/// Share of a (waker, woken) pair's wake-ups that came from code on the
/// woken's wait path: the waker was in the same code (the function it
/// woke from is on the woken's stack, or the woken's site is on the
/// waker's; a JIT may have inlined one and not the other).
fn on_wait_path(from: Option<&Vec<WakeAt>>, frames: &[Frame], site: &str) -> f64 {
    let Some(from) = from else { return 0.0 };
    let total: f64 = from.iter().map(|w| w.weight).sum();
    let here: f64 = from
        .iter()
        .filter(|w| w.stack.contains(site) || frames.iter().any(|x| x.function() == w.from))
        .map(|w| w.weight)
        .sum();
    if total > 0.0 { here / total } else { 0.0 }
}

/// Who handed over what at a site: turns (the waker waits here too, on the
/// same lock object, or released a lock the sleeper waited to take, or the
/// waiters sleep on objects of their own and wake one another in no fixed
/// order) and relays (see the module doc).
pub fn handovers(a: &SiteAcc, site: &str, inp: &Inputs<'_>, from: &WakeFrom) -> Handovers {
    let shuffled = per_waiter_objects(a) && mixed_wakes(a);
    let mut h = Handovers::default();
    for w in &a.woken_sleeps {
        h.by_target_ns += w.ns;
        let waiter = a.waiters.contains(&w.waker);
        // A queue's consumers relay by design; elsewhere a condition's
        // waiter relays when it wakes the next right after its own wake-up,
        // from the woken's own wait path.
        let relay_share = match w.prior {
            WaitPrior::QueueTake if waiter => 1.0,
            WaitPrior::Condition | WaitPrior::Result
                if waiter && w.waker_ran_ns.is_some_and(|r| r <= RELAY_MAX_RAN_NS) =>
            {
                on_wait_path(
                    from.get(w.waker, w.woken),
                    &inp.sleeps[w.sample].frames,
                    site,
                )
            }
            _ => 0.0,
        };
        h.relay_ns += w.ns * relay_share;
        let turn = w.prior == WaitPrior::LockAcquire
            // The same lock object: a wait on no word (epoll, a read) has
            // none, and two threads in epoll_wait share nothing by it.
            || (w.object.is_some()
                && a.lock_waiters
                    .get(&w.object)
                    .is_some_and(|t| t.contains(&w.waker)))
            || (shuffled && waiter)
            || w.object.is_some_and(|o| a.held_objects.contains(&o));
        if turn {
            h.turns_ns += w.ns * (1.0 - relay_share);
        }
    }
    h
}

/// How busy a site's waiters are.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Busy {
    /// Their CPU over the run.
    pub run_share: f64,
    /// Running or runnable over their time between waits here, their waits
    /// for work at other sites left out.
    pub between_share: f64,
}

/// How busy the waiters of `a` are, leaving out each waiter's time at the
/// sites in `idle` (thread -> time asleep waiting for work elsewhere).
pub fn busy(
    a: &SiteAcc,
    usage: &HashMap<u32, ThreadTime>,
    idle: &BTreeMap<u32, f64>,
    wall: f64,
) -> Busy {
    let mut t = ThreadTime::default();
    let mut idle_ns = 0.0;
    for tid in &a.waiters {
        if let Some(u) = usage.get(tid) {
            let here = a.by_thread.get(tid).copied().unwrap_or(0.0);
            let elsewhere = idle.get(tid).copied().unwrap_or(0.0);
            t.cpu_ns += u.cpu_ns;
            t.runqueue_ns += u.runqueue_ns;
            // At least what was seen of it: its CPU, its run-queue wait
            // and its sleeps here and at the idle sites.
            t.seen_ns += u.seen_ns.max(u.cpu_ns + u.runqueue_ns + here + elsewhere);
            idle_ns += elsewhere;
        }
    }
    let run_share = t.cpu_ns / (wall * a.waiters.len().max(1) as f64);
    let between_ns = t.seen_ns - a.ns - idle_ns;
    let between_share = if between_ns > 0.0 {
        ((t.cpu_ns + t.runqueue_ns) / between_ns).min(1.0)
    } else {
        0.0
    };
    Busy {
        run_share,
        between_share,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_on_the_woken_threads_own_path_is_found_by_function() {
        let frames = vec![
            "Unsafe.park (jit)".into(),
            "java.util.concurrent.LinkedBlockingQueue.take (jit)".into(),
            "java.util.concurrent.ThreadPoolExecutor.getTask (jit)".into(),
        ];
        let at = |from: &str, stack: &[&str], weight: f64| WakeAt {
            from: from.to_string(),
            stack: stack.iter().map(|s| s.to_string()).collect(),
            weight,
        };
        let site = "java.util.concurrent.LinkedBlockingQueue.take";
        let from = vec![
            at("java.util.concurrent.ThreadPoolExecutor.getTask", &[], 3.0),
            at("Server.handle", &[], 1.0),
        ];
        assert_eq!(on_wait_path(Some(&from), &frames, site), 0.75);
        assert_eq!(on_wait_path(None, &frames, site), 0.0);
        // The woken waits in getTask (take inlined into it), the waker woke
        // from take called by getTask.
        let inlined = vec![
            "Unsafe.park (jit)".into(),
            "java.util.concurrent.ThreadPoolExecutor.getTask (jit)".into(),
        ];
        let from = vec![at(
            site,
            &[site, "java.util.concurrent.ThreadPoolExecutor.getTask"],
            1.0,
        )];
        assert_eq!(
            on_wait_path(
                Some(&from),
                &inlined,
                "java.util.concurrent.ThreadPoolExecutor.getTask"
            ),
            1.0
        );
    }
}

/// Frames at most between a wait's site and its thread's entry function for
/// it to be the thread's loop: the entry function itself, what it calls to
/// fetch its next unit of work (MariaDB's tpool `worker_main` ->
/// `get_task`), or that behind a thread trampoline (pigz's `ignition` ->
/// `compress_thread` -> its job wait). A wait three calls or more into a
/// thread is inside what it does.
pub const MAX_LOOP_FROM_ENTRY: usize = 2;

/// Share of a thread's waiting at a site, and samples there, for the site
/// to count in finding the thread's loop: a one-off wait (at start-up) does
/// not, and a loop's short wait (a connection reading its next request, 2%
/// of the waiting of one queued on a row lock the rest) does.
pub const MIN_DEPTH_SHARE: f64 = 0.01;
pub const MIN_DEPTH_SAMPLES: u64 = 3;
/// Frames a wait must reach deeper than another below the two stacks'
/// deepest common frame to be nested in the other's loop: one more is a
/// runtime's own wait nested in itself (Ruby's GVL timer waits one call
/// below its plain wait), not a unit of work.
pub const MIN_NESTED_EXTRA: usize = 2;

/// Where a site's waits sit in their threads' loops, as shares of its
/// sampled waiting (truncated stacks left out).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Nesting {
    /// At the shallowest wait of a thread that also waits deeper, or called
    /// by the thread's entry function itself (its loop): between units of
    /// work (a pool fetching its next task, a server reading the next
    /// request).
    pub loop_share: f64,
    /// Deeper than its thread's shallowest wait at another site: inside one
    /// unit of work, with work in hand (a row lock taken while serving a
    /// request).
    pub nested_share: f64,
}

/// Frames below the deepest frame that `a` and `b` (innermost first) share
/// from their outer ends, down to frame `at` of `a`.
fn below_common(a: &[Frame], at: usize, b: &[Frame]) -> Option<usize> {
    let common = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let depth = a.len().checked_sub(at)?;
    depth.checked_sub(common).filter(|&d| d > 0)
}

/// Each site's nesting (see `Nesting`), from the placed samples; sites are
/// named as `canonical` gives (an inlined method's waits under its own).
pub fn nesting(
    placed: &[super::acc::Placed],
    sleeps: &[super::SleepSample],
    canonical: &dyn Fn(&str) -> String,
) -> HashMap<String, Nesting> {
    // Per thread, per site: (waiting, samples, the heaviest placed sample).
    type AtSite<'a> = (f64, u64, Option<&'a super::acc::Placed>);
    let mut by_thread: HashMap<u32, BTreeMap<String, AtSite<'_>>> = HashMap::default();
    let mut total: HashMap<u32, f64> = HashMap::default();
    for p in placed {
        *total.entry(p.tid).or_default() += p.ns;
        if p.at.is_none() {
            continue;
        }
        let e = by_thread
            .entry(p.tid)
            .or_default()
            .entry(canonical(&p.site))
            .or_default();
        e.0 += p.ns;
        e.1 += p.samples;
        if e.2.is_none_or(|q| q.ns < p.ns) {
            e.2 = Some(p);
        }
    }
    // Per thread: its loop sites and its nested ones.
    let mut roles: HashMap<(u32, String), (bool, bool)> = HashMap::default();
    for (tid, sites) in &by_thread {
        let all = total[tid].max(1.0);
        let counted: Vec<(&String, &super::acc::Placed)> = sites
            .iter()
            .filter(|(_, (ns, samples, _))| {
                ns / all >= MIN_DEPTH_SHARE && *samples >= MIN_DEPTH_SAMPLES
            })
            .filter_map(|(s, (_, _, p))| Some((s, (*p)?)))
            .collect();
        for (sa, pa) in &counted {
            for (sb, pb) in &counted {
                if sa == sb {
                    continue;
                }
                let (fa, fb) = (&sleeps[pa.sample].frames, &sleeps[pb.sample].frames);
                let (Some(a), Some(b)) = (
                    below_common(fa, pa.at.unwrap_or(0), fb),
                    below_common(fb, pb.at.unwrap_or(0), fa),
                ) else {
                    continue;
                };
                if b >= a + MIN_NESTED_EXTRA {
                    roles.entry((*tid, (*sa).clone())).or_default().0 = true;
                    roles.entry((*tid, (*sb).clone())).or_default().1 = true;
                }
            }
        }
    }
    let mut out: HashMap<String, (f64, f64, f64)> = HashMap::default();
    for p in placed {
        let site = canonical(&p.site);
        let e = out.entry(site.clone()).or_default();
        // Cut-short stacks count in the whole: what is known of the rest
        // must not speak for them (a GVL's waits deep in the VM are cut
        // short, its waits at a thread's start are not).
        e.2 += p.ns;
        if p.at.is_none() {
            continue;
        }
        let (looped, nested) = roles
            .get(&(p.tid, site.clone()))
            .copied()
            .unwrap_or_default();
        if p.from_entry.is_some_and(|x| x <= MAX_LOOP_FROM_ENTRY) || (looped && !nested) {
            e.0 += p.ns;
        } else if nested && !looped {
            e.1 += p.ns;
        }
    }
    out.into_iter()
        .map(|(site, (looped, nested, all))| {
            let share = |x: f64| if all > 0.0 { x / all } else { 0.0 };
            (
                site,
                Nesting {
                    loop_share: share(looped),
                    nested_share: share(nested),
                },
            )
        })
        .collect()
}
