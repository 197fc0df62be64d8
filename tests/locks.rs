//! Issue #3: every futex and SysV semaphore wait, named, classified from
//! evidence, with both sides' stacks.

mod common;

use common::*;
use kerntax::report::{LockKind, LockReport, Report};

fn lock<'a>(r: &'a Report, symbol: &str) -> &'a LockReport {
    r.locks
        .iter()
        .find(|l| l.symbol.as_deref() == Some(symbol))
        .unwrap_or_else(|| {
            panic!(
                "no lock {symbol}: {:?}",
                r.locks.iter().map(|l| &l.symbol).collect::<Vec<_>>()
            )
        })
}

#[test]
fn the_hot_mutex_is_first_named_and_its_wait_time_matches_the_programs_own() {
    if !bpf_available() {
        return;
    }
    let p = run_ok("locks", &["hot", "4", "300", "100"]);
    let r = &p.report;
    let first = &r.locks[0];
    assert_eq!(first.symbol.as_deref(), Some("g_hot_lock"), "{:?}", r.locks);
    assert_eq!(first.kind, LockKind::Mutex);
    assert!(first.contention);
    assert_eq!(first.mapping.as_deref(), Some("locks"));
    assert_eq!(first.pids, vec![r.target_pid]);
    assert!(
        first.threads >= 2 && first.threads <= 4,
        "{}",
        first.threads
    );
    assert!(first.waits >= first.blocked && first.blocked > 0);
    assert!(first.wakes > 0 && first.woken > 0);
    assert!(
        first.cpu_ns > 0 && first.cpu_ns < first.wait_ns,
        "on-CPU {} of {} waited",
        first.cpu_ns,
        first.wait_ns
    );
    // The fixture timed its own contended pthread_mutex_lock calls.
    let own_ns = printed(&p, "contended_ns") as f64;
    let blocked = first.blocked_ns as f64;
    assert!(
        (blocked - own_ns).abs() <= own_ns * 0.10,
        "kerntax {blocked} ns vs the program's {own_ns} ns"
    );
    // Both sides' stacks, down to the program's own functions.
    let waiters = &first.waiter_stacks[0].frames;
    assert!(
        has_frame(waiters, "timed_lock") && has_frame(waiters, "hot_worker"),
        "{waiters:?}"
    );
    let wakers = &first.waker_stacks[0].frames;
    assert!(has_frame(wakers, "hot_worker"), "{wakers:?}");
    assert_eq!(
        first.waiter_stacks.iter().map(|s| s.count).sum::<u64>(),
        first.waits
    );
    let stacks_ns: u64 = first.waiter_stacks.iter().map(|s| s.wait_ns).sum();
    assert!(
        stacks_ns.abs_diff(first.wait_ns) <= first.waiter_stacks.len() as u64,
        "{stacks_ns} vs {}",
        first.wait_ns
    );
    assert!(
        p.stderr.contains("LOCKS") && p.stderr.contains("g_hot_lock (mutex, locks)"),
        "{}",
        p.stderr
    );
}

#[test]
fn a_thread_sleeping_in_pthread_cond_wait_is_waiting_for_work_not_contention() {
    if !bpf_available() {
        return;
    }
    let p = run_ok("locks", &["condvar", "1000"]);
    let r = &p.report;
    let cond = r
        .locks
        .iter()
        .find(|l| l.kind == LockKind::Condvar)
        .expect("a condvar");
    assert!(!cond.contention);
    assert!(
        cond.symbol
            .as_deref()
            .is_some_and(|s| s.starts_with("g_cond")),
        "{:?}",
        cond.symbol
    );
    assert_eq!((cond.waits, cond.blocked, cond.threads), (1, 1, 1));
    assert!(cond.wait_ns >= 950_000_000, "{}", cond.wait_ns);
    // Nothing that is contention is ranked below it, and no contention lock
    // carries that second.
    let pos = r.locks.iter().position(|l| std::ptr::eq(l, cond)).unwrap();
    assert!(r.locks[..pos].iter().all(|l| l.contention));
    assert!(r.locks[pos..].iter().all(|l| !l.contention));
    assert!(
        r.locks
            .iter()
            .filter(|l| l.contention)
            .all(|l| l.wait_ns < 100_000_000)
    );
    assert!(p.stderr.contains("WAITING FOR WORK"), "{}", p.stderr);
}

#[test]
fn sysv_semaphore_waits_go_to_their_semid_across_processes() {
    if !bpf_available() {
        return;
    }
    let p = run_ok("locks", &["sysv", "300"]);
    let semid = printed(&p, "semid") as u32;
    let r = &p.report;
    let sem = r
        .locks
        .iter()
        .find(|l| l.semid == Some(semid))
        .expect("the semaphore");
    assert_eq!(sem.kind, LockKind::SysvSem);
    assert_eq!(sem.semnum, Some(1));
    // Two processes, 300 semop(-1) and 300 semop(+1) each: exact.
    assert_eq!((sem.waits, sem.wakes), (600, 600));
    assert_eq!(sem.pids.len(), 2);
    assert_eq!(sem.threads, 2);
    assert!(sem.blocked > 0);
    assert!(has_frame(&sem.waiter_stacks[0].frames, "sysv_take"));
    // glibc implements semop() with the semtimedop system call.
    assert_eq!(syscall(r, "semtimedop").calls, 1200);
}

#[test]
fn a_shared_futex_between_two_processes_is_one_lock() {
    if !bpf_available() {
        return;
    }
    // Each process first blocks once while the other holds the mutex (a
    // full run of the suite once saw only one of them ever wait).
    let p = run_ok("locks", &["shared", "300"]);
    let shared: Vec<&LockReport> = p
        .report
        .locks
        .iter()
        .filter(|l| l.mapping.as_deref() == Some("[shared anon]"))
        .collect();
    assert_eq!(shared.len(), 1, "{:?}", p.report.locks);
    let l = shared[0];
    assert_eq!(l.kind, LockKind::Mutex);
    assert_eq!(l.pids.len(), 2);
    assert!(l.waits > 0 && l.threads == 2, "{l:?}");
    assert!(
        l.waiter_stacks
            .iter()
            .any(|s| has_frame(&s.frames, "shared_take")),
        "{l:?}"
    );
}

#[test]
fn rwlocks_semaphores_and_pi_mutexes_are_told_apart() {
    if !bpf_available() {
        return;
    }
    let rw = run_ok("locks", &["rwlock", "3", "3000"]);
    let l = rw
        .report
        .locks
        .iter()
        .find(|l| {
            l.symbol
                .as_deref()
                .is_some_and(|s| s.starts_with("g_rwlock"))
        })
        .expect("g_rwlock");
    assert_eq!(l.kind, LockKind::Rwlock);
    let sem = run_ok("locks", &["sem", "3", "300"]);
    assert_eq!(lock(&sem.report, "g_sem").kind, LockKind::Semaphore);
    let pi = run_ok("locks", &["pi", "3", "300"]);
    let l = lock(&pi.report, "g_pi_lock");
    assert_eq!(l.kind, LockKind::PiMutex);
    assert!(l.waits > 0);
}
