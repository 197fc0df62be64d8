//! Every rule driven with synthetic reports just above and just below each
//! of its thresholds: it fires on one side only.

use super::*;
use crate::analyze::build::{build, tests::sample_inputs, tests::sample_lock};
use crate::report::*;

const WALL: u64 = 1_000_000_000;
/// How far past a threshold the two sides sit.
pub(crate) const UP: f64 = 1.02;
pub(crate) const DOWN: f64 = 0.98;

pub(crate) fn base() -> Report {
    let mut r = build(sample_inputs());
    r.duration_ns = WALL;
    r.findings.clear();
    r.locks.clear();
    r.syscalls.clear();
    r.polls.clear();
    r.offcpu.clear();
    r.wakeups.clear();
    r.waits.clear();
    r.spin = SpinReport::default();
    r.summary.cpus = 2;
    r.summary.cpus_used = 1.0;
    r.summary.user_ns = 500_000_000;
    r.summary.sys_ns = 500_000_000;
    r.summary.syscalls = 0;
    r.summary.involuntary_switches_per_s = 0.0;
    r
}

pub(crate) fn fired(rule: Rule, r: &Report) -> bool {
    let found = rule(r);
    for f in &found {
        assert!(f.evidence.iter().all(Evidence::holds), "{f:?}");
        assert!((0.0..=1.0).contains(&f.severity), "{f:?}");
        assert!(!f.remedy.is_empty() && !f.culprit.name.is_empty(), "{f:?}");
    }
    !found.is_empty()
}

fn stack(function: &str, count: u64) -> LockStack {
    LockStack {
        frames: vec![
            "__lll_lock_wait (lowlevellock.c:49)".into(),
            "my_lock (app.c:5)".into(),
            format!("{function} (app.c:10)").into(),
        ],
        count,
        wait_ns: 0,
        samples: count,
        estimated: false,
    }
}

/// A contended lock: `threads` waiters spending `waiting` of their time in it.
fn lock(kind: LockKind, name: &str, threads: u32, waiting: f64) -> LockReport {
    let mut l = sample_lock(kind, name);
    l.threads = threads;
    l.wait_ns = (waiting * WALL as f64 * f64::from(threads)) as u64;
    l
}

// lock.exclusive-hot

fn exclusive_hot(share: f64, waiting: f64, threads: u32, reads: u64) -> Report {
    let mut r = base();
    let mut l = lock(LockKind::Mutex, "g_ns", threads, waiting);
    l.waiter_stacks = vec![stack("ns_get", reads), stack("ns_set", 100 - reads)];
    let mut other = lock(LockKind::Mutex, "g_other", 1, 0.0);
    other.wait_ns = (l.wait_ns as f64 * (1.0 - share) / share) as u64;
    r.locks = vec![l, other];
    r
}

#[test]
fn exclusive_hot_thresholds() {
    use lock_exclusive_hot::*;
    let rule: Rule = check;
    let ok = (MIN_SHARE_OF_LOCK_WAIT * UP, MIN_WAITING_SHARE * UP, 4, 90);
    assert!(fired(rule, &exclusive_hot(ok.0, ok.1, ok.2, ok.3)));
    assert!(!fired(
        rule,
        &exclusive_hot(MIN_SHARE_OF_LOCK_WAIT * DOWN, ok.1, ok.2, ok.3)
    ));
    assert!(!fired(
        rule,
        &exclusive_hot(ok.0, MIN_WAITING_SHARE * DOWN, ok.2, ok.3)
    ));
    assert!(!fired(rule, &exclusive_hot(ok.0, ok.1, 1, ok.3)));
    assert!(!fired(rule, &exclusive_hot(ok.0, ok.1, ok.2, 79)));
    assert!(fired(rule, &exclusive_hot(ok.0, ok.1, ok.2, 80)));
    // A read/write lock is already shared by readers.
    let mut rw = exclusive_hot(ok.0, ok.1, ok.2, ok.3);
    rw.locks[0].kind = LockKind::Rwlock;
    assert!(!fired(rule, &rw));
    let f = &check(&exclusive_hot(ok.0, ok.1, ok.2, ok.3))[0];
    assert_eq!(f.culprit.name, "mutex g_ns");
    assert_eq!(f.culprit.kind, CulpritKind::Lock);
}

#[test]
fn read_paths_are_told_by_their_verbs() {
    use lock_exclusive_hot::reads;
    let s = |f: &[&str]| {
        f.iter()
            .map(|x| crate::frame::Frame::from(*x))
            .collect::<Vec<_>>()
    };
    assert!(reads(&s(&[
        "__lll_lock_wait (x.c:1)",
        "ns_lock (a.c:1)",
        "ns_get (a.c:2)"
    ])));
    assert!(reads(&s(&[
        "pthread_mutex_lock",
        "Namespace::lookupValue (a.cpp:3)"
    ])));
    assert!(!reads(&s(&[
        "pthread_mutex_lock",
        "ns_set (a.c:1)",
        "ns_get (a.c:2)"
    ])));
    assert!(!reads(&s(&["pthread_mutex_lock", "worker (a.c:1)"])));
}

// Wait sites, the input of the site-based lock rules.

/// A contended site: `waiters` threads (in `processes`) waiting there
/// `waiting` of their time, on `locks`, released by `mechanism`.
fn site(function: &str, waiters: u32, waiting: f64, locks: &[&str], mechanism: &str) -> WaitSite {
    let mut s = crate::analyze::build::tests::sample_wait_site();
    s.function = format!("{function}(int)");
    s.via = vec![];
    s.class = WaitClass::Contention;
    s.waiters = waiters;
    s.waiter_tids = (1..=waiters).collect();
    s.processes = 1;
    s.wait_ns = (waiting * WALL as f64 * f64::from(waiters)) as u64;
    s.locks = locks.iter().map(|l| l.to_string()).collect();
    s.lock_words = locks.len() as u32;
    s.releases[0].mechanism = mechanism.into();
    s.releases[0].wait_ns = s.wait_ns;
    s.stacks[0].frames = vec![
        "__lll_lock_wait (lowlevellock.c:49)".into(),
        format!("{function}(int) (app.cc:10)").into(),
    ];
    s
}

/// Another contended site taking `1 - share` of the contended waiting.
fn other_site(main: &WaitSite, share: f64) -> WaitSite {
    let mut o = site("elsewhere", 1, 0.0, &["mutex g_other"], "futex");
    o.waiter_tids = vec![99];
    o.wait_ns = (main.wait_ns as f64 * (1.0 - share) / share) as u64;
    o
}

/// tests/java.rs, once in five runs: the workers' waits from interpreted
/// code before the JIT compiled their loop outweighed the compiled ones'
/// and the finding said "Interpreter via ...".
#[test]
fn a_unit_is_named_by_a_method_before_the_interpreter() {
    let java = |function: &str, location: &str, waiting: f64| {
        let mut s = site(function, 4, waiting, &[], "futex");
        s.function = function.into();
        s.via = vec!["Parker::park(bool, long)".into()];
        s.lock_words = 8;
        s.stacks[0].frames = vec![
            "Parker::park(bool, long) (libjvm.so)".into(),
            format!("{function} ({location})").into(),
        ];
        s
    };
    let mut r = base();
    r.waits = vec![
        java("Interpreter", "jit", 0.5),
        java("Work.run", "jit", 0.2),
    ];
    let units = common::contention_units(&r);
    assert_eq!(units.len(), 1);
    assert_eq!(units[0].name, "Work.run via Parker::park");
    // Alone, the interpreter still names it.
    r.waits.remove(1);
    assert_eq!(
        common::contention_units(&r)[0].name,
        "Interpreter via Parker::park"
    );
}

/// Issue 19 (RocketMQ, 1 suite run of 4): netty's PoolArena lock (2
/// threads) joined the put lock's unit through their common Parker::park
/// and the finding said 18 threads for 16. Sites gather by the program's
/// own wrapper when they have one; platform-only locks by the primitive.
#[test]
fn sites_gather_by_their_outermost_non_platform_wrapper() {
    let jvm = |function: &str, tids: &[u32], wrapper: Option<&str>| {
        let mut s = site(function, tids.len() as u32, 0.3, &[], "futex");
        s.function = function.into();
        s.waiter_tids = tids.to_vec();
        s.lock_words = 8;
        s.via = [
            "Parker::park(bool, long)",
            "Unsafe_Park",
            "jdk.internal.misc.Unsafe.park",
            "java.util.concurrent.locks.AbstractQueuedSynchronizer.acquire",
        ]
        .iter()
        .map(|v| v.to_string())
        .chain(wrapper.map(String::from))
        .collect();
        s
    };
    let mut r = base();
    r.waits = vec![
        jvm(
            "CommitLog.asyncPutMessage",
            &[1, 2, 3, 4],
            Some("store.PutLock.lock"),
        ),
        jvm("CommitLog.putMessages", &[5, 6], Some("store.PutLock.lock")),
        jvm("PoolArena.allocate", &[7, 8], None),
    ];
    let units = common::contention_units(&r);
    let sizes: Vec<(usize, usize)> = units
        .iter()
        .map(|u| (u.sites.len(), u.waiters.len()))
        .collect();
    assert_eq!(
        sizes,
        [(2, 6), (1, 2)],
        "{:?}",
        units.iter().map(|u| &u.name).collect::<Vec<_>>()
    );
    assert_eq!(common::unit_wrapper(&r.waits[2]), Some("Unsafe_Park"));
    assert_eq!(
        common::unit_wrapper(&r.waits[0]),
        Some("store.PutLock.lock")
    );
}

// lock.global-serializes

fn global(threads: u32, waiting: f64, share: f64, cpus_used: f64) -> Report {
    let mut r = base();
    // Three callers of one semaphore: one unit.
    let lock = "sysv-sem semid 7, sem 0";
    let callers = ["get_item", "add_history", "resolve_macro"];
    let mut sites: Vec<WaitSite> = callers
        .iter()
        .map(|f| site(f, threads, waiting / 3.0, &[lock], "sysv semaphore"))
        .collect();
    for s in &mut sites {
        s.processes = threads;
    }
    let main_wait: u64 = sites.iter().map(|s| s.wait_ns).sum();
    let mut o = other_site(&sites[0], 0.5);
    o.wait_ns = (main_wait as f64 * (1.0 - share) / share) as u64;
    sites.push(o);
    r.waits = sites;
    r.summary.cpus_used = cpus_used;
    r
}

#[test]
fn global_serializes_thresholds() {
    use lock_global_serializes::*;
    let rule: Rule = check;
    let (t, w, s, used) = (
        MIN_THREADS as u32,
        MIN_QUEUED_THREADS * UP / MIN_THREADS,
        MIN_SHARE_OF_CONTENDED_WAIT * UP,
        2.0 - MIN_IDLE_CPUS * UP,
    );
    assert!(fired(rule, &global(t, w, s, used)));
    assert!(!fired(rule, &global(t - 1, w, s, used)));
    assert!(!fired(
        rule,
        &global(t, MIN_QUEUED_THREADS * DOWN / MIN_THREADS, s, used)
    ));
    assert!(!fired(
        rule,
        &global(t, w, MIN_SHARE_OF_CONTENDED_WAIT * DOWN, used)
    ));
    assert!(!fired(rule, &global(t, w, s, 2.0 - MIN_IDLE_CPUS * DOWN)));
    let f = &check(&global(8, 0.9, s, 1.0))[0];
    assert_eq!(f.culprit.name, "sysv-sem semid 7, sem 0");
    assert!(f.title.contains("8 processes"), "{}", f.title);
    assert!(f.remedy.contains("get_item") && f.remedy.contains("resolve_macro"));
    // Not classed contention by the wait sites: no finding.
    let mut idle = global(8, 0.9, s, 1.0);
    for x in &mut idle.waits {
        x.class = WaitClass::WaitingForWork;
    }
    assert!(!fired(rule, &idle));
}

/// The fixed Zabbix (tests/demo.rs, once in a suite run): its pollers
/// wait in one `zbx_mutex_lock` on four queue shards, 3-4 semaphores among
/// 6-8 processes; gathered by that wrapper they read as one lock at the
/// rule's thresholds. Words shared among the waiters, at most
/// MAX_SHARED_LOCK_WORDS; a word per waiter is one lock's queue.
#[test]
fn a_set_of_shared_locks_behind_one_wrapper_is_not_one_lock() {
    use lock_global_serializes::*;
    let with_words = |words: u32| {
        let mut r = global(8, 0.9, 0.9, 1.0);
        for x in r.waits.iter_mut().take(3) {
            x.lock_words = words;
            x.via = vec!["zbx_mutex_lock".into()];
        }
        r
    };
    let max = MAX_SHARED_LOCK_WORDS as u32;
    assert!(fired(check, &with_words(max)));
    assert!(!fired(check, &with_words(max + 1)));
    // One word per waiter (8 processes, 8 semaphores): one lock's queue.
    assert!(fired(check, &with_words(8)));
}

/// Issue 20: an interpreter's lock names the program's code its threads
/// queue from, once the interpreter's frames are read; without them, it
/// says nothing it does not know.
#[test]
fn an_interpreters_lock_names_the_code_queued_for_it() {
    use lock_global_serializes::*;
    let gil = |frames: &[&str]| {
        let mut r = global(5, 0.9, 0.9, 1.0);
        for s in r.waits.iter_mut().take(3) {
            s.runtime_lock = Some("CPython's GIL".into());
            s.stacks[0].frames = frames
                .iter()
                .map(|f| crate::frame::Frame::from(*f))
                .collect();
            // Its holders hand it over from the same Python code.
            s.releases[0].stacks[0].frames = frames[1..]
                .iter()
                .map(|f| crate::frame::Frame::from(*f))
                .collect();
        }
        check(&r).remove(0)
    };
    let f = gil(&[
        "___pthread_cond_timedwait64 (pthread_cond_wait.c:643)",
        "python3.11+0x4f94ed",
        "work (gil_work.py:16)",
        "_PyFunction_Vectorcall (python3.11)",
        "Thread.run (threading.py:975)",
        "Thread._bootstrap (threading.py:995)",
    ]);
    assert!(
        f.title.starts_with(
            "CPython's GIL serializes 5 processes, queued in work (gil_work.py:16) ← Thread.run (threading.py:975): "
        ),
        "{}",
        f.title
    );
    assert!(
        f.remedy.starts_with(
            "Its holders hand it over in work (gil_work.py:16) ← Thread.run (threading.py:975): "
        ),
        "{}",
        f.remedy
    );
    let f = gil(&[
        "___pthread_cond_timedwait64 (pthread_cond_wait.c:643)",
        "python3.11+0x4f94ed",
    ]);
    assert!(!f.title.contains("queued in"), "{}", f.title);
    assert!(f.remedy.starts_with("Only one thread"), "{}", f.remedy);
}

// lock.contended-site

fn contended(waiters: u32, waiting: f64, share: f64, processes: u32, mechanism: &str) -> Report {
    let mut r = base();
    let mut s = site("ProcSleep", waiters, waiting, &[], mechanism);
    s.via = vec!["WaitEventSetWait".into(), "WaitLatch".into()];
    s.processes = processes;
    s.releases[0].site = Some("LockReleaseAll".into());
    s.releases[0].count = 50_000;
    let o = other_site(&s, share);
    r.waits = vec![s, o];
    r
}

#[test]
fn contended_site_thresholds() {
    use lock_contended_site::*;
    let rule: Rule = check;
    let ok = (
        MIN_WAITERS as u32,
        MIN_WAITING_SHARE * UP,
        MIN_SHARE_OF_CONTENDED_WAIT * UP,
    );
    assert!(fired(rule, &contended(ok.0, ok.1, ok.2, 1, "futex")));
    assert!(!fired(rule, &contended(ok.0 - 1, ok.1, ok.2, 1, "futex")));
    assert!(!fired(
        rule,
        &contended(ok.0, MIN_WAITING_SHARE * DOWN, ok.2, 1, "futex")
    ));
    assert!(!fired(
        rule,
        &contended(ok.0, ok.1, MIN_SHARE_OF_CONTENDED_WAIT * DOWN, 1, "futex")
    ));
    // Processes each asleep on their own latch, woken by a signal: the
    // hand-over is named, and the global-lock rule leaves it to this one.
    let r = contended(8, 0.6, 0.9, 8, "signal");
    let f = &check(&r)[0];
    assert_eq!(f.culprit.name, "ProcSleep via WaitLatch");
    assert!(
        f.title.contains("8 processes") && f.title.contains("signal"),
        "{}",
        f.title
    );
    assert!(f.remedy.contains("LockReleaseAll"), "{}", f.remedy);
    assert!(lock_global_serializes::check(&r).is_empty());
}

// lock.futile-churn

fn futile(waits_per_s: f64, futile_share: f64, cpu_share: f64, threads: u32) -> Report {
    let mut r = base();
    let mut l = lock(LockKind::Mutex, "", threads, 0.01);
    l.symbol = None;
    l.role = Some("rocksdb::LRUCacheShard::Lookup".into());
    l.mapping = Some("[heap]".into());
    l.waits = waits_per_s as u64;
    l.futile = (futile_share * l.waits as f64) as u64;
    l.wakes = l.waits;
    l.woken = l.waits / 10;
    l.cpu_ns = (cpu_share * 1e9) as u64;
    r.locks = vec![l];
    r
}

#[test]
fn futile_churn_thresholds() {
    use lock_futile_churn::*;
    let rule: Rule = check;
    let ok = (
        MIN_WAITS_PER_S * UP,
        MIN_FUTILE_SHARE * UP,
        MIN_LOCK_CPU_SHARE * UP,
        2,
    );
    assert!(fired(rule, &futile(ok.0, ok.1, ok.2, ok.3)));
    assert!(!fired(
        rule,
        &futile(MIN_WAITS_PER_S * DOWN, ok.1, ok.2, ok.3)
    ));
    assert!(!fired(
        rule,
        &futile(ok.0, MIN_FUTILE_SHARE * DOWN, ok.2, ok.3)
    ));
    assert!(!fired(
        rule,
        &futile(ok.0, ok.1, MIN_LOCK_CPU_SHARE * DOWN, ok.3)
    ));
    assert!(!fired(rule, &futile(ok.0, ok.1, ok.2, 1)));
    let f = &check(&futile(100_000.0, 0.9, 0.2, 4))[0];
    assert_eq!(
        f.culprit.name,
        "mutex in rocksdb::LRUCacheShard::Lookup ([heap])"
    );
    assert!(
        f.title.contains("90% of the wakes wake nobody"),
        "{}",
        f.title
    );
}

/// A CI run (python-gil-churn) named the GIL's mutex as futile churn
/// with the remedy of a lock of the program's own: a word of an
/// interpreter's lock gets the runtime's churn remedy.
#[test]
fn an_interpreter_locks_futile_churn_gets_the_runtimes_remedy() {
    use lock_futile_churn::*;
    let mut r = futile(MIN_WAITS_PER_S * UP, 0.5, 0.2, 4);
    r.locks[0].runtime_lock = Some("CPython's GIL".into());
    let f = &check(&r)[0];
    assert!(f.remedy.contains("fewer and larger"), "{}", f.remedy);
    assert!(!f.remedy.contains("striped"), "{}", f.remedy);
    let own = &check(&futile(MIN_WAITS_PER_S * UP, 0.5, 0.2, 4))[0];
    assert!(own.remedy.contains("striped"), "{}", own.remedy);
}

// lock.handoff-churn

fn churn(wakes_per_s: f64, mean_wait_ns: f64, cpu_share: f64) -> Report {
    let mut r = base();
    let mut l = lock(LockKind::Mutex, "g_put", 4, 0.1);
    l.waits = 1_000_000;
    l.wait_ns = (mean_wait_ns * l.waits as f64) as u64;
    l.wakes_per_s = wakes_per_s;
    l.cpu_ns = (cpu_share * 1e9) as u64;
    r.locks = vec![l];
    r
}

#[test]
fn handoff_churn_thresholds() {
    use lock_handoff_churn::*;
    let rule: Rule = check;
    let ok = (
        MIN_WAKES_PER_S * UP,
        MAX_MEAN_WAIT_NS * DOWN,
        MIN_LOCK_CPU_SHARE * UP,
    );
    assert!(fired(rule, &churn(ok.0, ok.1, ok.2)));
    assert!(!fired(rule, &churn(MIN_WAKES_PER_S * DOWN, ok.1, ok.2)));
    assert!(!fired(rule, &churn(ok.0, MAX_MEAN_WAIT_NS * UP, ok.2)));
    assert!(!fired(rule, &churn(ok.0, ok.1, MIN_LOCK_CPU_SHARE * DOWN)));
    // A lock of the program's own that parks on a futex may already adapt.
    let mut own = churn(ok.0, ok.1, ok.2);
    own.locks[0].kind = LockKind::Unknown;
    assert!(!fired(rule, &own));
}

/// Issue 37: an interpreter's lock is its mutex and condition variable
/// together, each with half the churn; judged whole, with the runtime's
/// remedy, above and below each threshold.
#[test]
fn an_interpreter_locks_churn_is_judged_whole_issue_37() {
    use lock_handoff_churn::*;
    let rule: Rule = check;
    // `queued` threads wait for it on average over the run, each wait
    // `queued` turns of `turn_ns`, half the waiting on each of its words.
    let queued_gil = |wakes_per_s: f64, turn_ns: f64, cpu_share: f64, queued: f64| {
        let mut r = churn(wakes_per_s / 2.0, turn_ns * queued, cpu_share / 2.0);
        let wait_ns = queued * r.duration_ns as f64 / 2.0;
        r.locks[0].waits = (wait_ns / (turn_ns * queued)) as u64;
        r.locks[0].wait_ns = wait_ns as u64;
        r.locks[0].runtime_lock = Some("CPython's GIL".into());
        let mut cond = r.locks[0].clone();
        cond.kind = LockKind::Condvar;
        r.locks.push(cond);
        r
    };
    let gil = |wakes_per_s: f64, turn_ns: f64, cpu_share: f64| {
        queued_gil(wakes_per_s, turn_ns, cpu_share, 1.0)
    };
    let ok = (
        MIN_WAKES_PER_S * UP,
        MAX_TURN_NS * DOWN,
        MIN_LOCK_CPU_SHARE * UP,
    );
    let found = check(&gil(ok.0, ok.1, ok.2));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].culprit.name, "CPython's GIL");
    assert!(
        found[0].remedy.contains("fewer and larger"),
        "{}",
        found[0].remedy
    );
    assert!(!fired(rule, &gil(MIN_WAKES_PER_S * DOWN, ok.1, ok.2)));
    assert!(!fired(rule, &gil(ok.0, MAX_TURN_NS * UP, ok.2)));
    assert!(!fired(rule, &gil(ok.0, ok.1, MIN_LOCK_CPU_SHARE * DOWN)));
    // Waits of 2.5 turns each, 2.5 threads queued: judged by the turn.
    assert!(fired(rule, &queued_gil(ok.0, ok.1, ok.2, 2.5)));
    assert!(!fired(rule, &queued_gil(ok.0, MAX_TURN_NS * UP, ok.2, 2.5)));
}

// poll.low-readiness

pub(crate) fn polling(
    syscall: &str,
    fds: f64,
    ready_ratio: f64,
    calls: u64,
    cpu_share: f64,
) -> Report {
    let mut r = base();
    r.polls = vec![PollReport {
        pid: 100,
        syscall: syscall.into(),
        calls,
        fds_per_call: fds,
        max_fds: fds as u64,
        ready_per_call: fds * ready_ratio,
        ready_ratio: Some(ready_ratio),
        timeouts: 0,
        errors: 0,
        calls_per_s: calls as f64,
        total_ns: (cpu_share * 1e9) as u64,
        cpu_ns: (cpu_share * 1e9) as u64,
        callsites: vec![],
    }];
    r
}

#[test]
fn poll_low_readiness_thresholds() {
    use poll_low_readiness::*;
    let rule: Rule = check;
    let (f, q, c, s) = (
        MIN_FDS_PER_CALL * UP,
        MAX_READY_RATIO * DOWN,
        MIN_CALLS as u64,
        MIN_CPU_SHARE * UP,
    );
    assert!(fired(rule, &polling("poll", f, q, c, s)));
    assert!(fired(rule, &polling("select", f, q, c, s)));
    assert!(!fired(
        rule,
        &polling("poll", MIN_FDS_PER_CALL * DOWN, q, c, s)
    ));
    assert!(!fired(
        rule,
        &polling("poll", f, MAX_READY_RATIO * UP, c, s)
    ));
    assert!(!fired(rule, &polling("poll", f, q, c - 1, s)));
    assert!(!fired(
        rule,
        &polling("poll", f, q, c, MIN_CPU_SHARE * DOWN)
    ));
    // epoll's cost follows readiness already.
    assert!(!fired(rule, &polling("epoll_wait", f, q, c, s)));
}

// sched.oversubscribed

fn crowded(runqueue: f64, cpus_used: f64, involuntary_share: f64) -> Report {
    let mut r = base();
    r.summary.cpus_used = cpus_used;
    let inv = (runqueue * WALL as f64) as u64;
    let other = (inv as f64 * (1.0 - involuntary_share) / involuntary_share) as u64;
    let reason = |reason, ns| OffCpuReasonReport {
        reason,
        ns,
        count: 1,
        syscalls: Default::default(),
        stacks: vec![],
    };
    r.offcpu = vec![OffCpuThread {
        tid: 101,
        pid: 100,
        comm: "worker".into(),
        total_ns: inv + other,
        wanted_ns: inv,
        reasons: vec![
            reason(OffCpuReason::Involuntary, inv),
            reason(OffCpuReason::Lock, other),
        ],
    }];
    r
}

#[test]
fn oversubscribed_thresholds() {
    use sched_oversubscribed::*;
    let rule: Rule = check;
    // base() gives the target 2 CPUs: with 1.01 threads waiting, the
    // CPUs used must be over 0.99 for 2 to want to run.
    let cpus = 2.0;
    let ok = (
        MIN_RUNQUEUE_THREADS * UP,
        MIN_RUNNABLE_PER_CPU * cpus * UP - MIN_RUNQUEUE_THREADS * UP,
        MIN_INVOLUNTARY_SHARE * UP,
    );
    assert!(fired(rule, &crowded(ok.0, ok.1, ok.2)));
    assert!(!fired(
        rule,
        &crowded(MIN_RUNQUEUE_THREADS * DOWN, 2.0, ok.2)
    ));
    // Threads waiting for CPUs that others use: not the target's doing.
    assert!(!fired(
        rule,
        &crowded(ok.0, MIN_RUNNABLE_PER_CPU * cpus * DOWN - ok.0, ok.2)
    ));
    assert!(!fired(
        rule,
        &crowded(ok.0, ok.1, MIN_INVOLUNTARY_SHARE * DOWN)
    ));
}

// spin.waste

pub(crate) fn spinning(share: f64, samples: u64, yields_per_s: f64) -> Report {
    spinning_in(&[("spin_lock", "pause", share, samples)], yields_per_s)
}

/// A report whose threads spin in `loops` (function, kind, share, samples)
/// and call sched_yield `yields_per_s` times a second from yield_loop.
pub(crate) fn spinning_in(loops: &[(&str, &str, f64, u64)], yields_per_s: f64) -> Report {
    let mut r = base();
    let stack = |f: &str| {
        vec![
            "main (a.c:1)".into(),
            format!("{f} (a.c:9)").into(),
            "cpu_relax (a.c:3)".into(),
        ]
    };
    r.spin = SpinReport {
        spin_samples: loops.iter().map(|l| l.3).sum(),
        cas_spin_samples: 0,
        load_spin_samples: 0,
        spin_share: loops.iter().map(|l| l.2).sum(),
        spin_stacks: loops
            .iter()
            .map(|l| FoldedStack {
                frames: stack(l.0),
                count: l.3,
                threads: vec![],
            })
            .collect(),
        loops: loops
            .iter()
            .map(|&(f, kind, share, samples)| SpinLoop {
                function: f.into(),
                kind: kind.into(),
                samples,
                share,
                threads: 4,
                frames: stack(f),
            })
            .collect(),
        yields: vec![ThreadYields {
            tid: 101,
            pid: 100,
            comm: "worker".into(),
            calls: yields_per_s as u64,
            calls_per_s: yields_per_s,
        }],
    };
    if yields_per_s > 0.0 {
        let calls = yields_per_s as u64;
        r.summary.syscalls += calls;
        r.syscalls.push(SyscallReport {
            name: "sched_yield".into(),
            nr: 24,
            calls,
            errors: 0,
            errnos: Default::default(),
            total_ns: calls * 200,
            timed_calls: Some(calls),
            bytes: 0,
            bytes_requested: 0,
            max_ns: 0,
            hist_log2_ns: vec![],
            unfinished: 0,
            callsites: vec![Callsite {
                frames: vec![
                    "__sched_yield (syscall-template.S:120)".into(),
                    "yield_loop (a.c:20)".into(),
                    "main (a.c:1)".into(),
                ],
                calls,
                calls_estimated: false,
                samples: 10,
            }],
            paths: vec![],
        });
    }
    r
}

#[test]
fn spin_waste_thresholds() {
    use spin_waste::*;
    let rule: Rule = check;
    let n = MIN_SPIN_SAMPLES as u64;
    assert!(fired(rule, &spinning(MIN_SPIN_SHARE * UP, n, 0.0)));
    assert!(!fired(rule, &spinning(MIN_SPIN_SHARE * DOWN, n, 0.0)));
    assert!(!fired(rule, &spinning(MIN_SPIN_SHARE * UP, n - 1, 0.0)));
    assert!(fired(rule, &spinning(0.0, 0, MIN_YIELDS_PER_S * UP)));
    assert!(!fired(rule, &spinning(0.0, 0, MIN_YIELDS_PER_S * DOWN)));
    let f = &check(&spinning(0.5, 50, 0.0))[0];
    assert_eq!(
        f.culprit.name, "spin_lock",
        "the spinning function, not its PAUSE helper"
    );
    assert_eq!(f.culprit.frames[0], "cpu_relax (a.c:3)", "innermost first");
    // Each loop is a finding of its own, over MIN_LOOP_SHARE.
    let two = spinning_in(
        &[
            ("spin_a", "pause", 0.3, 30),
            ("poll_b", "plain-loads", MIN_LOOP_SHARE * UP, 10),
            ("spin_c", "cas", MIN_LOOP_SHARE * DOWN, 10),
        ],
        0.0,
    );
    let names: Vec<String> = check(&two).into_iter().map(|f| f.culprit.name).collect();
    assert_eq!(names, ["spin_a", "poll_b"]);
    // Issue 19: a spin loop and a yield loop in one run, two findings.
    let both = spinning_in(&[("spin_a", "pause", 0.3, 30)], MIN_YIELDS_PER_S * 2.0);
    let names: Vec<String> = check(&both).into_iter().map(|f| f.culprit.name).collect();
    assert_eq!(names, ["spin_a", "yield_loop"]);
    // A report from before loops were told apart: its top stack.
    let mut old = spinning(0.5, 50, 0.0);
    old.spin.loops.clear();
    assert_eq!(check(&old)[0].culprit.name, "spin_lock");
}

// syscall.storm

pub(crate) fn storm(
    name: &str,
    per_s: f64,
    call_share: f64,
    system_share: f64,
    mean_ns: f64,
) -> Report {
    let mut r = base();
    let calls = per_s as u64;
    r.summary.syscalls = (calls as f64 / call_share) as u64;
    r.summary.syscalls_per_s = r.summary.syscalls as f64;
    r.summary.sys_ns = (system_share * 1e9) as u64;
    r.summary.user_ns = 1_000_000_000 - r.summary.sys_ns;
    let mut s = syscall_report(name, calls, mean_ns);
    s.callsites = vec![Callsite {
        frames: vec![
            "__GI___sigprocmask (sigprocmask.c:26)".into(),
            "swapcontext (swapcontext.S:80)".into(),
            "switch_to (ruby.c:41)".into(),
        ],
        calls,
        calls_estimated: true,
        samples: 100,
    }];
    r.syscalls = vec![s];
    r
}

/// `calls` calls of `name`, every one timed, `mean_ns` each.
pub(crate) fn syscall_report(name: &str, calls: u64, mean_ns: f64) -> SyscallReport {
    SyscallReport {
        name: name.into(),
        nr: crate::names::syscall_nr(name).unwrap_or(0),
        calls,
        errors: 0,
        errnos: Default::default(),
        total_ns: (mean_ns * calls as f64) as u64,
        timed_calls: Some(calls),
        bytes: 0,
        bytes_requested: 0,
        max_ns: 0,
        hist_log2_ns: vec![],
        unfinished: 0,
        callsites: vec![],
        paths: vec![],
    }
}

#[test]
fn syscall_storm_thresholds() {
    use syscall_storm::*;
    let rule: Rule = check;
    let ok = (
        MIN_CALLS_PER_S * UP,
        MIN_CALL_SHARE * UP,
        MIN_SYSTEM_SHARE * UP,
        MAX_MEAN_NS * DOWN,
    );
    let s = "rt_sigprocmask";
    assert!(fired(rule, &storm(s, ok.0, ok.1, ok.2, ok.3)));
    assert!(!fired(
        rule,
        &storm(s, MIN_CALLS_PER_S * DOWN, ok.1, ok.2, ok.3)
    ));
    assert!(!fired(
        rule,
        &storm(s, ok.0, MIN_CALL_SHARE * DOWN, ok.2, ok.3)
    ));
    assert!(!fired(
        rule,
        &storm(s, ok.0, ok.1, MIN_SYSTEM_SHARE * DOWN, ok.3)
    ));
    assert!(!fired(rule, &storm(s, ok.0, ok.1, ok.2, MAX_MEAN_NS * UP)));
    // Moving data or waiting is work, judged by other rules...
    let writes_busy = |bytes_per_call: f64, share: f64, busy: f64| {
        let mut r = storm("write", ok.0, share, ok.2, ok.3);
        r.syscalls[0].bytes_requested = (bytes_per_call * r.syscalls[0].calls as f64) as u64;
        r.threads.truncate(1);
        r.threads[0].user_ns = (busy * WALL as f64) as u64;
        r.threads[0].sys_ns = 0;
        r
    };
    let writes = |bytes_per_call: f64, share: f64| writes_busy(bytes_per_call, share, 1.0);
    assert!(!fired(rule, &writes(4096.0, ok.1)));
    assert!(!fired(rule, &storm("futex", ok.0, ok.1, ok.2, ok.3)));
    // ... unless each call moves only a few bytes (issue #10: dd bs=1,
    // where reads and writes are half the calls each).
    assert!(fired(
        rule,
        &writes(MAX_BYTES_PER_CALL * DOWN, MIN_DATA_CALL_SHARE * UP)
    ));
    assert!(!fired(
        rule,
        &writes(MAX_BYTES_PER_CALL * UP, MIN_DATA_CALL_SHARE * UP)
    ));
    assert!(!fired(
        rule,
        &writes(MAX_BYTES_PER_CALL * DOWN, MIN_DATA_CALL_SHARE * DOWN)
    ));
    // A server reading small requests between waits for its clients.
    let small = MAX_BYTES_PER_CALL * DOWN;
    let data = MIN_DATA_CALL_SHARE * UP;
    assert!(fired(rule, &writes_busy(small, data, MIN_BUSY_SHARE * UP)));
    assert!(!fired(
        rule,
        &writes_busy(small, data, MIN_BUSY_SHARE * DOWN)
    ));
    // Issue 35: the threads that make the calls are the ones whose
    // business counts: a shell that waits for dd, with a start-up of 2%
    // of the run on CPU, is not one of them, unless it makes its share of
    // the calls.
    let with_shell = |shell_calls_share: f64| {
        let mut r = writes_busy(small, data, 0.9);
        let total = r.summary.syscalls;
        r.threads[0].syscalls = total;
        let mut shell = r.threads[0].clone();
        shell.tid += 1;
        shell.comm = "sh".into();
        shell.user_ns = (0.02 * WALL as f64) as u64;
        shell.syscalls = (shell_calls_share * total as f64) as u64;
        r.threads.push(shell);
        r
    };
    assert!(fired(rule, &with_shell(MIN_CALLER_SHARE * DOWN)));
    assert!(!fired(rule, &with_shell(MIN_CALLER_SHARE * UP)));
    let tiny = &check(&writes(1.0, 0.5))[0];
    assert!(
        tiny.title.contains("asks for 1.0 bytes per call"),
        "{}",
        tiny.title
    );
    assert!(tiny.remedy.contains("large blocks"), "{}", tiny.remedy);
    let f = &check(&storm(s, 2e6, 1.0, 0.8, 160.0))[0];
    assert!(f.remedy.contains("swapcontext save"), "{}", f.remedy);
    assert!(f.remedy.contains("_setjmp/_longjmp"));
    assert!(
        f.title.contains("save and restore the signal mask"),
        "{}",
        f.title
    );
    assert!(f.title.contains("2.00 M times a second"), "{}", f.title);
    assert_eq!(f.culprit.name, "rt_sigprocmask");
    let plain = &check(&storm("getppid", 2e6, 1.0, 0.8, 160.0))[0];
    assert!(plain.remedy.contains("getppid"), "{}", plain.remedy);
}

// wait.bottleneck

fn wakeup(waker: u32, woken: u32, mechanism: &str, wait_ns: u64) -> WakeupReport {
    WakeupReport {
        waker_pid: 100,
        waker_tid: waker,
        waker_comm: format!("t{waker}"),
        waker_in_target: true,
        woken_pid: 100,
        woken_tid: woken,
        woken_comm: format!("t{woken}"),
        mechanism: mechanism.into(),
        count: 10,
        wait_ns,
        waker_stacks: vec![CountedStack {
            frames: vec![
                "pthread_cond_signal".into(),
                format!("produce{waker} (a.c:1)").into(),
            ],
            count: 10,
            samples: 10,
            estimated: false,
        }],
    }
}

/// Threads `tids` of the target, using `cpu_share` of its CPU time between
/// them.
fn working(r: &mut Report, tids: &[u32], cpu_share: f64) {
    let cpu = (r.summary.user_ns + r.summary.sys_ns) as f64 * cpu_share / tids.len() as f64;
    for &tid in tids {
        r.threads.push(thread_report(tid, cpu as u64));
    }
}

/// A thread of pid 100 with `user_ns` of CPU and nothing else.
pub(crate) fn thread_report(tid: u32, user_ns: u64) -> ThreadReport {
    ThreadReport {
        tid,
        pid: 100,
        comm: format!("t{tid}"),
        user_ns,
        sys_ns: 0,
        voluntary_switches: 0,
        involuntary_switches: 0,
        yields: 0,
        syscalls: 0,
        exited: false,
    }
}

/// Thread 1 wakes `woken` others, ending `share` of all ended waiting and
/// `waiting` threads' worth of wall time; those use 80% of the CPU.
fn bottleneck(share: f64, woken: u32, waiting: f64) -> Report {
    let mut r = base();
    let consumers: Vec<u32> = (0..woken).map(|i| 10 + i).collect();
    working(&mut r, &consumers, 0.8);
    let mine = (waiting * WALL as f64) as u64;
    let per = mine / u64::from(woken);
    r.wakeups = (0..woken)
        .map(|i| wakeup(1, 10 + i, "futex", per))
        .collect();
    let rest = (mine as f64 * (1.0 - share) / share) as u64;
    r.wakeups.push(wakeup(2, 3, "futex", rest));
    // Exits and timers are not waiting on anyone's work.
    r.wakeups.push(wakeup(5, 1, "exit", 10 * WALL));
    r.wakeups.push(wakeup(
        6,
        7,
        "kernel (swapper/0: timer, interrupt or kernel thread)",
        10 * WALL,
    ));
    r
}

#[test]
fn wait_bottleneck_thresholds() {
    use wait_bottleneck::*;
    let rule: Rule = check;
    let ok = (
        MIN_SHARE_OF_ENDED_WAIT * UP,
        MIN_THREADS_WOKEN as u32,
        MIN_WAITING_THREADS * UP,
    );
    assert!(fired(rule, &bottleneck(ok.0, ok.1, ok.2)));
    assert!(!fired(
        rule,
        &bottleneck(MIN_SHARE_OF_ENDED_WAIT * DOWN, ok.1, ok.2)
    ));
    assert!(!fired(rule, &bottleneck(ok.0, ok.1 - 1, ok.2)));
    assert!(!fired(
        rule,
        &bottleneck(ok.0, ok.1, MIN_WAITING_THREADS * DOWN)
    ));
    // Issue #10: a pipeline whose stages keep the CPUs busy is paced by its
    // work (pigz compressing a file), not by the thread they wait on.
    let mut busy = bottleneck(ok.0, ok.1, ok.2);
    busy.summary.cpus_used = 2.0 - MIN_IDLE_CPUS * DOWN;
    assert!(!fired(rule, &busy));
    busy.summary.cpus_used = 2.0 - MIN_IDLE_CPUS * UP;
    assert!(fired(rule, &busy));
    // Issue #12: a dispatcher that sleeps on a timer between tasks it hands
    // an idle pool paces nothing (a JVM's Thread.sleep is a timed wait the
    // kernel's timer ends).
    let timer = |share: f64| {
        let mut r = bottleneck(0.9, ok.1, 3.0);
        let mut w = wakeup(
            0,
            1,
            "kernel ([timer]: timer, interrupt or kernel thread)",
            (share * WALL as f64) as u64,
        );
        w.waker_comm = crate::report::TIMER_WAKER.into();
        w.waker_in_target = false;
        r.wakeups.push(w);
        r
    };
    assert!(!fired(rule, &timer(MAX_TIMER_SLEEP_SHARE * UP)));
    assert!(fired(rule, &timer(MAX_TIMER_SLEEP_SHARE * DOWN)));
    // Below that bound, the waiting it ends in the share of the run it
    // sleeps on a timer is no one's (CI, issue #12: a JVM's VM thread,
    // asleep half the run on its timed wait, "paced" the GC workers it
    // wakes at safepoints; 57% of the ended waiting, 28% now).
    let share = |r: &Report| check(r)[0].evidence[0].value;
    let eased = share(&timer(0.3));
    assert!((eased - 0.9 * 0.7).abs() < 1e-6, "{eased}");
    assert!(!fired(rule, &{
        let mut r = timer(0.3);
        // One that ends half the waiting keeps half of it x 0.7.
        r.wakeups[ok.1 as usize].wait_ns *= 9;
        r
    }));
    let f = &check(&bottleneck(0.9, 4, 3.0))[0];
    assert_eq!(f.culprit.name, "t1 (tid 1)");
    assert_eq!(f.culprit.frames[1], "produce1 (a.c:1)");
    // Issue #10: with wait sites, only threads waiting for work count as
    // consumers: not threads in contention, I/O or a join.
    let pool = |class: WaitClass| {
        let mut r = bottleneck(0.9, 4, 3.0);
        let mut s = site("worker_loop", 4, 0.9, &["condvar g_queue"], "futex");
        s.class = class;
        s.waiter_tids = (10..14).collect();
        r.waits = vec![s];
        r
    };
    assert!(fired(rule, &pool(WaitClass::WaitingForWork)));
    assert!(!fired(rule, &pool(WaitClass::StartupTeardown)));
    assert!(!fired(rule, &pool(WaitClass::IoOrPeer)));
    // Issue 37: a runtime's idle threads (Go's stopm) woken by another of
    // its threads are its scheduler's, not consumers of a producer.
    let mut go = pool(WaitClass::WaitingForWork);
    go.waits[0].prior = crate::report::WaitPrior::RuntimeIdle;
    assert!(!fired(rule, &go));
    // Threads that mostly queue on a lock and once waited for work are no
    // consumers (CI: PostgreSQL backends on a hot row that also waited a
    // little in heap_fetch, and one backend "paced" the others).
    let mostly_queued = |queued: f64| {
        let mut r = pool(WaitClass::WaitingForWork);
        let mut q = site("ProcSleep", 4, queued, &[], "signal");
        q.waiter_tids = (10..14).collect();
        r.waits.push(q);
        r
    };
    assert!(fired(rule, &mostly_queued(0.5)));
    assert!(!fired(rule, &mostly_queued(50.0)));
    // Issue 19: the threads it wakes must do a real share of the work; a
    // background thread waking an idle helper pool paces nothing.
    let helpers = |cpu_share: f64| {
        let mut r = bottleneck(0.9, 4, 3.0);
        r.threads.retain(|t| !(10..14).contains(&t.tid));
        let tids: Vec<u32> = (10..14).collect();
        working(&mut r, &tids, cpu_share);
        r
    };
    assert!(fired(rule, &helpers(MIN_CONSUMERS_CPU_SHARE * UP)));
    assert!(!fired(rule, &helpers(MIN_CONSUMERS_CPU_SHARE * DOWN)));
    // ... unless the waker is a saturated producer: its consumers idle
    // because it cannot feed them faster (tests/sched.rs: consumers at 1%
    // of the CPU, the producer at 97% of the run).
    let saturated = |busy: f64| {
        let mut r = helpers(MIN_CONSUMERS_CPU_SHARE * DOWN);
        r.threads.retain(|t| t.tid != 1);
        let wall = r.duration_ns as f64;
        r.threads.push(thread_report(1, (wall * busy) as u64));
        r
    };
    assert!(fired(rule, &saturated(MIN_PRODUCER_BUSY_SHARE * UP)));
    assert!(!fired(rule, &saturated(MIN_PRODUCER_BUSY_SHARE * DOWN)));
    // Woken fewer times each than a producer hands out work (an idle pool
    // started once).
    let mut once = bottleneck(0.9, 4, 3.0);
    for w in &mut once.wakeups {
        w.count = MIN_WAKES_PER_CONSUMER - 1;
    }
    assert!(!fired(rule, &once));
}

/// A pipeline as pigz runs it behind a slow pipe: a reader feeds two
/// compressors, which wake a writer as often as the reader wakes them and
/// the reader when a buffer frees. The compressors only hand on what the
/// reader gave them: the waiting goes back to the reader.
#[test]
fn waiting_passes_up_a_pipeline_to_the_stage_that_waits_for_nothing_in_it() {
    let ns = |share: f64| (share * WALL as f64) as u64;
    let mut r = base();
    working(&mut r, &[10, 11, 20], 0.9);
    r.wakeups = vec![
        wakeup(1, 10, "futex", ns(0.35)),
        wakeup(1, 11, "futex", ns(0.35)),
        wakeup(10, 20, "futex", ns(0.45)),
        wakeup(11, 20, "futex", ns(0.45)),
        wakeup(10, 1, "futex", ns(0.15)),
        wakeup(11, 1, "futex", ns(0.15)),
    ];
    // The reader's own wake-ups end 0.7 s of 1.9 s: under the threshold.
    let ended = |tid: u32| -> u64 {
        r.wakeups
            .iter()
            .filter(|w| w.waker_tid == tid)
            .map(|w| w.wait_ns)
            .sum()
    };
    let direct = ended(1) as f64 / (ended(1) + ended(10) + ended(11)) as f64;
    assert!(
        direct < wait_bottleneck::MIN_SHARE_OF_ENDED_WAIT,
        "{direct}"
    );
    let all = wait_bottleneck::check(&r);
    assert_eq!(all.len(), 1, "{all:?}");
    let f = &all[0];
    assert_eq!(f.culprit.name, "t1 (tid 1)");
    // Passed up: the compressors wait 35% of the run for the reader, the
    // reader 30% for them. What reaches the reader, x = 0.7 + 0.7 (0.6 +
    // 0.15 x), it keeps 70% of, once: 0.876 s of 1.9 s.
    let share = f.evidence[0].value;
    assert!((share - 0.876 / 1.9).abs() < 0.005, "{f:?}");
    assert!(
        f.title.contains("or with the threads it feeds"),
        "{}",
        f.title
    );
    // With no one feeding the compressors, they are the stages that pace
    // the writer, and nothing passes on.
    r.wakeups.retain(|w| w.waker_tid != 1);
    let all = wait_bottleneck::check(&r);
    assert_eq!(all.len(), 2, "{all:?}");
    for f in &all {
        assert!((f.evidence[0].value - 0.5).abs() < 1e-9, "{f:?}");
        assert!(!f.title.contains("feeds"), "{}", f.title);
    }
    let f = &wait_bottleneck::check(&bottleneck(0.9, 4, 3.0))[0];
    assert!(!f.title.contains("feeds"), "{}", f.title);
}

/// A producer that runs a runtime's event loop is named as the loop, and
/// given the runtime's remedy rather than the generic producer's (issue 38:
/// node-lookup's loop paced libuv's pool and V8's helpers).
#[test]
fn a_producer_running_libuvs_loop_gets_the_loops_remedy_issue_38() {
    let generic = &wait_bottleneck::check(&bottleneck(0.9, 4, 3.0))[0];
    assert!(
        generic.remedy.contains("split its work"),
        "{}",
        generic.remedy
    );
    assert!(!generic.title.contains("event loop"), "{}", generic.title);
    let mut r = bottleneck(0.9, 4, 3.0);
    for w in r.wakeups.iter_mut().filter(|w| w.waker_tid == 1) {
        w.waker_stacks[0].frames = vec![
            "___pthread_cond_signal (pthread_cond_signal.c:93)".into(),
            "uv_cond_signal (thread.c:783)".into(),
            "uv__work_submit (threadpool.c:274)".into(),
            "uv__io_poll (linux.c:1485)".into(),
        ];
    }
    let f = &wait_bottleneck::check(&r)[0];
    assert!(
        f.title.starts_with("t1 (tid 1), libuv's event loop, paces"),
        "{}",
        f.title
    );
    assert!(f.remedy.contains("worker_threads"), "{}", f.remedy);
    assert!(!f.remedy.contains("split its work"), "{}", f.remedy);
}

#[test]
fn a_quiet_report_has_no_findings_and_findings_rank_by_severity() {
    assert!(analyse(&base()).is_empty());
    assert!(analyse(&build(sample_inputs())).is_empty());
    let mut r = storm("rt_sigprocmask", 2e6, 1.0, 0.9, 160.0);
    r.polls = polling("poll", 1000.0, 0.001, 1000, 0.3).polls;
    let all = analyse(&r);
    let ids: Vec<&str> = all.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["syscall.storm", "poll.low-readiness"]);
    assert!(all[0].severity >= all[1].severity);
    // A crowded run queue ranks after the causes, however severe.
    let mut c = crowded(3.0, 2.0, 0.9);
    c.polls = r.polls.clone();
    let ids: Vec<String> = analyse(&c).into_iter().map(|f| f.id).collect();
    assert_eq!(ids, ["poll.low-readiness", "sched.oversubscribed"]);
    assert!(check_severity(&c, "sched.oversubscribed") > check_severity(&c, "poll.low-readiness"));
}

#[test]
fn handoff_churn_follows_the_more_specific_finding_on_its_lock() {
    let mut r = exclusive_hot(0.9, 0.25, 4, 90);
    let l = &mut r.locks[0];
    l.waits = 1_000_000;
    l.wait_ns = 1_000_000_000;
    l.wakes_per_s = 1e6;
    l.cpu_ns = 900_000_000;
    let all = analyse(&r);
    let ids: Vec<&str> = all.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["lock.exclusive-hot", "lock.handoff-churn"]);
    assert!(all[1].severity > all[0].severity, "{all:?}");
    // With a second specific finding on the lock that outranks the first,
    // the churn follows them both (CI: Icinga's bad run once read
    // futile-churn, handoff-churn, exclusive-hot).
    let l = &mut r.locks[0];
    l.futile = l.waits;
    l.woken = l.waits / 10;
    let all = analyse(&r);
    let ids: Vec<&str> = all.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "lock.futile-churn",
            "lock.exclusive-hot",
            "lock.handoff-churn"
        ]
    );
}

fn check_severity(r: &Report, id: &str) -> f64 {
    analyse(r).iter().find(|f| f.id == id).unwrap().severity
}

/// Issue 19: fewer workers is offered when more contend for a lock than
/// the CPUs serve (MAX_WORKERS_PER_CPU), with the queue it would leave.
#[test]
fn fewer_workers_is_a_remedy_when_more_contend_than_the_cpus_serve() {
    use super::common::{MAX_WORKERS_PER_CPU, fewer_workers};
    let r = base();
    let cpus = f64::from(r.summary.cpus);
    let just_over = (cpus * MAX_WORKERS_PER_CPU) as usize + 1;
    let text = fewer_workers(&r, just_over, 1, 2.5).expect("over the CPUs");
    assert!(
        text.contains("3 threads contend") && text.contains("at most 1 could wait"),
        "{text}"
    );
    assert!(fewer_workers(&r, just_over - 1, 1, 2.5).is_none());
    assert!(
        fewer_workers(&r, 100, 100, 46.0)
            .unwrap()
            .contains("100 processes")
    );
}

/// Issue 19: a file syscall's storm names the file most of its calls name
/// (MIN_PATH_SHARE), and a known library pattern its fix.
#[test]
fn a_file_storm_names_its_path_and_a_known_pattern_its_fix() {
    use syscall_storm::*;
    let with_paths = |top: u64, rest: u64| {
        let mut r = storm("newfstatat", 1e6, 1.0, 0.8, 500.0);
        let s = &mut r.syscalls[0];
        s.callsites[0].frames = vec![
            "__GI___fstatat64 (fstatat64.c:166)".into(),
            "__tzfile_read (tzfile.c:154)".into(),
            "tzset_internal (tzset.c:405)".into(),
            "__tz_convert (tzset.c:577)".into(),
            "do_strftime (builtin.c:2100)".into(),
        ];
        s.paths = vec![
            PathCount {
                path: "/etc/localtime".into(),
                calls: top,
            },
            PathCount {
                path: "/etc/other".into(),
                calls: rest,
            },
        ];
        check(&r)
    };
    let half = (MIN_PATH_SHARE * 1000.0) as u64;
    let f = &with_paths(half + 1, 1000 - half - 1)[0];
    assert!(f.title.contains("on /etc/localtime"), "{}", f.title);
    assert!(f.remedy.contains("TZ=:/etc/localtime"), "{}", f.remedy);
    let f = &with_paths(half - 1, 1000 - half + 1)[0];
    assert!(!f.title.contains(" on /etc/"), "{}", f.title);
}

/// Issue 20: a storm from interpreted code is named by the Python (or
/// Ruby) line that makes the call, not by the interpreter's unnamed C it
/// passes through; without interpreted frames, the unnamed C with its
/// nearest named callers.
#[test]
fn a_storm_from_interpreted_code_names_its_line() {
    let frames = |python: bool| {
        let mut f: Vec<crate::frame::Frame> = vec![
            "__GI_getppid (syscall-template.S:93)".into(),
            "python3.11+0x471391".into(),
            "python3.11+0x51f62a".into(),
            "PyObject_Vectorcall (python3.11)".into(),
        ];
        if python {
            f.push("poll_parent (storm.py:4)".into());
            f.push("main (storm.py:8)".into());
        }
        f.push("Py_RunMain (python3.11)".into());
        f
    };
    for (python, from) in [
        (true, "from poll_parent (storm.py:4)"),
        (
            false,
            "from python3.11+0x471391 in PyObject_Vectorcall ← Py_RunMain",
        ),
    ] {
        let mut r = storm("getppid", 2e6, 1.0, 0.8, 160.0);
        r.syscalls[0].callsites[0].frames = frames(python);
        let f = &syscall_storm::check(&r)[0];
        assert!(f.title.ends_with(from), "{}", f.title);
    }
    // A named caller is itself.
    let f = &syscall_storm::check(&storm("getppid", 2e6, 1.0, 0.8, 160.0))[0];
    assert!(f.title.ends_with("from swapcontext"), "{}", f.title);
}
