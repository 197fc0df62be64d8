//! sqlite-commits (issue 37: slow synchronous calls): Debian's sqlite3
//! inserting 2,000 rows one statement at a time, each its own transaction,
//! against the same statements in one transaction. Ground truth (strace -c
//! -w, /proc every 2 ms, without kerntax): 8,004 fdatasync (4 per row),
//! 59.5% of the time in syscalls, 370 us each; unlink of the journal 14.1%;
//! the process in D state in 54% of the samples; 781 rows/s against 67,125
//! in one transaction (8 fdatasync).
use super::*;
use kerntax::report::OffCpuReason;

#[test]
fn sqlite_committing_every_insert_waits_for_the_disk_and_one_transaction_does_not() {
    live("sqlite-commits");
}

/// The share of the run its one thread slept for `reason`.
fn off_share(r: &Report, reason: OffCpuReason) -> f64 {
    let ns: u64 = r
        .offcpu
        .iter()
        .filter(|t| t.pid == r.target_pid)
        .flat_map(|t| t.reasons.iter().filter(|x| x.reason == reason))
        .map(|x| x.ns)
        .sum();
    ns as f64 / r.duration_ns as f64
}

/// What `sqlite_committing_every_insert_waits_for_the_disk_and_one_transaction_does_not` asserts of a bad and a healthy run, live or recorded.
pub fn sqlite_committing_every_insert_waits_for_the_disk_and_one_transaction_does_not_holds(
    bad: &Report,
    healthy: &Report,
) {
    let f = first(bad, "io.synchronous");
    assert_eq!(f.culprit.name, "fdatasync", "{f:?}");
    // Four flushes per row (the journal and the database, each twice), and
    // the few of the table's creation.
    let calls = syscall(bad, "fdatasync").calls;
    assert!((8_000..8_020).contains(&calls), "{calls}");
    assert!(f.title.contains("waits for the disk"), "{}", f.title);
    // SQLite's commit, readably, and SQLite's own remedy.
    assert!(
        has_frame(&f.culprit.frames, "sqlite3PagerCommitPhaseOne"),
        "{f:?}"
    );
    assert!(
        f.title.contains("sqlite3PagerCommitPhaseOne"),
        "{}",
        f.title
    );
    assert!(f.remedy.contains("BEGIN"), "{}", f.remedy);
    // The disk's waits are I/O in the off-CPU table, never involuntary
    // preemption (ground truth: D in 54% of the samples).
    let io = off_share(bad, OffCpuReason::Io);
    let invol = off_share(bad, OffCpuReason::Involuntary);
    assert!(io >= 0.3, "I/O {io}");
    assert!(invol < io / 4.0, "involuntary {invol}, I/O {io}");
    assert_eq!(off_share(bad, OffCpuReason::BlockingSyscall), 0.0);

    // One transaction: 8 flushes in all, nothing to batch.
    assert!(syscall(healthy, "fdatasync").calls <= 20);
    lacks(healthy, "io.synchronous");
    lacks(healthy, "syscall.storm");
}
