//! A snapshot of a lock story, for the screen's and frames' tests.

use super::snapshot::{Headline, Row, Shares, Snapshot};

fn thread(tid: u32, comm: &str, shares: Shares, site: Option<&str>) -> Row {
    Row {
        pid: 4242,
        tid: Some(tid),
        comm: comm.into(),
        threads: 1,
        state: shares.state(1).into(),
        shares,
        syscalls_per_s: 41_000.0 + tid as f64,
        voluntary_switches_per_s: 20_500.0,
        involuntary_switches_per_s: 12.0,
        wait_site: site.map(Into::into),
        exited: false,
    }
}

pub fn lock_story() -> Snapshot {
    let waiter = Shares {
        on_cpu: 0.31,
        run_queue: 0.04,
        lock: 0.62,
        ..Shares::default()
    };
    let site = Some("Namespace::Get (contention)");
    let mut threads: Vec<Row> = (4243..4247)
        .map(|tid| thread(tid, "worker", waiter, site))
        .collect();
    threads.push(thread(
        4242,
        "namespace_bad",
        Shares {
            waiting_for_work: 0.98,
            ..Shares::default()
        },
        Some("main (waiting for work)"),
    ));
    threads[4].syscalls_per_s = 2.0;
    let mut process = threads[0].clone();
    process.tid = None;
    process.threads = 5;
    process.comm = "namespace_bad".into();
    process.shares = Shares {
        on_cpu: 1.24,
        run_queue: 0.16,
        lock: 2.48,
        waiting_for_work: 0.98,
        ..Shares::default()
    };
    process.state = process.shares.state(5).into();
    process.syscalls_per_s = 164_012.0;
    Snapshot {
        at_s: 7.0,
        window_s: 1.0,
        target: "lab/namespace_bad --threads 4 (pid 4242)".into(),
        cpus: 2,
        cpus_used: 1.24,
        syscalls_per_s: 164_012.0,
        voluntary_switches_per_s: 82_000.0,
        involuntary_switches_per_s: 48.0,
        findings: vec![Headline {
            id: "lock.exclusive-hot".into(),
            title: "One exclusive lock serializes the threads that read a shared table".into(),
            severity: 0.62,
            culprit: "g_namespace_lock (namespace_bad)".into(),
            frames: vec![
                "pthread_mutex_lock (libc.so.6)".into(),
                "Namespace::Get (namespace.cpp:41)".into(),
                "worker (namespace.cpp:88)".into(),
            ],
            evidence: vec![
                "wait_share = 0.620 (>= 0.2)".into(),
                "waiters = 4.000 (>= 2)".into(),
            ],
            remedy: "Readers take the lock shared: use a reader-writer lock.".into(),
            gain: "estimated gain about 2.480 s (62%)".into(),
        }],
        threads,
        processes: vec![process],
        lost: 0,
        ended: None,
    }
}
