//! A site's class from its signals, in the order the tests run: the first
//! that holds wins, and the evidence that decided it is kept in words.
//!
//! Contention needs two things: the waiters have work in hand (they run,
//! or want to, between their waits here, their waits for work elsewhere
//! left out), and they queue for something one of them holds (turns, not
//! relays; futile waits; timed waits retried). Without them the site is
//! what ended its sleeps: producers of the target (waiting for work),
//! other processes and the kernel (I/O or peer), exits (start-up or
//! teardown).

use super::acc::SiteAcc;
use super::prior::WaitPrior;
use super::signals::{Busy, Handovers, Nesting};
use crate::report::WaitClass;

/// Waits that returned at once, as a share of all waits here, above which
/// the site is a contended lock word.
pub const MIN_FUTILE_SHARE: f64 = 0.2;
/// ... and their rate, so a few races make no contention.
pub const MIN_FUTILE_PER_S: f64 = 100.0;
/// Share of the woken waiting (relays left out) ended by the waiters
/// handing over what they held: taking turns.
pub const MIN_TURNS_SHARE: f64 = 0.5;
/// Share of sleeps that time out, above which waits that retry are polls
/// for something (a lock handed over with a timed wait, as a GIL does).
pub const MIN_TIMEOUT_SHARE: f64 = 0.5;
/// ... provided this share of the waits is ended by a wake: a holder that
/// hands the lock over ends some of them (a GIL's drop request is answered
/// by a signal). Waits that all time out, woken by no one, poll for
/// something no one holds (an idle service's timed poll of its queue).
pub const MIN_RETRY_WOKEN_SHARE: f64 = 0.05;
/// The waiters' CPU time over the run, under which they idle (said in the
/// evidence of a site with no other sign).
pub const MIN_BUSY_SHARE: f64 = 0.05;
/// The waiters' time running or runnable over their time between waits at
/// a site (their waits for work elsewhere left out), above which they have
/// work in hand when they come to wait (the followers of an idle leader
/// spend that time in its wait for I/O).
pub const MIN_BUSY_BETWEEN_SHARE: f64 = 0.25;
/// Share of the woken waiting one kind of waker ended (exits, other
/// processes and the kernel, producers in the target) that decides the
/// class when no sign of contention does.
pub const MIN_RELEASE_SHARE: f64 = 0.5;
/// Share of a site's waiting at its threads' shallowest wait (their loop)
/// or nested deeper, from which that says whether they have work in hand:
/// a loop's condition or queue wait is between units of work whatever the
/// threads do between; a nested wait is inside one.
pub const MIN_NESTING_SHARE: f64 = 0.5;
/// Sleeps per waiter at or under which a site only parks threads once
/// (start-up, teardown, a join).
pub const MAX_PARKED_WAITS: f64 = 2.0;
/// ... provided they sleep there at least this share of the run.
pub const MIN_PARKED_SHARE: f64 = 0.2;

/// How the evidence of a site classed waiting for work for want of work in
/// hand ends (a runtime's lock its frames name may overrule it).
pub const THEY_IDLE: &str = ": they idle";

pub(super) fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// Whether a site's waiters have work in hand when they come to wait:
/// where the wait sits in their loops says it when it can (a nested wait is
/// inside a unit of work; a loop's own wait is between units, except a lock
/// acquisition, which holds nothing back: it is taken to work); else what
/// they do between their waits here (`between_share`, their waits for work
/// elsewhere left out).
pub fn work_in_hand(
    prior: WaitPrior,
    between_share: f64,
    loop_share: f64,
    nested_share: f64,
) -> bool {
    let (looped, nested) = placement(prior, loop_share, nested_share);
    nested || (!looped && between_share >= MIN_BUSY_BETWEEN_SHARE)
}

/// Whether most of a site's waiting is its waiters' loop's own wait (a lock
/// acquisition never is), and whether it is nested deeper, inside a unit of
/// work.
fn placement(prior: WaitPrior, loop_share: f64, nested_share: f64) -> (bool, bool) {
    (
        loop_share >= MIN_NESTING_SHARE && prior != WaitPrior::LockAcquire,
        nested_share >= MIN_NESTING_SHARE,
    )
}

/// The class of a site and the evidence that decided it.
/// The woken waiting of a site that its wakers in the target passed on
/// from I/O (`fed::relayed`), ns, and those wakers and the peer in words.
#[derive(Clone, Debug, Default)]
pub struct FromPeer {
    pub ns: f64,
    pub who: String,
}

/// What the runtime that parks its idle threads at a site says of it: the
/// first runtime whose idle parking is on the site's heaviest stack.
fn idle_evidence(a: &SiteAcc) -> String {
    let heaviest = a.stacks.iter().max_by(|x, y| x.1.0.total_cmp(&y.1.0));
    heaviest
        .into_iter()
        .flat_map(|(frames, _)| frames)
        .find_map(|f| crate::runtime::idle_park(f.function()))
        .map_or("the runtime parks its idle threads here".into(), |r| {
            r.waits.idle_evidence.into()
        })
}

pub fn classify(
    a: &SiteAcc,
    b: Busy,
    h: &Handovers,
    n: Nesting,
    peer: &FromPeer,
    wall: f64,
) -> (WaitClass, Vec<String>) {
    let waits = a.count.max(1.0);
    let waiters = a.waiters.len().max(1) as f64;
    let per_waiter = a.count / waiters;
    let prior = a.prior();
    let turns = h.turns_share(a.woken_ns);
    let relays = h.relay_share(a.woken_ns);
    // Work in hand: where the wait sits in the threads' loops says it when
    // it can (a lock acquisition holds nothing back: it is taken to work);
    // else what they do between their waits here.
    let (looped, nested) = placement(prior, n.loop_share, n.nested_share);
    let work = work_in_hand(prior, b.between_share, n.loop_share, n.nested_share);
    let work_ev = if nested {
        format!(
            "{} of the waiting is nested in the waiters' work, deeper than their loop's own wait: they have work in hand",
            pct(n.nested_share)
        )
    } else if looped {
        format!(
            "{} of the waiting is their loop's own wait, between units of work (they also wait deeper, within one)",
            pct(n.loop_share)
        )
    } else {
        format!(
            "the waiters run or wait for a CPU {} of their time between waits here (their waits for work elsewhere left out)",
            pct(b.between_share)
        )
    };
    let busy_ev = format!("the waiters run {} of the run", pct(b.run_share));
    if prior == WaitPrior::Sleep && a.futile == 0.0 {
        return (
            WaitClass::Timer,
            vec!["the threads sleep here on purpose (nanosleep, pause)".into()],
        );
    }
    if prior == WaitPrior::RuntimeIdle {
        return (WaitClass::WaitingForWork, vec![idle_evidence(a)]);
    }
    if prior == WaitPrior::Yield {
        return (
            WaitClass::Spin,
            vec![
                "the threads give the CPU up in sched_yield and take it straight back: a busy-wait"
                    .into(),
            ],
        );
    }
    let futile_share = a.futile / (a.futile + a.count).max(1.0);
    let futile_rate = a.futile * 1e9 / wall;
    if futile_share >= MIN_FUTILE_SHARE && futile_rate >= MIN_FUTILE_PER_S {
        return (
            WaitClass::Contention,
            vec![format!(
                "{} of the waits returned at once ({:.0}/s): the lock word changed under them, \
                 so several threads were taking it",
                pct(futile_share),
                futile_rate
            )],
        );
    }
    let relay_ev = (relays > 0.0).then(|| {
        format!(
            "{} of the woken waiting was passed on by waiters just woken themselves (a signal relayed, nothing held)",
            pct(relays)
        )
    });
    if turns >= MIN_TURNS_SHARE && work && a.waiters.len() >= 2 {
        let mut ev = vec![
            format!(
                "{} of the woken waiting was ended by threads that wait here too, handing over what they held: they take turns",
                pct(turns)
            ),
            work_ev,
        ];
        if prior == WaitPrior::LockAcquire {
            ev.push("the runtime's frames say they take a lock here".into());
        }
        ev.extend(relay_ev);
        return (WaitClass::Contention, ev);
    }
    let timeout_share = a.timed_out / waits;
    // An I/O multiplexer's timeout is its loop's timer (an event loop's
    // epoll_pwait until its next timer is due), never a lock handed over.
    if timeout_share >= MIN_TIMEOUT_SHARE
        && prior != WaitPrior::Io
        && a.woken / waits >= MIN_RETRY_WOKEN_SHARE
        && work
        && per_waiter > MAX_PARKED_WAITS
        && a.waiters.len() >= 2
    {
        return (
            WaitClass::Contention,
            vec![
                format!(
                    "{} of the waits time out and the threads wait again ({:.0} waits each)",
                    pct(timeout_share),
                    per_waiter
                ),
                work_ev,
            ],
        );
    }
    if per_waiter <= MAX_PARKED_WAITS && a.ns / (wall * waiters) >= MIN_PARKED_SHARE {
        return (
            WaitClass::StartupTeardown,
            vec![format!(
                "each thread waited here {:.1} times, {} of the run: parked until the start or the end",
                per_waiter,
                pct(a.ns / (wall * waiters))
            )],
        );
    }
    // Who ended the rest: other processes and the kernel are I/O and peers;
    // threads of the target that did not take turns here hand out work.
    let mut by_exit = 0.0;
    let mut outside = 0.0;
    let mut in_target = 0.0;
    for (mechanism, r) in &a.releases {
        if mechanism == "exit" {
            // A thread's exit ends a join; a child process's, a parent's wait.
            by_exit += r.ns - r.other_process_ns;
            outside += r.other_process_ns;
        } else if !r.in_target {
            outside += r.ns;
        } else {
            in_target += r.ns;
        }
    }
    let woken = a.woken_ns - h.relay_ns;
    let producer = (in_target - h.relay_ns - turns * woken).max(0.0);
    let relayed = peer.ns.min(producer);
    let share = |ns: f64| if woken > 0.0 { ns / woken } else { 0.0 };
    if share(by_exit) >= MIN_RELEASE_SHARE {
        return (
            WaitClass::StartupTeardown,
            vec!["most waits here ended when a thread exited (joins)".into()],
        );
    }
    if share(outside) >= MIN_RELEASE_SHARE {
        return (
            WaitClass::IoOrPeer,
            vec![format!(
                "{} of the woken waiting was ended by other processes or the kernel (I/O, clients, children, timers)",
                pct(share(outside))
            )],
        );
    }
    // A result waited for (a future, a latch, permits: the runtime's
    // frames say so), ended by threads that pass on what they read from
    // outside: an RPC's reply, however many hops in the target. Not where
    // the wait sits in the threads' loops: an interpreter's frames make a
    // service's wait for work look nested (RocketMQ's broker, recorded).
    if prior == WaitPrior::Result && share(outside + relayed) >= MIN_RELEASE_SHARE {
        return (
            WaitClass::IoOrPeer,
            vec![format!(
                "{} of the woken waiting was ended by threads of the target passing on what \
                 other processes or the kernel sent ({}): a peer's reply, not a lock",
                pct(share(outside + relayed)),
                peer.who
            )],
        );
    }
    if share(producer) >= MIN_RELEASE_SHARE {
        let mut ev = vec![
            format!(
                "{} of the woken waiting was ended by threads that do not take turns here: they hand out work",
                pct(share(producer))
            ),
            busy_ev,
        ];
        ev.extend(relay_ev);
        return (WaitClass::WaitingForWork, ev);
    }
    let io_syscall = prior == WaitPrior::Io;
    if io_syscall && a.woken_ns == 0.0 {
        return (
            WaitClass::IoOrPeer,
            vec!["the waits are in I/O calls and nothing in the target ended them".into()],
        );
    }
    if !work {
        return (
            WaitClass::WaitingForWork,
            vec![format!("{work_ev}{THEY_IDLE}"), busy_ev],
        );
    }
    let mut ev = vec![
        "no sign of contention: no futile waits, no turns taken, no timed-out retries".into(),
        work_ev,
    ];
    ev.extend(relay_ev);
    (WaitClass::WaitingForWork, ev)
}
