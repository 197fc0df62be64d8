//! memcached-hot-key: Debian's memcached 1.6.18 (stripped; libevent 2.1),
//! 4 worker threads, 8 pipelined client connections doing `incr`. On one
//! key the 4 workers take the same item lock (item_lock(hv) in add_delta,
//! a pthread mutex of item_locks[]) for very short holds: perf counts
//! 68-77 k futex waits a second, 99.9% EAGAIN, and 124-140 k wakes a second, over
//! 99.9% waking nobody; with a key per connection, no futex call at all.
//! The workers (1.35 of the 2 CPUs, the client the rest) otherwise wait in
//! epoll_wait for their clients; the main thread (accept loop) and the
//! background threads idle.
use super::*;

#[test]
fn memcached_workers_churn_the_item_lock_of_one_hot_key_and_of_own_keys_do_not() {
    live("memcached-hot-key");
}

/// What `memcached_workers_churn_the_item_lock_of_one_hot_key_and_of_own_keys_do_not` asserts of a bad and a healthy run, live or recorded.
pub fn memcached_workers_churn_the_item_lock_of_one_hot_key_and_of_own_keys_do_not_holds(
    bad: &Report,
    healthy: &Report,
) {
    let f = first(bad, "lock.futile-churn");
    let workers: Vec<u32> = bad
        .threads
        .iter()
        .filter(|t| t.comm == "mc-worker")
        .map(|t| t.tid)
        .collect();
    assert_eq!(workers.len(), 4, "{:?}", bad.threads);
    // The item lock, taken by pthread_mutex_lock in memcached's add_delta
    // (stripped: memcached+0x...), read with its nearest named caller, as
    // the wait site reads ("memcached+0x19de0 in event_base_loop"), not as
    // a bare offset.
    let name = &f.culprit.name;
    assert!(name.starts_with("mutex in "), "{f:?}");
    assert!(
        !name.contains("memcached+0x") || name.contains("event_base_loop"),
        "{name}"
    );
    assert!(culprit_has(f, "pthread_mutex_lock"), "{f:?}");
    // One mutex (item_locks[] is calloc'd: an anonymous mapping), fought
    // over by the 4 workers, nearly every wait futile; released by the
    // same function's unlock.
    let lock = bad.locks.iter().max_by_key(|l| l.waits).expect("a lock");
    assert_eq!(lock.kind, kerntax::report::LockKind::Mutex, "{lock:?}");
    assert_eq!(lock.threads, 4, "{lock:?}");
    assert!(
        lock.waits >= 100_000 && lock.futile * 10 >= lock.waits * 9,
        "waits {} futile {}",
        lock.waits,
        lock.futile
    );
    assert!(
        lock.waker_stacks
            .first()
            .is_some_and(|s| s.frames.iter().any(|x| x.contains("pthread_mutex_unlock"))),
        "{:?}",
        lock.waker_stacks
    );
    // Contention is the workers' only: the main thread's accept loop and
    // the workers' epoll_wait (event_base_loop) wait for clients, the LRU
    // maintainer sleeps on a timer, and the other background threads
    // (logger, crawler, slab rebalancer, hash expansion) never wake.
    let site = bad
        .waits
        .iter()
        .filter(|s| s.class == WaitClass::Contention)
        .max_by_key(|s| s.futile + s.waits)
        .expect("a contended site");
    assert!(
        site.waiters == 4 && site.waiter_tids.iter().all(|t| workers.contains(t)),
        "{site:?}"
    );
    idle_syscalls_not_contention(bad, &["epoll_wait", "clock_nanosleep"]);
    for s in bad
        .waits
        .iter()
        .filter(|s| s.class == WaitClass::Contention)
    {
        assert!(s.waiter_tids.iter().all(|t| workers.contains(t)), "{s:?}");
    }
    nothing_idle_is_contention(bad);
    lacks(bad, "wait.bottleneck");
    // 4 busy workers and the client on 2 CPUs may wait for a CPU, but that
    // is not what comes first.
    assert!(
        healthy.findings.iter().all(|f| !f.id.starts_with("lock.")),
        "{:?}",
        ids(healthy)
    );
    // No lock is fought over: (almost) no futex calls at all.
    let futex = |r: &Report| {
        r.syscalls
            .iter()
            .find(|s| s.name == "futex")
            .map_or(0, |s| s.calls)
    };
    assert!(
        futex(healthy) * 100 < futex(bad),
        "futex calls: healthy {} bad {}",
        futex(healthy),
        futex(bad)
    );
    nothing_idle_is_contention(healthy);
    lacks(healthy, "wait.bottleneck");
}

/// Issue 22: `kerntax top -p` on the same server watches the item lock's
/// finding appear with the hot-key load and go away when it stops
/// (`top-live`: ~3 s idle, 4 s of load, idle to the 12th window).
#[test]
fn memcached_top_shows_the_hot_key_lock_while_the_load_runs_and_not_after() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let lines = dir.path().join("top.jsonl");
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/real/memcached-hot-key/top-live");
    let out = Command::new(&script)
        .arg(&lines)
        .env("KERNTAX", env!("CARGO_BIN_EXE_kerntax"))
        .output()
        .expect("running top-live");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "top-live failed:\n{stderr}");
    let text = std::fs::read_to_string(&lines).unwrap();
    let windows: Vec<kerntax::top::snapshot::Snapshot> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(windows.len(), 12, "{text}");
    let churns = |s: &kerntax::top::snapshot::Snapshot| {
        s.findings
            .iter()
            .any(|f| f.id == "lock.futile-churn" && f.culprit.contains("memcached+0x"))
    };
    let shown: Vec<bool> = windows.iter().map(churns).collect();
    // Idle before the load, the finding with it, gone after it.
    assert!(!shown[0] && !shown[1], "{shown:?}\n{stderr}");
    let during = shown.iter().filter(|&&s| s).count();
    assert!((3..=6).contains(&during), "{shown:?}\n{stderr}");
    assert!(shown[9..].iter().all(|s| !s), "{shown:?}\n{stderr}");
    let first = shown.iter().position(|&s| s).unwrap();
    let last = shown.iter().rposition(|&s| s).unwrap();
    assert_eq!(last + 1 - first, during, "one stretch: {shown:?}");
    // While it shows, the four workers are the busy rows, their syscalls
    // counted per thread.
    let busy = &windows[first + 1];
    let workers: Vec<_> = busy
        .threads
        .iter()
        .filter(|t| t.comm == "mc-worker")
        .collect();
    assert_eq!(workers.len(), 4, "{:?}", busy.threads);
    assert!(
        workers.iter().all(|w| w.syscalls_per_s > 1000.0),
        "{workers:?}"
    );
    // And nothing is idle-waiting called a lock wait once the load stopped.
    let after = windows.last().unwrap();
    assert!(after.findings.is_empty(), "{:?}", after.findings);
}
