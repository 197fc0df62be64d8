use super::acc::{Outcome, outcome};
use super::signals::MAX_LOOP_FROM_ENTRY;
use super::*;
use crate::frame::{Frame, short_function};
use crate::model::OffReason;

fn frames(v: &[&str]) -> Vec<crate::frame::Frame> {
    v.iter().map(|s| crate::frame::Frame::new(*s)).collect()
}

#[test]
fn the_site_is_past_the_runtime_and_the_programs_own_wrappers() {
    let f = frames(&[
        "__futex_abstimed_wait_common (futex-internal.c:57)",
        "__new_sem_wait_slow64 (sem_waitcommon.c:183)",
        "PGSemaphoreLock (pg_sema.c:327)",
        "LWLockAcquire (lwlock.c:1315)",
        "XLogInsertRecord (xlog.c:900)",
        "main (main.c:1)",
    ]);
    assert_eq!(
        site_of(&f, 2, WAIT_WORDS),
        (
            "XLogInsertRecord".to_string(),
            vec!["PGSemaphoreLock".to_string(), "LWLockAcquire".to_string()]
        )
    );
    let cxx = frames(&[
        "__lll_lock_wait (lowlevellock.c:49)",
        "rocksdb::port::Mutex::Lock() (port_posix.cc:80)",
        "rocksdb::LRUCacheShard::Lookup(rocksdb::Slice const&, unsigned int) (lru_cache.cc:400)",
    ]);
    let (site, via) = site_of(&cxx, 1, WAIT_WORDS);
    assert_eq!(short_function(&site), "rocksdb::LRUCacheShard::Lookup");
    assert_eq!(via, ["rocksdb::port::Mutex::Lock()"]);
    // No own frame: the outermost runtime frame names it.
    assert_eq!(
        site_of(
            &frames(&["a (libc.so.6)", "start_thread (libc.so.6)"]),
            2,
            WAIT_WORDS
        )
        .0,
        "start_thread"
    );
    // Only wrappers: the outermost is the site.
    assert_eq!(
        site_of(
            &frames(&["x (libc.so.6)", "my_lock (a.c:1)", "my_wait (a.c:2)"]),
            1,
            WAIT_WORDS
        ),
        ("my_wait".to_string(), vec!["my_lock".to_string()])
    );
}

/// Issue 38: Go's own system calls are named by the runtime's function
/// that made them (its network poller), or by the syscall package's call
/// the program made, not by the assembly stub under them (caddy-serve).
#[test]
fn a_go_wait_is_named_past_the_runtimes_system_call_stubs_issue_38() {
    let netpoll = frames(&[
        "runtime.epollwait (sys_linux_amd64.s:706)",
        "runtime.netpoll (netpoll_epoll.go:126)",
        "runtime.findRunnable (proc.go:2837)",
        "runtime.schedule (proc.go:3214)",
    ]);
    let (site, via) = site_of(&netpoll, 0, WAIT_WORDS);
    assert_eq!(
        (site.as_str(), via),
        ("runtime.netpoll", vec!["runtime.epollwait".to_string()])
    );
    let sendfile = frames(&[
        "runtime/internal/syscall.Syscall6 (asm_linux_amd64.s:36)",
        "syscall.RawSyscall6 (syscall_linux.go:38)",
        "syscall.Syscall6 (syscall_linux.go:91)",
        "syscall.sendfile (zsyscall_linux_amd64.go:1291)",
        "internal/poll.SendFile (sendfile_linux.go:31)",
    ]);
    assert_eq!(site_of(&sendfile, 0, WAIT_WORDS).0, "syscall.sendfile");
    // Its mutex's spinning yields stay a site of their own.
    let spin = frames(&[
        "runtime.osyield (sys_linux_amd64.s:658)",
        "runtime.lock2 (lock_futex.go:98)",
    ]);
    assert_eq!(site_of(&spin, 0, WAIT_WORDS).0, "runtime.osyield");
}

/// CI of stop 16 and after: an idle pool's site moved with what C2
/// inlined (LinkedBlockingQueue.take, ForkJoinPool.managedBlock).
#[test]
fn an_idle_pools_site_does_not_move_with_the_platforms_blocking_helpers() {
    let whole = [
        "___pthread_cond_wait (pthread_cond_wait.c:618)",
        "Unsafe_Park (libjvm.so)",
        "jdk.internal.misc.Unsafe.park (jit)",
        "java.util.concurrent.locks.LockSupport.park (jit)",
        "java.util.concurrent.locks.AbstractQueuedSynchronizer$ConditionNode.block (jit)",
        "java.util.concurrent.ForkJoinPool.managedBlock (jit)",
        "java.util.concurrent.locks.AbstractQueuedSynchronizer$ConditionObject.await (jit)",
        "java.util.concurrent.LinkedBlockingQueue.take (jit)",
        "java.util.concurrent.ThreadPoolExecutor.getTask (jit)",
        "java.util.concurrent.ThreadPoolExecutor.runWorker (jit)",
        "java.lang.Thread.run (jit)",
        "JavaCalls::call_helper(JavaValue*, methodHandle const&, JavaCallArguments*, JavaThread*) (libjvm.so)",
        "thread_native_entry(Thread*) (libjvm.so)",
        "start_thread (pthread_create.c:442)",
    ];
    let inlined: Vec<&str> = whole
        .iter()
        .copied()
        .filter(|f| !f.contains("managedBlock") && !f.contains("ConditionNode"))
        .collect();
    for stack in [&whole[..], &inlined[..]] {
        let (site, via) = site_of(&frames(stack), 1, WAIT_WORDS);
        assert_eq!(
            site, "java.util.concurrent.LinkedBlockingQueue.take",
            "{via:?}"
        );
    }
}

/// Issue 12: a Java lock manager's layers are all lock wrappers; the
/// outermost program method looked at names the site (an overload calling
/// itself is not its own wrapper), not the platform's Object.wait.
#[test]
fn a_program_whose_methods_are_all_wrappers_is_named_by_the_outermost() {
    let f = frames(&[
        "___pthread_cond_timedwait64 (pthread_cond_wait.c:643)",
        "ObjectMonitor::wait(long, bool, JavaThread*) (libjvm.so)",
        "JVM_MonitorWait (libjvm.so)",
        "java.lang.Object.wait (jit)",
        "org.db.locks.ActiveLock.waitForGrant (jit)",
        "org.db.locks.LockSet.lockObject (jit)",
        "org.db.heap.Heap.lockRow (jit)",
        "org.db.heap.Heap.lockRow (jit)",
        "org.db.locks.RowLocking.lockScanRow (jit)",
        "org.db.locks.RowLocking.lockScanRow2 (jit)",
        "org.db.locks.RowLocking.lockScanRow3 (jit)",
        "org.db.scan.Scan.fetchRows (jit)",
    ]);
    let (site, via) = site_of(&f, 1, WAIT_WORDS);
    assert_eq!(site, "org.db.locks.RowLocking.lockScanRow2");
    assert_eq!(via.last().unwrap(), "org.db.locks.RowLocking.lockScanRow");
    assert!(
        via.contains(&"java.lang.Object.wait".to_string()),
        "{via:?}"
    );
    // Four layers: the caller past them is the site.
    let short: Vec<crate::frame::Frame> = f[..6].iter().chain(&f[11..]).cloned().collect();
    assert_eq!(
        site_of(&short, 1, WAIT_WORDS).0,
        "org.db.scan.Scan.fetchRows"
    );
    // A frame repeated at the end of the wrappers met.
    let twice: Vec<crate::frame::Frame> = f[..8].to_vec();
    let (site, via) = site_of(&twice, 1, WAIT_WORDS);
    assert_eq!(site, "org.db.heap.Heap.lockRow");
    assert_eq!(via.last().unwrap(), "org.db.locks.LockSet.lockObject");
}

#[test]
fn outcomes_follow_each_syscalls_convention() {
    assert_eq!(outcome("futex", -libc::ETIMEDOUT), Outcome::TimedOut);
    assert_eq!(outcome("futex", 0), Outcome::Woken);
    assert_eq!(outcome("epoll_wait", 0), Outcome::TimedOut);
    assert_eq!(outcome("epoll_wait", 1), Outcome::Woken);
    assert_eq!(outcome("rt_sigtimedwait", -libc::EAGAIN), Outcome::TimedOut);
    assert_eq!(outcome("read", -libc::EINTR), Outcome::Interrupted);
    assert_eq!(outcome("nanosleep", 0), Outcome::TimedOut);
}

const WALL: u64 = 1_000_000_000;

fn thread(tid: u32, cpu_ns: u64) -> ThreadUsage {
    ThreadUsage {
        tid,
        pid: 1,
        ppid: 0,
        comm: format!("t{tid}"),
        user_ns: cpu_ns,
        sys_ns: 0,
        voluntary_switches: 0,
        involuntary_switches: 0,
        yields: 0,
        syscalls: 0,
        exited: false,
        exit_code: 0,
    }
}

fn futex() -> u32 {
    crate::names::syscall_nr("futex").unwrap()
}

fn waker(tid: u32, tracked: bool) -> Option<Waker> {
    Some(Waker {
        pid: 1,
        tid,
        nr: Some(futex()),
        tracked,
        kernel: false,
        ran_log2: 0,
    })
}

/// A sleep of `tid` at `site`, `count` sleeps of `ns`, ended as `ret` by `by`.
fn sleep(tid: u32, site: &str, ns: u64, count: u64, ret: i32, by: Option<Waker>) -> SleepSample {
    SleepSample {
        key: SleepKey {
            pid: 1,
            tid,
            nr: futex(),
            lock: Some(LockKey::Private {
                pid: 1,
                addr: 0x100 + u64::from(tid),
            }),
            ret,
            waker: by,
        },
        // Called by the work a thread does, not its loop itself.
        frames: frames(&[
            "__futex_abstimed_wait_common (libc.so.6)",
            &format!("{site} (a.c:1)"),
            "handle_request (a.c:10)",
            "dispatch (a.c:12)",
            "serve (a.c:15)",
            "worker (a.c:20)",
            "start_thread (pthread_create.c:442)",
            "clone3 (clone3.S:81)",
        ]),
        runtime: 1,
        truncated: false,
        tally: SleepTally {
            ns,
            count,
            samples: count,
            spans: {
                let mut s = crate::spans::SpanCells::default();
                s.add(1_000_000_000, ns);
                s
            },
        },
    }
}

/// `s`, slept on `key` instead of its own word.
fn on_lock(mut s: SleepSample, key: LockKey) -> SleepSample {
    s.key.lock = Some(key);
    s
}

fn build_sites(
    sleeps: &[SleepSample],
    threads: &[ThreadUsage],
    futile: &[LockWaitSample],
) -> Waits {
    build_with_offcpu(sleeps, threads, futile, &[])
}

fn build_with_offcpu(
    sleeps: &[SleepSample],
    threads: &[ThreadUsage],
    futile: &[LockWaitSample],
    offcpu: &[OffCpuCounters],
) -> Waits {
    let futile_exact: HashMap<LockKey, u64> = futile.iter().map(|l| (l.key, l.futile)).collect();
    build(&Inputs {
        sleeps,
        lock_waits: futile,
        wakes: &[],
        offcpu,
        futile: &futile_exact,
        threads,
        comms: &HashMap::default(),
        lock_names: &HashMap::default(),
        duration_ns: WALL,
    })
}

#[test]
fn threads_that_wake_each_other_at_one_site_are_contention_whatever_the_words() {
    // Four busy threads, each on its own futex word (a per-thread parker),
    // woken by each other: one site, contention.
    let sleeps: Vec<SleepSample> = (1..=4)
        .map(|t| sleep(t, "take_gil", 200_000_000, 1000, 0, waker(t % 4 + 1, true)))
        .collect();
    let threads: Vec<ThreadUsage> = (1..=4).map(|t| thread(t, 250_000_000)).collect();
    let w = build_sites(&sleeps, &threads, &[]);
    assert_eq!(w.sites.len(), 1);
    let s = &w.sites[0];
    assert_eq!(
        (s.function.as_str(), s.class),
        ("take_gil", WaitClass::Contention)
    );
    assert_eq!((s.waiters, s.lock_words, s.waits), (4, 4, 4000));
    assert!((s.turns_share - 1.0).abs() < 1e-9 && (s.waiting_threads - 0.8).abs() < 1e-9);
    assert!(s.evidence[0].contains("take turns"), "{:?}", s.evidence);
    let of_thread_1: u64 = w
        .contended_calls
        .iter()
        .filter(|((tid, _), _)| *tid == 1)
        .map(|(_, ns)| ns)
        .sum();
    assert_eq!(of_thread_1, 200_000_000);
    assert!(w.lock_class.values().all(|c| *c == WaitClass::Contention));
    assert!(s.releases[0].from_waiters, "{:?}", s.releases);
    // One stray wake-up from a thread that never waits here (CI: a JVM
    // thread starting up) leaves the hand-overs the waiters'.
    let mut stray = sleeps.clone();
    stray.push(sleep(1, "take_gil", 100_000, 1, 0, waker(9, true)));
    let s = &build_sites(&stray, &threads, &[]).sites[0];
    assert_eq!(s.releases[0].wakers, 5);
    assert!(s.releases[0].from_waiters, "{:?}", s.releases);
    // The same, idle between waits (asleep in epoll_wait the rest of the
    // run, where no sample caught them): not contention.
    let idle: Vec<ThreadUsage> = (1..=4).map(|t| thread(t, 1_000_000)).collect();
    let epoll = crate::names::syscall_nr("epoll_wait").unwrap();
    let asleep: Vec<OffCpuCounters> = (1..=4)
        .flat_map(|t| {
            [
                off(
                    t,
                    OffReason::Syscall {
                        nr: futex(),
                        lock: None,
                    },
                    200_000_000,
                ),
                off(
                    t,
                    OffReason::Syscall {
                        nr: epoll,
                        lock: None,
                    },
                    700_000_000,
                ),
            ]
        })
        .collect();
    assert_ne!(
        build_with_offcpu(&sleeps, &idle, &[], &asleep).sites[0].class,
        WaitClass::Contention
    );
}

fn off(tid: u32, reason: OffReason, ns: u64) -> OffCpuCounters {
    OffCpuCounters {
        pid: 1,
        tid,
        reason,
        uninterruptible: false,
        ns,
        count: 100,
    }
}

/// Issue 12 (Derby's row lock): the holder waits for its client inside
/// the transaction, so the waiters run 4% of the run, yet between their
/// waits they run or want to: contention. The followers of an idle pool's
/// leader, woken the same way by one another, spend the time between in
/// the leader's wait for work: not contention.
#[test]
fn turns_taken_with_work_in_hand_are_contention_however_little_the_waiters_run() {
    let read = crate::names::syscall_nr("read").unwrap();
    let epoll = crate::names::syscall_nr("epoll_wait").unwrap();
    let sleeps: Vec<SleepSample> = (1..=4)
        .map(|t| sleep(t, "lock_row", 600_000_000, 1000, 0, waker(t % 4 + 1, true)))
        .collect();
    let threads: Vec<ThreadUsage> = (1..=4).map(|t| thread(t, 40_000_000)).collect();
    let syscall = |nr| OffReason::Syscall { nr, lock: None };
    let held: Vec<OffCpuCounters> = (1..=4)
        .flat_map(|t| {
            [
                off(t, syscall(futex()), 600_000_000),
                off(t, OffReason::RunQueue, 30_000_000),
                off(t, syscall(read), 100_000_000),
            ]
        })
        .collect();
    let w = build_with_offcpu(&sleeps, &threads, &[], &held);
    let s = &w.sites[0];
    assert_eq!(s.class, WaitClass::Contention, "{:?}", s.evidence);
    assert!((s.waiter_cpu_share - 0.04).abs() < 1e-9, "{s:?}");
    // Between waits here: 40 ms running and 30 ms runnable of 170 ms.
    assert!(
        (s.waiter_between_busy_share - 70.0 / 170.0).abs() < 1e-6,
        "{s:?}"
    );
    assert!(
        s.evidence[1].contains("41% of their time between waits"),
        "{:?}",
        s.evidence
    );
    let followers: Vec<OffCpuCounters> = (1..=4)
        .flat_map(|t| {
            [
                off(t, syscall(futex()), 600_000_000),
                off(t, syscall(epoll), 350_000_000),
            ]
        })
        .collect();
    let idle: Vec<ThreadUsage> = (1..=4).map(|t| thread(t, 10_000_000)).collect();
    let w = build_with_offcpu(&sleeps, &idle, &[], &followers);
    assert_ne!(w.sites[0].class, WaitClass::Contention, "{:?}", w.sites[0]);
}

#[test]
fn an_idle_pool_woken_by_a_producer_waits_for_work() {
    let mut sleeps: Vec<SleepSample> = (2..=5)
        .map(|t| sleep(t, "worker_loop", 900_000_000, 100, 0, waker(1, true)))
        .collect();
    sleeps.push(sleep(1, "main_loop", 10_000_000, 10, 0, waker(9, false)));
    let threads: Vec<ThreadUsage> = (1..=5).map(|t| thread(t, 50_000_000)).collect();
    let w = build_sites(&sleeps, &threads, &[]);
    let pool = w
        .sites
        .iter()
        .find(|s| s.function == "worker_loop")
        .unwrap();
    assert_eq!(pool.class, WaitClass::WaitingForWork, "{:?}", pool.evidence);
    assert!(pool.releases[0].in_target && !pool.releases[0].from_waiters);
    let main = w.sites.iter().find(|s| s.function == "main_loop").unwrap();
    assert_eq!(main.class, WaitClass::IoOrPeer, "{:?}", main.evidence);
    assert!(w.contended_calls.is_empty());
}

/// Timed waits retried by busy threads are a queue for something held
/// (a GIL's holder answers a drop request with a signal): contention when
/// MIN_RETRY_WOKEN_SHARE of the waits end in a wake; waits that all time
/// out poll for what no one holds (issue 19: RocketMQ's idle timer-store
/// pollers, 2,414 timeouts of 2,414 waits).
#[test]
fn timed_waits_retried_by_busy_threads_are_contention_and_parked_ones_are_not() {
    let etimedout = -libc::ETIMEDOUT;
    let run = |woken: u64| {
        let mut sleeps: Vec<SleepSample> = vec![];
        for t in 1..=3 {
            sleeps.push(sleep(
                t,
                "acquire_global",
                300_000_000,
                60,
                etimedout,
                waker(0, false),
            ));
            if woken > 0 {
                sleeps.push(sleep(
                    t,
                    "acquire_global",
                    1_000_000,
                    woken,
                    0,
                    waker(9, true),
                ));
            }
        }
        let threads: Vec<ThreadUsage> = (1..=3).map(|t| thread(t, 300_000_000)).collect();
        build_sites(&sleeps, &threads, &[]).sites[0].clone()
    };
    // 4 of 64 waits woken: 6.3%; 3 of 63: 4.8%.
    const { assert!(4.0 / 64.0 >= MIN_RETRY_WOKEN_SHARE && 3.0 / 63.0 < MIN_RETRY_WOKEN_SHARE) };
    let s = run(4);
    assert_eq!(s.class, WaitClass::Contention, "{:?}", s.evidence);
    assert_eq!(s.timed_out, 180);
    for woken in [3, 0] {
        let s = run(woken);
        assert_ne!(s.class, WaitClass::Contention, "{woken}: {:?}", s.evidence);
    }
    // Threads parked once for most of the run.
    let threads: Vec<ThreadUsage> = (1..=3).map(|t| thread(t, 300_000_000)).collect();
    let parked: Vec<SleepSample> = (1..=3)
        .map(|t| sleep(t, "wait_for_start", 800_000_000, 1, 0, waker(9, true)))
        .collect();
    let s = &build_sites(&parked, &threads, &[]).sites[0];
    assert_eq!(s.class, WaitClass::StartupTeardown, "{:?}", s.evidence);
}

#[test]
fn futile_waits_make_a_short_hold_lock_contention_without_much_sleep() {
    let key = LockKey::Private {
        pid: 1,
        addr: 0x5000,
    };
    let futile = [LockWaitSample {
        key,
        frames: frames(&["__lll_lock_wait (libc.so.6)", "Cache::lookup(int) (c.cc:3)"]).into(),
        runtime: 1,
        futile: 40_000,
    }];
    let mut s = sleep(
        1,
        "Cache::lookup(int)",
        1_000_000,
        10_000,
        0,
        waker(0, false),
    );
    s.frames = futile[0].frames.to_vec();
    let threads: Vec<ThreadUsage> = (1..=2).map(|t| thread(t, 500_000_000)).collect();
    let w = build_sites(&[s], &threads, &futile);
    let site = &w.sites[0];
    assert_eq!((site.class, site.futile), (WaitClass::Contention, 40_000));
    assert_eq!(display(site), "Cache::lookup");
    assert!(
        site.evidence[0].contains("returned at once"),
        "{:?}",
        site.evidence
    );
}

/// Issue #10: a pipeline's stages that wait in one function for different
/// conditions (pigz's wait_for: workers for jobs, the reader for free
/// buffers) and wake each other do not take turns: not contention.
#[test]
fn stages_waking_each_other_on_different_conditions_are_not_turns() {
    let on = |s: SleepSample, addr: u64| on_lock(s, LockKey::Private { pid: 1, addr });
    let mut sleeps: Vec<SleepSample> = (2..=3)
        .map(|t| {
            on(
                sleep(t, "wait_for", 400_000_000, 100, 0, waker(1, true)),
                0x1028,
            )
        })
        .collect();
    sleeps.push(on(
        sleep(1, "wait_for", 300_000_000, 100, 0, waker(2, true)),
        0x2028,
    ));
    let threads: Vec<ThreadUsage> = (1..=3).map(|t| thread(t, 400_000_000)).collect();
    let s = &build_sites(&sleeps, &threads, &[]).sites[0];
    assert_eq!(s.turns_share, 0.0);
    assert_eq!(s.class, WaitClass::WaitingForWork, "{:?}", s.evidence);
    // The same threads on one lock do take turns.
    let same: Vec<SleepSample> = sleeps.into_iter().map(|s| on(s, 0x1028)).collect();
    let s = &build_sites(&same, &threads, &[]).sites[0];
    assert_eq!(s.class, WaitClass::Contention, "{:?}", s.evidence);
}

/// Waiters parked each on an object of its own and woken by several of
/// the others take turns, even if they also block a little on one word
/// they share (CI: a JVM's workers at a safepoint, attached).
#[test]
fn waiters_on_parkers_of_their_own_woken_by_the_others_take_turns() {
    let parker = |t: u32| LockKey::Private {
        pid: 1,
        addr: 0x10_000 * u64::from(t),
    };
    let mut sleeps: Vec<SleepSample> = vec![];
    for t in 1..=4u32 {
        for by in (1..=4).filter(|&b| b != t) {
            sleeps.push(on_lock(
                sleep(t, "worker", 100_000_000, 1000, 0, waker(by, true)),
                parker(t),
            ));
        }
    }
    let threads: Vec<ThreadUsage> = (1..=4).map(|t| thread(t, 400_000_000)).collect();
    let s = &build_sites(&sleeps, &threads, &[]).sites[0];
    assert_eq!(s.class, WaitClass::Contention, "{:?}", s.evidence);
    assert!((s.turns_share - 1.0).abs() < 1e-9);
    // A shared word holding 5% of the time leaves it so; one holding
    // half of it makes the objects no longer the waiters' own.
    let shared = LockKey::Private {
        pid: 1,
        addr: 0x99_000,
    };
    let with = |ns: u64| {
        let mut v = sleeps.clone();
        for t in 1..=4 {
            v.push(on_lock(sleep(t, "worker", ns, 10, 0, None), shared));
        }
        build_sites(&v, &threads, &[]).sites[0].turns_share
    };
    assert!(with(15_789_474) > 0.9);
    assert_eq!(with(300_000_000), 0.0);
}

/// Issue #10: a lock waited on at a contended site and elsewhere (a GIL's
/// mutex, re-taken inside the condvar wait and taken around it) is
/// contention once contended sites hold a fair share of its waiting.
#[test]
fn a_lock_is_contention_when_contended_sites_hold_a_share_of_its_waiting() {
    let key = LockKey::Private {
        pid: 1,
        addr: 0x500,
    };
    let on_key = |s: SleepSample| on_lock(s, key);
    let threads: Vec<ThreadUsage> = (1..=4).map(|t| thread(t, 250_000_000)).collect();
    let with = |contended_ns: u64| {
        let mut sleeps: Vec<SleepSample> = (1..=4)
            .map(|t| {
                on_key(sleep(
                    t,
                    "take",
                    contended_ns,
                    100,
                    0,
                    waker(t % 4 + 1, true),
                ))
            })
            .collect();
        // The same lock, where a producer hands out work to idle waiters.
        sleeps
            .extend((5..=6).map(|t| on_key(sleep(t, "idle", 100_000_000, 100, 0, waker(9, true)))));
        build_sites(&sleeps, &threads, &[]).lock_class[&key]
    };
    // 4 x 20 ms of 240 ms: 33% at the contended site.
    assert_eq!(with(20_000_000), WaitClass::Contention);
    // 4 x 10 ms of 220 ms: 18%.
    assert_ne!(with(10_000_000), WaitClass::Contention);
}

/// CI (tests/html.rs): in a short run, one of four threads on a mutex
/// never had to sleep on it, and its unlocks ended half the others'
/// waiting. A thread that wakes a mutex's sleepers is releasing it: it
/// takes turns, it does not hand out work. The same wakes on a condition
/// variable are a producer's.
#[test]
fn a_mutex_holder_that_never_slept_on_it_takes_turns() {
    let mutex = LockKey::Private {
        pid: 1,
        addr: 0x5000,
    };
    let in_lock = |mut s: SleepSample, wait: &str| {
        s.frames = frames(&[wait, "hot_worker (a.c:1)"]);
        on_lock(s, mutex)
    };
    let build = |wait: &str| {
        let mut sleeps: Vec<SleepSample> = vec![];
        for t in 2..=4u32 {
            let other = if t == 4 { 2 } else { t + 1 };
            sleeps.push(in_lock(
                sleep(t, "hot_worker", 60_000_000, 300, 0, waker(1, true)),
                wait,
            ));
            sleeps.push(in_lock(
                sleep(t, "hot_worker", 40_000_000, 200, 0, waker(other, true)),
                wait,
            ));
        }
        let threads: Vec<ThreadUsage> = (1..=4).map(|t| thread(t, 400_000_000)).collect();
        build_sites(&sleeps, &threads, &[]).sites[0].clone()
    };
    let s = build("__lll_lock_wait (lowlevellock.c:49)");
    assert!((s.turns_share - 1.0).abs() < 1e-9, "{s:?}");
    assert_eq!(s.class, WaitClass::Contention, "{:?}", s.evidence);
    let s = build("___pthread_cond_wait (pthread_cond_wait.c:618)");
    assert!((s.turns_share - 0.4).abs() < 1e-9, "{s:?}");
    assert_eq!(s.class, WaitClass::WaitingForWork, "{:?}", s.evidence);
}

/// CI (tests/java.rs): an idle thread's Object.wait and a worker's lock,
/// both in interpreted code before the JIT compiled it, were one site
/// named "Interpreter", which the workers made contention and the idle
/// threads' 15 s made the first finding. The platform method the
/// interpreter called tells them apart.
#[test]
fn interpreted_waits_are_told_apart_by_the_method_the_interpreter_called() {
    let tail = [
        "Interpreter (jit)",
        "Interpreter (jit)",
        "JavaCalls::call_helper(JavaValue*, methodHandle const&, JavaCallArguments*, JavaThread*) (libjvm.so)",
        "thread_native_entry(Thread*) (libjvm.so)",
        "start_thread (pthread_create.c:442)",
    ];
    let idle: Vec<&str> = [
        "___pthread_cond_wait (pthread_cond_wait.c:618)",
        "os::PlatformEvent::park() (libjvm.so)",
        "ObjectMonitor::wait(long, bool, JavaThread*) (libjvm.so)",
        "JVM_MonitorWait (libjvm.so)",
        "java.lang.Object.wait (jit)",
    ]
    .into_iter()
    .chain(tail)
    .collect();
    let lock: Vec<&str> = [
        "___pthread_cond_wait (pthread_cond_wait.c:618)",
        "Parker::park(bool, long) (libjvm.so)",
        "Unsafe_Park (libjvm.so)",
        "jdk.internal.misc.Unsafe.park (jit)",
        "java.util.concurrent.locks.LockSupport.park (jit)",
        "java.util.concurrent.locks.AbstractQueuedSynchronizer.acquire (jit)",
    ]
    .into_iter()
    .chain(tail)
    .collect();
    let (a, _) = site_of(&frames(&idle), 1, WAIT_WORDS);
    let (b, via) = site_of(&frames(&lock), 1, WAIT_WORDS);
    assert_eq!(a, "Interpreter calling java.lang.Object.wait");
    assert_eq!(
        b,
        "Interpreter calling java.util.concurrent.locks.AbstractQueuedSynchronizer.acquire"
    );
    assert_eq!(via[0], "Parker::park(bool, long)");
}

/// Issue 19: a queue's consumers that wake the next one right after their
/// own wake-up, from the queue's own code, relay a signal and take no
/// turns; the same wake-ups from a holder that ran its critical section
/// first (longer than RELAY_MAX_RAN_NS) are turns.
#[test]
fn waiters_waking_the_next_right_after_their_own_wake_up_relay_and_take_no_turns() {
    let cond_frames = |site: &str| {
        frames(&[
            "__futex_abstimed_wait_common (libc.so.6)",
            "___pthread_cond_wait (libc.so.6)",
            &format!("{site} (a.c:1)"),
            "handle_request (a.c:5)",
            "dispatch (a.c:7)",
            "worker (a.c:9)",
            "start_thread (pthread_create.c:442)",
        ])
    };
    let run = |ran_log2: u8| {
        let mut sleeps = vec![];
        let mut wakes = vec![];
        for t in 1..=4u32 {
            for by in [t % 4 + 1, (t + 1) % 4 + 1] {
                let mut w = waker(by, true);
                if let Some(w) = w.as_mut() {
                    w.ran_log2 = ran_log2;
                }
                let mut s = sleep(t, "queue_pop", 100_000_000, 500, 0, w);
                s.frames = cond_frames("queue_pop");
                s.runtime = 2;
                sleeps.push(s);
                wakes.push(WakeSample {
                    waker_tid: by,
                    woken_tid: t,
                    waker_ran_log2: ran_log2,
                    frames: frames(&[
                        "futex_wake (libc.so.6)",
                        "___pthread_cond_signal (libc.so.6)",
                        "queue_pop (a.c:5)",
                        "handle_request (a.c:5)",
                        "dispatch (a.c:7)",
                        "worker (a.c:9)",
                        "start_thread (pthread_create.c:442)",
                    ]),
                    runtime: 2,
                    weight: 500,
                });
            }
        }
        let threads: Vec<ThreadUsage> = (1..=4).map(|t| thread(t, 300_000_000)).collect();
        build(&Inputs {
            sleeps: &sleeps,
            lock_waits: &[],
            wakes: &wakes,
            offcpu: &[],
            futile: &HashMap::default(),
            threads: &threads,
            comms: &HashMap::default(),
            lock_names: &HashMap::default(),
            duration_ns: WALL,
        })
    };
    // 2^14 ns: at most RELAY_MAX_RAN_NS since the waker's own wake-up.
    assert_eq!(1u64 << 14, RELAY_MAX_RAN_NS);
    let relayed = run(14);
    let s = &relayed.sites[0];
    assert!((s.relay_share - 1.0).abs() < 1e-9, "{s:?}");
    assert_ne!(s.class, WaitClass::Contention, "{:?}", s.evidence);
    let held = run(15);
    let s = &held.sites[0];
    assert_eq!(s.relay_share, 0.0, "{s:?}");
    assert_eq!(s.class, WaitClass::Contention, "{:?}", s.evidence);
}

/// Issue 19: a JIT that inlines a method into its caller names its waits
/// by the caller: one wait under two names, merged when the caller calls
/// the method on over MIN_CALLER_SHARE of the method's own waiting.
#[test]
fn a_methods_waits_under_the_caller_it_was_inlined_into_are_one_site() {
    let at = |tid: u32, chain: &[&str], ns: u64| {
        let mut f = vec![
            "__futex_abstimed_wait_common (libc.so.6)",
            "Parker::park(bool, long) (libjvm.so)",
            "jdk.internal.misc.Unsafe.park (jit)",
            "java.util.concurrent.locks.AbstractQueuedSynchronizer.acquire (jit)",
        ];
        f.extend_from_slice(chain);
        let mut s = sleep(tid, "x", ns, 100, 0, waker(tid % 4 + 1, true));
        s.frames = frames(&f);
        s.runtime = 1;
        s
    };
    let run = |share_via_lambda: f64| {
        let mut sleeps = vec![];
        for t in 1..=4 {
            let via = (1_000_000_000.0 * share_via_lambda) as u64;
            sleeps.push(at(t, &["Srv.handle (jit)", "Srv$$Lambda.run (jit)"], via));
            sleeps.push(at(
                t,
                &["Srv.handle (jit)", "Srv.other (jit)"],
                1_000_000_000 - via,
            ));
            // The same waits once C2 inlined handle into the lambda.
            sleeps.push(at(
                t,
                &["Srv$$Lambda.run (jit)", "Interpreter (jit)"],
                500_000_000,
            ));
        }
        let threads: Vec<ThreadUsage> = (1..=4).map(|t| thread(t, 300_000_000)).collect();
        build_sites(&sleeps, &threads, &[])
    };
    let merged = run(0.6);
    let names: Vec<&str> = merged.sites.iter().map(|s| s.function.as_str()).collect();
    assert_eq!(names, ["Srv.handle"], "{names:?}");
    assert_eq!(merged.sites[0].wait_ns, 4 * 1_500_000_000);
    assert!(merged.contended_sites.contains("Srv$$Lambda.run"));
    let apart = run(0.4);
    assert_eq!(apart.sites.len(), 2, "{:?}", apart.sites);
}

/// Issue 19: where a wait sits in its thread's loop. A pool's fetch for
/// its next task, called by the thread's entry (MAX_LOOP_FROM_ENTRY
/// frames at most), is between units of work however its threads wake
/// each other (MariaDB's tpool); deeper, it is inside the work. A site
/// counts as the loop when MIN_NESTING_SHARE of its waiting is there.
#[test]
fn a_pools_fetch_at_its_loop_is_between_units_of_work_and_deeper_it_is_not() {
    let at = |tid: u32, callers: &[&str], ns: u64| {
        let mut f = vec![
            "__futex_abstimed_wait_common (libc.so.6)".into(),
            "___pthread_cond_wait (libc.so.6)".into(),
            "fetch (a.c:1)".into(),
        ];
        f.extend(callers.iter().map(|c| format!("{c} (a.c:9)").into()));
        f.push("start_thread (pthread_create.c:442)".into());
        let mut s = on_lock(
            sleep(tid, "fetch", ns, 200, 0, waker(tid % 4 + 1, true)),
            LockKey::Private {
                pid: 1,
                addr: 0x1028,
            },
        );
        s.frames = f;
        s.runtime = 2;
        s
    };
    let run = |loop_ns: u64, deep_ns: u64, entry_calls: usize| {
        let mut callers = vec!["step"; entry_calls.saturating_sub(1)];
        callers.push("worker");
        let mut sleeps = vec![];
        for t in 1..=4 {
            if loop_ns > 0 {
                sleeps.push(at(t, &callers, loop_ns));
            }
            if deep_ns > 0 {
                sleeps.push(at(t, &["a", "b", "c", "worker"], deep_ns));
            }
        }
        let threads: Vec<ThreadUsage> = (1..=4).map(|t| thread(t, 300_000_000)).collect();
        build_sites(&sleeps, &threads, &[]).sites[0].clone()
    };
    // fetch <- worker (the entry): 1 frame; <- step <- worker: 2.
    for calls in [1, MAX_LOOP_FROM_ENTRY] {
        let s = run(600_000_000, 0, calls);
        assert_eq!(s.loop_share, 1.0, "{s:?}");
        assert_ne!(s.class, WaitClass::Contention, "{:?}", s.evidence);
    }
    let s = run(600_000_000, 0, MAX_LOOP_FROM_ENTRY + 1);
    assert_eq!(s.class, WaitClass::Contention, "{:?}", s.evidence);
    // Over MIN_NESTING_SHARE of the waiting at the loop, and under it.
    let s = run(510_000_000, 490_000_000, 1);
    assert!(s.loop_share > MIN_NESTING_SHARE, "{s:?}");
    assert_ne!(s.class, WaitClass::Contention, "{:?}", s.evidence);
    let s = run(490_000_000, 510_000_000, 1);
    assert!(s.loop_share < MIN_NESTING_SHARE, "{s:?}");
    assert_eq!(s.class, WaitClass::Contention, "{:?}", s.evidence);
}

/// Issue 19: a connection thread's row-lock wait, deeper than its wait for
/// the next request, is nested in its work: it has work in hand however
/// little it runs between (its time between waits there is spent reading
/// requests).
#[test]
fn a_wait_nested_deeper_than_the_threads_loop_has_work_in_hand() {
    let read = crate::names::syscall_nr("read").unwrap();
    let with = |tid: u32, nr: u32, chain: &[&str], ns: u64, by: Option<Waker>| {
        let mut s = sleep(tid, "x", ns, 500, 0, by);
        s.key.nr = nr;
        if nr == read {
            s.key.lock = None;
        }
        s.frames = chain
            .iter()
            .map(|c| format!("{c} (a.c:1)").into())
            .collect();
        s.frames
            .insert(0, "__futex_abstimed_wait_common (libc.so.6)".into());
        s
    };
    let mut sleeps = vec![];
    for t in 1..=4u32 {
        sleeps.push(with(
            t,
            futex(),
            &[
                "take_row",
                "update_row",
                "execute",
                "do_command",
                "conn_main",
            ],
            300_000_000,
            waker(t % 4 + 1, true),
        ));
        let mut client = waker(99, false);
        if let Some(c) = client.as_mut() {
            c.pid = 2;
        }
        sleeps.push(with(
            t,
            read,
            &["net_read", "do_command", "conn_main"],
            600_000_000,
            client,
        ));
    }
    let threads: Vec<ThreadUsage> = (1..=4).map(|t| thread(t, 20_000_000)).collect();
    let w = build_sites(&sleeps, &threads, &[]);
    let lock = w.sites.iter().find(|s| s.function == "take_row").unwrap();
    assert_eq!(lock.nested_share, 1.0, "{lock:?}");
    assert_eq!(lock.class, WaitClass::Contention, "{:?}", lock.evidence);
    let net = w.sites.iter().find(|s| s.function == "net_read").unwrap();
    assert_eq!(net.loop_share, 1.0, "{net:?}");
}

/// CI (tests/java.rs): a worker stopped at a safepoint inside its
/// synchronized method was a wait of that method, so the dispatcher's and
/// the Service Thread's unsampled safepoint waits on the same barrier word
/// made them waiters of the workers' monitor (6 waiters, not 4).
#[test]
fn a_thread_stopped_at_a_safepoint_waits_for_the_vm_not_in_its_method_issue_19() {
    let f: Vec<Frame> = [
        "syscall (syscall.S:38)",
        "LinuxWaitBarrier::wait(int) (libjvm.so)",
        "SafepointSynchronize::block(JavaThread*) (libjvm.so)",
        "SafepointMechanism::process(JavaThread*, bool) (libjvm.so)",
        "ThreadSafepointState::handle_polling_page_exception() (libjvm.so)",
        "SafepointBlob (jit)",
        "JavaLocks.synchronizedWorker (jit)",
        "Interpreter (jit)",
        "thread_entry(JavaThread*, JavaThread*) (libjvm.so)",
        "start_thread (pthread_create.c:442)",
    ]
    .iter()
    .map(|s| Frame::from(*s))
    .collect();
    let (site, via) = site_of(&f, 1, WAIT_WORDS);
    assert_eq!(site, "SafepointSynchronize::block(JavaThread*)");
    assert_eq!(via, ["LinuxWaitBarrier::wait(int)"]);
    // The monitor's own wait in the same method stays the method's.
    let mut monitor = f.clone();
    monitor.splice(
        1..5,
        [
            "os::PlatformEvent::park() (libjvm.so)",
            "ObjectMonitor::EnterI(JavaThread*) (libjvm.so)",
        ]
        .map(Frame::from),
    );
    monitor.remove(2 + 1);
    assert_eq!(
        site_of(&monitor, 1, WAIT_WORDS).0,
        "JavaLocks.synchronizedWorker"
    );
}

/// Suite run 8: Java threads queued on G1's heap lock in an allocation's
/// slow path were a dozen contended sites named by the methods that
/// allocated (HashMap.resize under MessageDecoder...), one of 159 ms; they
/// wait for the VM, at the VM function that takes its lock.
#[test]
fn a_java_thread_on_one_of_hotspots_locks_waits_at_the_vm_function_issue_19() {
    let f: Vec<crate::frame::Frame> = [
        "futex_wait (futex-internal.h:146) [inlined]",
        "__GI___lll_lock_wait (lowlevellock.c:49)",
        "___pthread_mutex_lock (pthread_mutex_lock.c:93)",
        "Mutex::lock_contended(Thread*) (libjvm.so)",
        "Mutex::lock() (libjvm.so)",
        "G1CollectedHeap::attempt_allocation_slow(unsigned long) (libjvm.so)",
        "MemAllocator::allocate() const (libjvm.so)",
        "Runtime1::new_object_array(JavaThread*, Klass*, int) (libjvm.so)",
        "java.util.HashMap.resize (jit)",
        "org.apache.rocketmq.common.message.MessageDecoder.string2messageProperties (jit)",
    ]
    .iter()
    .map(|s| Frame::from(*s))
    .collect();
    let (site, via) = site_of(&f, 3, WAIT_WORDS);
    assert_eq!(
        site,
        "G1CollectedHeap::attempt_allocation_slow(unsigned long)"
    );
    assert_eq!(via, ["Mutex::lock_contended(Thread*)", "Mutex::lock()"]);
}

/// Suite runs on b94c3bb: RocketMQ threads whose allocation asked G1 for a
/// collection waited for the VM thread to run it, a site "at" whichever
/// method allocated (CommitLog.checkMessageAndReturnSize, 126 ms, waiting
/// for work); they wait at the VM function that hands the operation over.
#[test]
fn a_java_thread_waiting_for_a_vm_operation_waits_at_the_vm_function() {
    let f = frames(&[
        "__futex_abstimed_wait_common (futex-internal.c:87)",
        "___pthread_cond_wait (pthread_cond_wait.c:618)",
        "os::PlatformMonitor::wait(long) (libjvm.so)",
        "Monitor::wait(long) (libjvm.so)",
        "VMThread::wait_until_executed(VM_Operation*) (libjvm.so)",
        "VMThread::execute(VM_Operation*) (libjvm.so)",
        "G1CollectedHeap::attempt_allocation_slow(unsigned long) (libjvm.so)",
        "MemAllocator::allocate() const (libjvm.so)",
        "new_type_array Runtime1 stub (jit)",
        "org.apache.rocketmq.store.CommitLog.checkMessageAndReturnSize (jit)",
    ]);
    let (site, via) = site_of(&f, 2, WAIT_WORDS);
    assert_eq!(site, "VMThread::execute(VM_Operation*)");
    assert_eq!(
        via,
        [
            "os::PlatformMonitor::wait(long)",
            "Monitor::wait(long)",
            "VMThread::wait_until_executed(VM_Operation*)"
        ]
    );
}

/// A thread never sampled on a word joins the sites where that word is
/// what the site waits on (MIN_UNSAMPLED_WORD_SHARE of its time), not a
/// site that met it briefly (issue 19: RocketMQ's housekeeping threads,
/// never sampled on the JVM's heap lock, counted as waiters of the commit
/// log's lock site where one send thread once waited on the heap lock).
#[test]
fn a_thread_never_sampled_on_a_word_waits_where_the_word_is_the_sites_own_issue_19() {
    let heap = LockKey::Private {
        pid: 1,
        addr: 0x9000,
    };
    let on = |s: SleepSample, k: LockKey| on_lock(s, k);
    let run = |heap_ns: u64| {
        let mut sleeps = vec![];
        for t in 1..=4 {
            // Each worker parks on its own word at the lock...
            sleeps.push(sleep(
                t,
                "put",
                1_000_000_000 - heap_ns,
                100,
                0,
                waker(t % 4 + 1, true),
            ));
            // ... and meets the heap lock there now and then.
            sleeps.push(on(
                sleep(t, "put", heap_ns, 10, 0, waker(t % 4 + 1, true)),
                heap,
            ));
        }
        let threads: Vec<ThreadUsage> = (1..=5).map(|t| thread(t, 300_000_000)).collect();
        // Thread 5 slept on the heap lock, never sampled.
        let offcpu = [off(
            5,
            OffReason::Syscall {
                nr: futex(),
                lock: Some(heap),
            },
            50_000_000,
        )];
        build_with_offcpu(&sleeps, &threads, &[], &offcpu).sites[0].clone()
    };
    // The heap lock is 49% of the site's time, then 51%.
    let s = run(490_000_000);
    assert!(!s.waiter_tids.contains(&5), "{s:?}");
    assert_eq!(s.waiters, 4);
    let s = run(510_000_000);
    assert!(s.waiter_tids.contains(&5), "{s:?}");
    const { assert!(0.49 < MIN_UNSAMPLED_WORD_SHARE && 0.51 >= MIN_UNSAMPLED_WORD_SHARE) };
}

/// Issue 19: two sites with no lock word in common wait for different
/// things, whichever calls which.
#[test]
fn sites_with_no_word_in_common_are_not_merged_as_inlined_forms_issue_19() {
    let at = |tid: u32, chain: &[&str], word: u64| {
        let mut f = vec![
            "__futex_abstimed_wait_common (libc.so.6)",
            "Parker::park(bool, long) (libjvm.so)",
            "jdk.internal.misc.Unsafe.park (jit)",
            "java.util.concurrent.locks.AbstractQueuedSynchronizer.acquire (jit)",
        ];
        f.extend_from_slice(chain);
        let mut s = on_lock(
            sleep(tid, "x", 1_000_000_000, 100, 0, waker(tid % 4 + 1, true)),
            LockKey::Private { pid: 1, addr: word },
        );
        s.frames = frames(&f);
        s.runtime = 1;
        s
    };
    let mut sleeps = vec![];
    for t in 1..=4 {
        sleeps.push(at(
            t,
            &["Srv.handle (jit)", "Srv$$Lambda.run (jit)"],
            0x100 + u64::from(t),
        ));
        sleeps.push(at(
            t,
            &["Srv$$Lambda.run (jit)", "Interpreter (jit)"],
            0x900,
        ));
    }
    let threads: Vec<ThreadUsage> = (1..=4).map(|t| thread(t, 300_000_000)).collect();
    let w = build_sites(&sleeps, &threads, &[]);
    assert_eq!(w.sites.len(), 2, "{:?}", w.sites);
}

/// Issue 19 (ruby-gvl, one suite run of five): waiters on words of their
/// own hand over in no fixed order when each is woken by
/// MIN_WAKERS_PER_WAITER of the others, on average weighted by their woken
/// waiting: the main thread's one wait at start, woken by one thread, does
/// not make the GVL's four threads look like a fixed chain.
#[test]
fn a_thread_that_waited_once_does_not_hide_the_others_turns_issue_19() {
    // Each thread on a condvar of its own.
    let own = |s: SleepSample, t: u32| {
        on_lock(
            s,
            LockKey::Private {
                pid: 1,
                addr: 0x1000 * u64::from(t),
            },
        )
    };
    // Threads 1 and 2 woken by 3 others, 3 and 4 by 2: 2.5 on average.
    let mut sleeps = vec![];
    for t in 1..=4u32 {
        let by: Vec<u32> = (1..=4)
            .filter(|b| *b != t)
            .take(if t <= 2 { 3 } else { 2 })
            .collect();
        let ns = 600_000_000 / by.len() as u64;
        for b in by {
            sleeps.push(own(sleep(t, "wait_turn", ns, 500, 0, waker(b, true)), t));
        }
    }
    // Three threads that waited there once each, woken by thread 1.
    for t in 5..=7 {
        sleeps.push(own(
            sleep(t, "wait_turn", 1_000_000, 1, 0, waker(1, true)),
            t,
        ));
    }
    let threads: Vec<ThreadUsage> = (1..=7).map(|t| thread(t, 250_000_000)).collect();
    let s = &build_sites(&sleeps, &threads, &[]).sites[0];
    assert_eq!(s.waiters, 7);
    // Unweighted: (3 + 3 + 2 + 2 + 1 + 1 + 1) / 7 = 1.86 wakers per waiter.
    const { assert!(13.0 / 7.0 < MIN_WAKERS_PER_WAITER) };
    assert!(s.turns_share > 0.9, "{s:?}");
    assert_eq!(s.class, WaitClass::Contention, "{:?}", s.evidence);
    // The GVL's one mutex, re-taken by every condvar wait, a fifth of the
    // site's time (over 1 - MIN_PER_WAITER_SHARE): its waker held it, and
    // the per-thread condvars still say who hands over to whom.
    let mut with_mutex = sleeps.clone();
    for t in 1..=4u32 {
        let mut m = on_lock(
            sleep(t, "wait_turn", 150_000_000, 50, 0, waker(t % 4 + 1, true)),
            LockKey::Private {
                pid: 1,
                addr: 0x9_0000,
            },
        );
        m.frames.splice(
            0..1,
            [
                "__GI___lll_lock_wait (lowlevellock.c:49)".into(),
                "___pthread_mutex_lock (pthread_mutex_lock.c:93)".into(),
            ],
        );
        m.runtime = 2;
        with_mutex.push(m);
    }
    let s = &build_sites(&with_mutex, &threads, &[]).sites[0];
    assert_eq!(s.class, WaitClass::Contention, "{:?}", s.evidence);
    assert!(s.turns_share > 0.9, "{s:?}");
}

/// Suite runs on b94c3bb: RocketMQ's pool threads queued on G1's heap lock
/// behind a collection (woken by the VM thread, little run between) read
/// as idle. The heap lock's frames make them contention, and that class is
/// the one the lock word and the contended calls get (a runtime lock's
/// class was once settled after them, so a GVL's site could be contention
/// while its lock word was not).
#[test]
fn an_allocations_lock_is_contention_in_the_site_its_word_and_its_calls() {
    let heap = LockKey::Private {
        pid: 1,
        addr: 0x9000,
    };
    let sleeps: Vec<SleepSample> = (1..=4)
        .map(|t| {
            let mut s = on_lock(sleep(t, "x", 40_000_000, 4, 0, waker(9, true)), heap);
            s.frames = frames(&[
                "__GI___lll_lock_wait (lowlevellock.c:49)",
                "___pthread_mutex_lock (pthread_mutex_lock.c:93)",
                "Mutex::lock_contended(Thread*) (libjvm.so)",
                "Mutex::lock() (libjvm.so)",
                "G1CollectedHeap::attempt_allocation_slow(unsigned long) (libjvm.so)",
                "MemAllocator::allocate() const (libjvm.so)",
                "java.util.HashMap.resize (jit)",
                "org.app.Pool.run (jit)",
            ]);
            s.runtime = 2;
            s
        })
        .collect();
    let mut threads: Vec<ThreadUsage> = (1..=4).map(|t| thread(t, 10_000_000)).collect();
    threads.push(thread(9, 300_000_000));
    let w = build_sites(&sleeps, &threads, &[]);
    let s = &w.sites[0];
    assert_eq!(
        s.function,
        "G1CollectedHeap::attempt_allocation_slow(unsigned long)"
    );
    assert_eq!(s.runtime_lock.as_deref(), Some("the JVM's heap lock"));
    assert_eq!(s.class, WaitClass::Contention, "{:?}", s.evidence);
    assert_eq!(w.lock_class.get(&heap), Some(&WaitClass::Contention));
    assert!(w.contended_sites.contains(&s.function));
    let futex_calls: u64 = w
        .contended_calls
        .iter()
        .filter(|((_, nr), _)| *nr == futex())
        .map(|(_, ns)| ns)
        .sum();
    assert_eq!(futex_calls, 160_000_000);
}

/// Issue 37: callers waiting for a result (a latch the runtime's frames
/// name), completed by a thread of their own that passes on what another
/// process sent, wait for a peer: I/O or peer, the peer named, not a lock
/// and not a producer's work. Completed by a thread fed by nothing outside,
/// they wait for its work.
#[test]
fn a_result_passed_on_from_another_process_is_a_peers_reply() {
    let run = |fed_from_outside: bool| {
        let mut sleeps: Vec<SleepSample> = (2..=5)
            .map(|t| {
                let mut s = sleep(t, "Client.call", 900_000_000, 100, 0, waker(1, true));
                s.frames.insert(
                    1,
                    "java.util.concurrent.CountDownLatch.await (x.java:1)".into(),
                );
                s
            })
            .collect();
        let source = if fed_from_outside {
            waker(9, false).map(|w| Waker { pid: 9, ..w })
        } else {
            waker(6, true)
        };
        sleeps.push(sleep(1, "read_replies", 500_000_000, 400, 0, source));
        let threads: Vec<ThreadUsage> = (1..=6).map(|t| thread(t, 50_000_000)).collect();
        let mut comms: HashMap<u32, String> = HashMap::default();
        comms.insert(1, "reader".into());
        comms.insert(9, "server".into());
        let futile = HashMap::default();
        let w = build(&Inputs {
            sleeps: &sleeps,
            lock_waits: &[],
            wakes: &[],
            offcpu: &[],
            futile: &futile,
            threads: &threads,
            comms: &comms,
            lock_names: &HashMap::default(),
            duration_ns: WALL,
        });
        let site = w
            .sites
            .iter()
            .find(|s| s.waiters == 4)
            .cloned()
            .expect("the callers' site");
        assert_eq!(
            site.prior,
            crate::report::WaitPrior::Result,
            "{}",
            site.function
        );
        site
    };
    let peer = run(true);
    assert_eq!(peer.class, WaitClass::IoOrPeer, "{:?}", peer.evidence);
    let said = peer.evidence.join(" ");
    assert!(said.contains("a peer's reply, not a lock"), "{said}");
    assert!(
        said.contains("(reader; behind them server (pid 9), its thread server)"),
        "{said}"
    );
    let local = run(false);
    assert_eq!(
        local.class,
        WaitClass::WaitingForWork,
        "{:?}",
        local.evidence
    );
}

/// Issue 38: waits that mostly time out and retry, by busy threads, are a
/// lock handed over with a timed wait (a GIL's) on a futex; in an event
/// loop's epoll_pwait, which times out when its next timer is due (two of
/// node's loops, "2 threads queue at uv__io_poll"), they are I/O.
#[test]
fn an_event_loops_timeouts_are_no_lock_handed_over() {
    use super::acc::SiteAcc;
    use super::classify::{FromPeer, classify};
    use super::signals::{Busy, Handovers, Nesting};
    use crate::report::WaitPrior;
    let site = |prior: WaitPrior| {
        let mut a = SiteAcc {
            count: 64.0,
            timed_out: 60.0,
            woken: 4.0,
            ns: 2e9,
            ..Default::default()
        };
        a.waiters.extend([1, 2]);
        a.priors.insert(prior, 2e9);
        let busy = Busy {
            run_share: 1.0,
            between_share: 1.0,
        };
        classify(
            &a,
            busy,
            &Handovers::default(),
            Nesting::default(),
            &FromPeer::default(),
            WALL as f64,
        )
    };
    const { assert!(60.0 / 64.0 >= MIN_TIMEOUT_SHARE && 4.0 / 64.0 >= MIN_RETRY_WOKEN_SHARE) };
    let (class, evidence) = site(WaitPrior::Condition);
    assert_eq!(class, WaitClass::Contention, "{evidence:?}");
    let (class, evidence) = site(WaitPrior::Io);
    assert_ne!(class, WaitClass::Contention, "{evidence:?}");
}
