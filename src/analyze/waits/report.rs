//! A site's report: its figures, class and evidence, the releases that
//! ended its sleeps with the wakers' stacks, and the stacks it waited at.

use std::collections::BTreeMap;

use super::Inputs;
use super::acc::{PairSites, ReleaseAcc, SiteAcc};
use super::signals::{Busy, Handovers, Nesting};
use super::site::{WAKE_WORDS, site_of};
use crate::frame::Frame;
use crate::report::{CountedStack, Release, TimedStack, WaitClass, WaitSite};

/// Stacks kept per site and per release.
const MAX_STACKS: usize = 8;

/// What decided a site's class, for its report.
pub struct Verdict {
    pub class: WaitClass,
    pub evidence: Vec<String>,
    pub busy: Busy,
    pub handovers: Handovers,
    pub nesting: Nesting,
}

pub fn site_report(
    function: String,
    a: SiteAcc,
    v: Verdict,
    inp: &Inputs<'_>,
    pair_sites: &PairSites,
    wall: f64,
) -> WaitSite {
    let prior = a.prior();
    let turns_share = v.handovers.turns_share(a.woken_ns);
    let relay_share = v.handovers.relay_share(a.woken_ns);
    let mut releases: Vec<Release> = a
        .releases
        .into_iter()
        .map(|(mechanism, r)| {
            let from_waiters = r.in_target && r.mostly_wait_here(&a.waiters);
            let stacks = release_stacks(&r, &function, &a.aliases, inp, pair_sites);
            let site = stacks
                .first()
                .map(|s| site_of(&s.frames, 0, WAKE_WORDS).0)
                .filter(|s| !s.is_empty());
            Release {
                mechanism,
                site,
                from_waiters,
                in_target: r.in_target,
                wakers: r.wakers.len() as u32,
                count: r.count.round() as u64,
                wait_ns: r.ns.round() as u64,
                stacks,
            }
        })
        .collect();
    releases.sort_by(|a, b| {
        b.wait_ns
            .cmp(&a.wait_ns)
            .then(a.mechanism.cmp(&b.mechanism))
    });
    let stacks: Vec<TimedStack> = top_stacks(a.stacks)
        .into_iter()
        .map(|(frames, ns, samples)| TimedStack {
            frames,
            ns,
            samples,
            estimated: true,
        })
        .collect();
    WaitSite {
        function,
        via: a.via,
        class: v.class,
        evidence: v.evidence,
        prior,
        waits: a.count.round() as u64,
        futile: a.futile.round() as u64,
        timed_out: a.timed_out.round() as u64,
        woken: a.woken.round() as u64,
        interrupted: a.interrupted.round() as u64,
        wait_ns: a.ns.round() as u64,
        waiting_threads: a.ns / wall,
        waiters: a.waiters.len() as u32,
        waiter_tids: a.waiters.iter().copied().collect(),
        locks: vec![],
        processes: a.pids.len() as u32,
        waiter_cpu_share: v.busy.run_share,
        waiter_between_busy_share: v.busy.between_share,
        loop_share: v.nesting.loop_share,
        nested_share: v.nesting.nested_share,
        syscalls: a
            .syscalls
            .into_iter()
            .map(|(k, v)| (k, v.round() as u64))
            .collect(),
        lock_words: a.locks.len() as u32,
        turns_share,
        relay_share,
        runtime_lock: None,
        releases,
        stacks,
        estimated: true,
    }
}

/// The wakers' stacks that ended this site's sleeps: each (waker, woken)
/// pair's sampled stacks, in the share of that pair's sleeps that were here.
fn release_stacks(
    r: &ReleaseAcc,
    site: &str,
    aliases: &[String],
    inp: &Inputs<'_>,
    pair_sites: &PairSites,
) -> Vec<CountedStack> {
    let mut by: BTreeMap<Vec<Frame>, (f64, u64)> = BTreeMap::new();
    for w in inp.wakes {
        let pair = (w.waker_tid, w.woken_tid);
        if !r.pairs.contains_key(&pair) {
            continue;
        }
        let Some(all) = pair_sites.get(&pair) else {
            continue;
        };
        let total: f64 = all.values().sum();
        let here: f64 = std::iter::once(site)
            .chain(aliases.iter().map(String::as_str))
            .filter_map(|s| all.get(s))
            .sum();
        if total <= 0.0 || here <= 0.0 {
            continue;
        }
        let own: Vec<Frame> = w.frames.iter().skip(w.runtime).cloned().collect();
        let frames = if own.is_empty() {
            w.frames.clone()
        } else {
            own
        };
        let e = by.entry(frames).or_default();
        e.0 += w.weight as f64 * here / total;
        e.1 += 1;
    }
    top_stacks(by)
        .into_iter()
        .map(|(frames, count, samples)| CountedStack {
            frames,
            count,
            samples,
            estimated: true,
        })
        .collect()
}

/// Stacks with the (time or count) they stand for and their samples: the
/// MAX_STACKS weightiest, rounded, most first.
fn top_stacks(by: BTreeMap<Vec<Frame>, (f64, u64)>) -> Vec<(Vec<Frame>, u64, u64)> {
    let mut out: Vec<(Vec<Frame>, u64, u64)> = by
        .into_iter()
        .map(|(frames, (value, samples))| (frames, value.round() as u64, samples))
        .collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out.truncate(MAX_STACKS);
    out
}

impl ReleaseAcc {
    /// Whether wakers that wait at the site themselves ended most of these
    /// sleeps (MIN_RELEASE_SHARE of them): one stray wake-up from a thread
    /// starting up (CI, a JVM's: 1 of 28,077) does not make a lock's
    /// hand-overs someone else's.
    fn mostly_wait_here(&self, waiters: &std::collections::BTreeSet<u32>) -> bool {
        let total: f64 = self.pairs.values().sum();
        let here: f64 = self
            .pairs
            .iter()
            .filter(|((waker, _), _)| waiters.contains(waker))
            .map(|(_, n)| n)
            .sum();
        total > 0.0 && here / total >= super::classify::MIN_RELEASE_SHARE
    }
}
