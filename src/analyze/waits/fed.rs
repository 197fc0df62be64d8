//! Fed from outside: how much of a thread's waiting is ended, directly or
//! through the threads of the target that wake it, by I/O — other
//! processes, the network, the kernel.
//!
//! Why: a client's thread that waits for its RPC's reply is woken by a
//! thread of its own process (a network thread that read the reply, or a
//! callback executor that a network thread handed it to), never by the
//! peer that sent it. Taken one hop at a time that reads as a producer
//! handing out work, or, when the runtime's frames say "acquire", as a lock
//! handed over. Following the wait-for graph up to where it leaves the
//! target (wPerf's idea: the chain of waits, not the last hop) says that
//! the thread waits for a peer, and which one.
//!
//! A thread's score is the share of its waiting, at sites that pace it (not
//! its timers, not start-up or teardown), spent at sites classed I/O or
//! peer or ended by other processes, plus, at its other sites, the waiting
//! its wakers in the target ended, weighted by those wakers' own scores. A few passes settle a
//! chain of a few hops (reader -> callback pool -> caller).

use crate::fixed_hash::HashMap;
use std::collections::BTreeMap;

use super::acc::{SiteAcc, WokenSleep};
use crate::report::WaitClass;

/// Share of a thread's woken waiting a waker must end for the thread to
/// reach as far as it does: a path a reply comes by, not a wake now and then.
pub const MIN_EDGE_SHARE: f64 = 0.2;
/// The most a waker may have run since its own last sleep for its wake-up
/// to pass something on rather than deliver a result it computed: a
/// reply's decode and dispatch take microseconds (a queue's relay 2-16 us,
/// `RELAY_MAX_RAN_NS`); a result computed takes longer.
pub const MAX_PASS_ON_RAN_NS: u64 = 1 << 20;

/// Passes over the wait-for graph: a reply reaches its caller in a few
/// hops (a network thread, a callback executor, the caller).
pub const PASSES: usize = 4;

/// Per thread of the target: how much of its waiting I/O ends (0..1), and
/// the thread outside it (or in another of its processes) that ended most
/// of that I/O, as (pid, tid), where one was seen.
#[derive(Default, Debug)]
pub struct Fed {
    pub score: HashMap<u32, f64>,
    pub peer: HashMap<u32, (u32, u32)>,
}

impl Fed {
    pub fn score(&self, tid: u32) -> f64 {
        self.score.get(&tid).copied().unwrap_or(0.0)
    }
}

/// Whether waiting at a site of this class paces its thread: its timers
/// and its parking until start or end do not.
fn paces(class: WaitClass) -> bool {
    !matches!(
        class,
        WaitClass::Timer | WaitClass::StartupTeardown | WaitClass::Spin
    )
}

/// What of the waiting a site's waiters were woken from in the target came
/// through threads that reach a peer (score at least MIN_PEER_REACH), each
/// passing it on (MAX_PASS_ON_RAN_NS); the heaviest of those wakers; and
/// the peer behind them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Relayed {
    pub ns: f64,
    pub via: Vec<u32>,
    pub peer: Option<(u32, u32)>,
}

/// The score from which a thread reads from peers: the first thread of
/// the chain in the target has this share of its waiting ended by other
/// processes or I/O (a client's selector, woken as often by its own
/// threads' sends as by the server's replies: 0.38 in rocketmq-producer).
pub const MIN_PEER_REACH: f64 = 0.25;

/// Wakers named in a site's evidence, at most.
const MAX_VIA: usize = 2;

fn passed_on(w: &WokenSleep) -> bool {
    w.waker != w.woken && w.waker_ran_ns.is_none_or(|r| r <= MAX_PASS_ON_RAN_NS)
}

pub fn relayed(a: &SiteAcc, fed: &Fed) -> Relayed {
    let mut by: BTreeMap<u32, f64> = BTreeMap::new();
    for w in a.woken_sleeps.iter().filter(|w| {
        !a.waiters.contains(&w.waker) && passed_on(w) && fed.score(w.waker) >= MIN_PEER_REACH
    }) {
        *by.entry(w.waker).or_default() += w.ns;
    }
    let mut top: Vec<(u32, f64)> = by.into_iter().collect();
    top.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Relayed {
        ns: top.iter().map(|x| x.1).sum(),
        peer: top.iter().find_map(|(w, _)| fed.peer.get(w).copied()),
        via: top.into_iter().take(MAX_VIA).map(|x| x.0).collect(),
    }
}

pub fn io_fed(sites: &BTreeMap<String, SiteAcc>, classes: &HashMap<String, WaitClass>) -> Fed {
    let mut total: HashMap<u32, f64> = HashMap::default();
    let mut direct: HashMap<u32, f64> = HashMap::default();
    // woken -> waker -> waiting it ended (at sites not classed I/O).
    let mut by_waker: HashMap<u32, BTreeMap<u32, f64>> = HashMap::default();
    // woken -> outside waker (pid, tid) -> waiting it ended (at sites
    // classed I/O).
    let mut outside: HashMap<u32, BTreeMap<(u32, u32), f64>> = HashMap::default();
    for (name, a) in sites {
        let Some(&class) = classes.get(name) else {
            continue;
        };
        if !paces(class) {
            continue;
        }
        let io = class == WaitClass::IoOrPeer;
        for (tid, ns) in &a.by_thread {
            *total.entry(*tid).or_default() += ns;
            if io {
                *direct.entry(*tid).or_default() += ns;
            }
        }
        // Other processes end waits at any site (a selector's epoll that
        // the target's own threads also wake to send).
        for ((pid, waker, woken), ns) in &a.outside_ends {
            *outside
                .entry(*woken)
                .or_default()
                .entry((*pid, *waker))
                .or_default() += ns;
            if !io {
                *direct.entry(*woken).or_default() += ns;
            }
        }
        if !io {
            for w in a.woken_sleeps.iter().filter(|w| passed_on(w)) {
                *by_waker
                    .entry(w.woken)
                    .or_default()
                    .entry(w.waker)
                    .or_default() += w.ns;
            }
        }
    }
    let share = |tid: &u32, ns: f64| {
        let t = total.get(tid).copied().unwrap_or(0.0);
        if t > 0.0 { (ns / t).min(1.0) } else { 0.0 }
    };
    let mut fed = Fed::default();
    for (tid, ns) in &direct {
        fed.score.insert(*tid, share(tid, *ns));
    }
    for (tid, by) in &outside {
        if let Some((peer, _)) = by.iter().max_by(|a, b| a.1.total_cmp(b.1)) {
            fed.peer.insert(*tid, *peer);
        }
    }
    // A thread reaches as far as the most fed of the wakers that pass on a
    // fair share of its waiting: a reply comes through one path, and the
    // wakes that carry the program's own requests out must not dilute it.
    let woken_total = |tid: &u32| -> f64 {
        by_waker.get(tid).map_or(0.0, |b| b.values().sum::<f64>())
            + outside.get(tid).map_or(0.0, |b| b.values().sum::<f64>())
    };
    for _ in 0..PASSES {
        let mut next: HashMap<u32, f64> = HashMap::default();
        let mut next_peer = fed.peer.clone();
        for tid in total.keys() {
            let own = share(tid, direct.get(tid).copied().unwrap_or(0.0));
            let all = woken_total(tid);
            // The most fed waker sets the score; the most fed one behind
            // which a peer was seen names it (another may be fed by the
            // kernel alone).
            let mut best: Option<(u32, f64)> = None;
            let mut named: Option<((u32, u32), f64)> = None;
            for (waker, ended) in by_waker.get(tid).into_iter().flatten() {
                if all <= 0.0 || ended / all < MIN_EDGE_SHARE {
                    continue;
                }
                let s = fed.score(*waker);
                if s > 0.0 && best.is_none_or(|b| b.1 < s) {
                    best = Some((*waker, s));
                }
                if let Some(p) = fed.peer.get(waker)
                    && s > 0.0
                    && named.is_none_or(|n| n.1 < s)
                {
                    named = Some((*p, s));
                }
            }
            let s = best.map_or(own, |b| b.1.max(own));
            next.insert(*tid, s);
            if !outside.contains_key(tid)
                && let Some((peer, _)) = named
            {
                next_peer.insert(*tid, peer);
            }
        }
        fed.score = next;
        fed.peer = next_peer;
    }
    fed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::WaitPrior;

    fn woken(waker: u32, woken: u32, ns: f64) -> WokenSleep {
        WokenSleep {
            sample: 0,
            waker,
            woken,
            ns,
            object: None,
            prior: WaitPrior::Result,
            waker_ran_ns: None,
        }
    }

    /// A client: a network thread (1) in epoll, woken by the server (pid
    /// 98, thread 99); a callback thread (2) woken by it; callers (3, 4)
    /// woken by the callback thread; a worker (5) fed by a thread (6) that
    /// only computes; a thread (7) the network thread wakes now and then
    /// only; one (8) it wakes after long work of its own (a result it
    /// computed, not a reply passed on).
    #[test]
    fn a_reply_is_followed_to_the_peer_through_the_threads_that_pass_it_on() {
        let mut sites = BTreeMap::new();
        let mut classes = HashMap::default();
        let mut add = |name: &str, class, a: SiteAcc| {
            sites.insert(name.to_string(), a);
            classes.insert(name.to_string(), class);
        };
        let mut epoll = SiteAcc::default();
        epoll.by_thread.insert(1, 100.0);
        epoll.outside_ends.insert((98, 99, 1), 80.0);
        add("epoll", WaitClass::IoOrPeer, epoll);
        let mut pool = SiteAcc::default();
        pool.by_thread.insert(2, 100.0);
        pool.woken_sleeps.push(woken(1, 2, 90.0));
        add("pool", WaitClass::WaitingForWork, pool);
        let mut reply = SiteAcc::default();
        reply.by_thread.insert(3, 100.0);
        reply.by_thread.insert(4, 100.0);
        reply.woken_sleeps.push(woken(2, 3, 100.0));
        reply.woken_sleeps.push(woken(2, 4, 50.0));
        add("reply", WaitClass::WaitingForWork, reply);
        let mut work = SiteAcc::default();
        work.by_thread.insert(5, 100.0);
        work.by_thread.insert(7, 100.0);
        work.by_thread.insert(8, 100.0);
        work.woken_sleeps.push(woken(6, 5, 100.0));
        work.woken_sleeps.push(woken(6, 7, 90.0));
        work.woken_sleeps.push(woken(1, 7, 10.0));
        let mut computed = woken(1, 8, 100.0);
        computed.waker_ran_ns = Some(MAX_PASS_ON_RAN_NS * 2);
        work.woken_sleeps.push(computed);
        add("work", WaitClass::WaitingForWork, work);
        // A timer does not pace: thread 1's timed sleeps leave it fed.
        let mut timer = SiteAcc::default();
        timer.by_thread.insert(1, 1000.0);
        add("timer", WaitClass::Timer, timer);

        let fed = io_fed(&sites, &classes);
        for tid in [1, 2, 3, 4] {
            assert_eq!(fed.score(tid), 1.0, "{tid}");
            assert_eq!(fed.peer.get(&tid), Some(&(98, 99)), "{tid}");
        }
        for tid in [5, 6, 7, 8] {
            assert_eq!(fed.score(tid), 0.0, "{tid}");
            assert_eq!(fed.peer.get(&tid), None, "{tid}");
        }

        // The callers' site: all of it passed on from the server, through
        // the callback thread.
        let mut reply = SiteAcc::default();
        reply.waiters.extend([3, 4]);
        reply.woken_sleeps.push(woken(2, 3, 100.0));
        reply.woken_sleeps.push(woken(2, 4, 50.0));
        reply.woken_sleeps.push(woken(6, 4, 50.0));
        let r = relayed(&reply, &fed);
        assert_eq!(r.ns, 150.0);
        assert_eq!(r.via, vec![2]);
        assert_eq!(r.peer, Some((98, 99)));
    }

    /// Each threshold just above and just below: an edge's share of the
    /// woken waiting, the reach a waker needs, what it ran before waking.
    #[test]
    fn the_thresholds_hold_on_either_side() {
        let fed_of = |edge: f64, ran: u64| {
            let mut sites = BTreeMap::new();
            let mut classes = HashMap::default();
            let mut epoll = SiteAcc::default();
            epoll.by_thread.insert(1, 100.0);
            sites.insert("epoll".to_string(), epoll);
            classes.insert("epoll".to_string(), WaitClass::IoOrPeer);
            let mut w = SiteAcc::default();
            w.by_thread.insert(2, 100.0);
            let mut from_io = woken(1, 2, 100.0 * edge);
            from_io.waker_ran_ns = Some(ran);
            w.woken_sleeps.push(from_io);
            w.woken_sleeps.push(woken(3, 2, 100.0 * (1.0 - edge)));
            sites.insert("w".to_string(), w);
            classes.insert("w".to_string(), WaitClass::WaitingForWork);
            io_fed(&sites, &classes).score(2)
        };
        assert_eq!(fed_of(MIN_EDGE_SHARE + 0.01, MAX_PASS_ON_RAN_NS), 1.0);
        assert_eq!(fed_of(MIN_EDGE_SHARE - 0.01, MAX_PASS_ON_RAN_NS), 0.0);
        assert_eq!(fed_of(0.5, MAX_PASS_ON_RAN_NS + 1), 0.0);

        let reach = |score: f64| {
            let mut fed = Fed::default();
            fed.score.insert(2, score);
            let mut a = SiteAcc::default();
            a.waiters.insert(3);
            a.woken_sleeps.push(woken(2, 3, 100.0));
            relayed(&a, &fed).ns
        };
        assert_eq!(reach(MIN_PEER_REACH + 0.01), 100.0);
        assert_eq!(reach(MIN_PEER_REACH - 0.01), 0.0);
    }
}
