//! A site whose waits are a standard runtime's well-known lock, once its
//! frames name it (`runtime_locks::identify`): what the runtime states of
//! the lock says more of its waiters than their timing can. A thread waits
//! for an interpreter's global lock only to run the language's code, and
//! for the JVM's heap lock or a malloc arena's lock only in the middle of
//! an allocation; either way it has work in hand, even when the hand-over
//! signals are blurred (a GVL's timer thread wakes its waiters from another
//! site) or the waiters run little between their waits (a pool's threads
//! that allocate now and then, queued behind a collection).
//!
//! Done while the sites are built, before the contended sites, calls and
//! lock words are taken from their classes, so that the lock table and the
//! syscall figures agree with the site.

use super::classify::{MIN_TIMEOUT_SHARE, THEY_IDLE, work_in_hand};
use crate::analyze::runtime_locks::{self, LockRole, RuntimeLock};
use crate::report::{WaitClass, WaitSite};

/// The runtime lock most of a site's waiting is (its stacks by time), if
/// any: `symbol` is the variable its main lock word lives in, if named.
fn site_runtime_lock(site: &WaitSite, symbol: Option<&str>) -> Option<&'static RuntimeLock> {
    let mut by: Vec<(&'static RuntimeLock, u64)> = vec![];
    let mut total = 0;
    for s in &site.stacks {
        total += s.ns;
        if let Some(r) = runtime_locks::identify(&s.frames, symbol) {
            match by.iter_mut().find(|(l, _)| l.name == r.name) {
                Some((_, ns)) => *ns += s.ns,
                None => by.push((r, s.ns)),
            }
        }
    }
    let (lock, ns) = by
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(a.0.name.cmp(b.0.name)))?;
    (ns * 2 >= total).then_some(lock)
}

/// Names the runtime lock a site's waits are, and classes the site by what
/// the runtime states of it.
pub fn name_and_class(site: &mut WaitSite, symbol: Option<&str>) {
    let lock = site_runtime_lock(site, symbol);
    site.runtime_lock = lock.map(|l| l.name.to_string());
    if let Some(lock) = lock {
        for_runtime_lock(site, lock);
    }
}

/// A site of several waiters classed waiting for work is contention when
/// its runtime lock is one a thread takes only with work in hand: an
/// allocation's lock always; an interpreter's lock when the waiters' own
/// signals agree (a thread's start-up wait at its loop's head, idle
/// between, stays what it was). One waiter queues behind no one.
fn for_runtime_lock(site: &mut WaitSite, lock: &RuntimeLock) {
    if lock.role == LockRole::VmOperation && site.class == WaitClass::IoOrPeer {
        return for_vm_operation(site, lock);
    }
    // An interpreter's lock waited for with a timeout (a GVL's timer
    // waiter's 100 ms, a GIL's switch interval) reads as the kernel ending
    // the waits when the timeouts end most of them: the lock's own timed
    // wait, not I/O (a ruby-gvl CI run on 18392a8 had its timer waits so).
    // A signal that interrupts one (a runtime's timer signal) is no I/O
    // either.
    let own_ends = (site.timed_out + site.interrupted) as f64 / site.waits.max(1) as f64;
    let timed = site.class == WaitClass::IoOrPeer && own_ends >= MIN_TIMEOUT_SHARE;
    if !(site.class == WaitClass::WaitingForWork || timed) || site.waiters < 2 {
        return;
    }
    let why = if !timed && runtime_locks::only_in_allocation(lock) {
        format!(
            "the runtime's frames say this is {}, which a thread takes only in the middle of \
             an allocation: {} threads queue for it with work in hand",
            lock.name, site.waiters
        )
    } else if runtime_locks::only_for_work(lock) && work_in_hand_at(site) {
        let timed_out = if timed {
            format!(
                "{} of the waits here time out (or a signal ends them), the lock's own timed \
                 wait (not I/O), and ",
                super::classify::pct(own_ends)
            )
        } else {
            String::new()
        };
        format!(
            "the runtime's frames say this is {}, which a thread waits for only to run the \
             language's code; {timed_out}{} threads wait here with work in hand",
            lock.name, site.waiters
        )
    } else {
        return;
    };
    site.class = WaitClass::Contention;
    // The lock's frames overrule the conclusion drawn from the timing.
    for e in &mut site.evidence {
        if let Some(figures) = e.strip_suffix(THEY_IDLE) {
            *e = figures.to_string();
        }
    }
    site.evidence.insert(0, why);
}

/// Whether a site's waiters have work in hand (`classify::work_in_hand`).
fn work_in_hand_at(site: &WaitSite) -> bool {
    work_in_hand(
        site.prior,
        site.waiter_between_busy_share,
        site.loop_share,
        site.nested_share,
    )
}

/// A site classed I/O or peer whose runtime lock is the runtime stopping
/// the program's threads for its own operation: its waits end when the
/// waiter's own timed re-checks time out (Go's stop-the-world preempts the
/// running goroutines again every 100 us), which reads as the kernel ending
/// them. It is the runtime's pause, not I/O, and reads as the other waits
/// of a runtime's operations do (the JVM's safepoints, Go's stop-the-world
/// in runs its timeouts do not end): none of the program's work, no lock
/// of its own (caddy's recorded runs had it both ways).
fn for_vm_operation(site: &mut WaitSite, lock: &RuntimeLock) {
    site.class = WaitClass::WaitingForWork;
    site.evidence.insert(
        0,
        format!(
            "the runtime's frames say this is {}: the thread waits for the program's other \
             threads to stop for the runtime's own operation, its timed re-checks (not I/O) \
             ending the waits",
            lock.name
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::waits::{MIN_BUSY_BETWEEN_SHARE, MIN_NESTING_SHARE};
    use crate::report::WaitPrior;
    use crate::runtime::cruby::GVL as RUBY_GVL;
    use crate::runtime::glibc::MALLOC_ARENA;
    use crate::runtime::jvm::{HEAP_LOCK as JVM_HEAP_LOCK, SAFEPOINT as JVM_SAFEPOINT};

    /// ruby-gvl's main GVL site as one suite run saw it: 5 waiters, no turns
    /// seen, busy a third of their time between waits, not at their loop.
    fn gvl_site(between: f64, loop_share: f64, waiters: u32) -> WaitSite {
        let mut s = crate::analyze::build::tests::sample_wait_site();
        s.class = WaitClass::WaitingForWork;
        s.prior = WaitPrior::Condition;
        s.evidence = vec![
            "100% of the woken waiting was ended by threads that do not take turns here".into(),
        ];
        s.waiter_between_busy_share = between;
        s.loop_share = loop_share;
        s.nested_share = 0.0;
        s.waiters = waiters;
        s
    }

    fn class(mut s: WaitSite, lock: &RuntimeLock) -> WaitClass {
        for_runtime_lock(&mut s, lock);
        s.class
    }

    #[test]
    fn an_interpreter_lock_waited_for_with_work_in_hand_is_contention() {
        let above = MIN_BUSY_BETWEEN_SHARE + 0.01;
        let below = MIN_BUSY_BETWEEN_SHARE - 0.01;
        assert_eq!(
            class(gvl_site(above, 0.03, 5), &RUBY_GVL),
            WaitClass::Contention
        );
        let mut s = gvl_site(above, 0.03, 5);
        for_runtime_lock(&mut s, &RUBY_GVL);
        assert!(s.evidence[0].contains("Ruby's GVL"), "{:?}", s.evidence);
        assert_eq!(
            class(gvl_site(below, 0.03, 5), &RUBY_GVL),
            WaitClass::WaitingForWork
        );
        // A thread's start-up wait at its loop's head (suite run 8: loop
        // 100%, 18% busy between) is not work in hand.
        let at_loop = MIN_NESTING_SHARE + 0.01;
        let off_loop = MIN_NESTING_SHARE - 0.01;
        assert_eq!(
            class(gvl_site(above, at_loop, 2), &RUBY_GVL),
            WaitClass::WaitingForWork
        );
        assert_eq!(
            class(gvl_site(above, off_loop, 2), &RUBY_GVL),
            WaitClass::Contention
        );
        // One waiter queues behind no one.
        assert_eq!(
            class(gvl_site(above, 0.0, 1), &RUBY_GVL),
            WaitClass::WaitingForWork
        );
        // Not every runtime lock is taken only with work in hand.
        assert_eq!(
            class(gvl_site(above, 0.0, 5), &JVM_SAFEPOINT),
            WaitClass::WaitingForWork
        );
    }

    /// G1's heap lock as RocketMQ's healthy broker saw it in suite runs on
    /// b94c3bb: 10-25 threads of its pools queued behind a collection for
    /// 162-172 ms, 7-18% busy between, read as idle.
    fn heap_site(waiters: u32) -> WaitSite {
        let mut s = gvl_site(0.07, 0.0, waiters);
        s.prior = WaitPrior::LockAcquire;
        s.evidence = vec![
            format!(
                "the waiters run or wait for a CPU 7% of their time between waits here{THEY_IDLE}"
            ),
            "the waiters run 2% of the run".into(),
        ];
        s
    }

    #[test]
    fn an_allocations_lock_is_taken_with_work_in_hand_however_little_the_waiters_run() {
        let mut s = heap_site(2);
        for_runtime_lock(&mut s, &JVM_HEAP_LOCK);
        assert_eq!(s.class, WaitClass::Contention);
        assert!(
            s.evidence[0].contains("the JVM's heap lock")
                && s.evidence[0].contains("2 threads queue"),
            "{:?}",
            s.evidence
        );
        // The timing's figures stay; its conclusion does not.
        assert!(
            s.evidence[1].ends_with("between waits here"),
            "{:?}",
            s.evidence
        );
        assert_eq!(class(heap_site(5), &MALLOC_ARENA), WaitClass::Contention);
        // One waiter queues behind no one of its kind.
        assert_eq!(
            class(heap_site(1), &JVM_HEAP_LOCK),
            WaitClass::WaitingForWork
        );
        // Other classes are left alone.
        let mut io = heap_site(5);
        io.class = WaitClass::IoOrPeer;
        assert_eq!(class(io, &JVM_HEAP_LOCK), WaitClass::IoOrPeer);
    }

    /// Issue 38: Go's garbage collector waiting for the world to stop
    /// (caddy, recorded: woken by its own 100 us timeouts, read as the
    /// kernel's) is the runtime's pause, read as the JVM's safepoints are.
    #[test]
    fn a_runtime_pause_ended_by_its_own_timeouts_is_no_io() {
        use crate::runtime::go::STOP_THE_WORLD;
        let mut s = gvl_site(0.1, 0.0, 1);
        s.class = WaitClass::IoOrPeer;
        for_runtime_lock(&mut s, &STOP_THE_WORLD);
        assert_eq!(s.class, WaitClass::WaitingForWork);
        assert!(
            s.evidence[0].contains("the Go runtime's stop-the-world"),
            "{:?}",
            s.evidence
        );
        let mut s = gvl_site(0.1, 0.0, 1);
        s.class = WaitClass::IoOrPeer;
        assert_eq!(class(s.clone(), &JVM_SAFEPOINT), WaitClass::WaitingForWork);
        // Not a lock of the runtime's operations: left as it was.
        assert_eq!(class(s, &JVM_HEAP_LOCK), WaitClass::IoOrPeer);
    }

    /// A GVL's timer waits as a CI run on 18392a8 saw them (ruby-gvl): 5
    /// waiters, 97% of the woken waiting ended by the kernel, their own
    /// 100 ms timeouts; read as I/O, the lock's queue lost a thread.
    fn timer_site(waits: u64, timed_out: u64) -> WaitSite {
        let mut s = gvl_site(MIN_BUSY_BETWEEN_SHARE + 0.09, 0.0, 5);
        s.class = WaitClass::IoOrPeer;
        s.waits = waits;
        s.timed_out = timed_out;
        s
    }

    #[test]
    fn an_interpreter_locks_timed_waits_that_time_out_are_its_queue_not_io() {
        let at = (MIN_TIMEOUT_SHARE * 100.0) as u64;
        let mut s = timer_site(100, at + 1);
        for_runtime_lock(&mut s, &RUBY_GVL);
        assert_eq!(s.class, WaitClass::Contention);
        assert!(
            s.evidence[0].contains("the lock's own timed wait"),
            "{:?}",
            s.evidence
        );
        assert_eq!(
            class(timer_site(100, at - 1), &RUBY_GVL),
            WaitClass::IoOrPeer
        );
        // Interrupted by a signal counts as the lock's own too.
        let mut signalled = timer_site(100, at - 1);
        signalled.interrupted = 2;
        assert_eq!(class(signalled, &RUBY_GVL), WaitClass::Contention);
        // Waiters with no work in hand, one waiter, or a lock a thread
        // does not take only to run code: left as the timing says.
        let mut idle = timer_site(100, 97);
        idle.waiter_between_busy_share = MIN_BUSY_BETWEEN_SHARE - 0.01;
        assert_eq!(class(idle, &RUBY_GVL), WaitClass::IoOrPeer);
        let mut one = timer_site(100, 97);
        one.waiters = 1;
        assert_eq!(class(one, &RUBY_GVL), WaitClass::IoOrPeer);
        assert_eq!(
            class(timer_site(100, 97), &JVM_HEAP_LOCK),
            WaitClass::IoOrPeer
        );
    }

    #[test]
    fn other_classes_are_left_alone() {
        let mut s = gvl_site(0.9, 0.0, 5);
        s.class = WaitClass::StartupTeardown;
        assert_eq!(class(s, &RUBY_GVL), WaitClass::StartupTeardown);
    }

    #[test]
    fn a_site_is_a_runtime_lock_when_most_of_its_waiting_is() {
        let heap = |ns: u64| crate::report::TimedStack {
            frames: [
                "___pthread_mutex_lock (pthread_mutex_lock.c:93)",
                "Mutex::lock() (libjvm.so)",
                "G1CollectedHeap::attempt_allocation_slow(unsigned long) (libjvm.so)",
                "java.util.HashMap.resize (jit)",
            ]
            .map(crate::frame::Frame::from)
            .to_vec(),
            ns,
            samples: 1,
            estimated: false,
        };
        let other = |ns: u64| crate::report::TimedStack {
            frames: vec!["___pthread_mutex_lock".into(), "work (w.c:3)".into()],
            ns,
            samples: 1,
            estimated: false,
        };
        let mut s = heap_site(4);
        s.stacks = vec![heap(50), other(50)];
        name_and_class(&mut s, None);
        assert_eq!(s.runtime_lock.as_deref(), Some("the JVM's heap lock"));
        assert_eq!(s.class, WaitClass::Contention);
        let mut s = heap_site(4);
        s.stacks = vec![heap(49), other(51)];
        name_and_class(&mut s, None);
        assert_eq!(s.runtime_lock, None);
        assert_eq!(s.class, WaitClass::WaitingForWork);
    }
}
