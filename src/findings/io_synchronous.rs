//! `io.synchronous` (issue 37: a program that makes each small unit of work
//! durable on its own): a few syscalls' own latency, waiting for the disk,
//! is most of a thread's time. The storm rule looks for many cheap calls;
//! these are few and slow, each one a round trip to the device (a flush, a
//! synchronous write, a file created or removed on a journalled file
//! system, a page read in).
//!
//! The signal is the kernel's own: the thread slept uninterruptibly (D
//! state) inside the call. A wait for an event another thread or a peer
//! sends (a socket, a pipe, a futex, a poll) is interruptible; a wait for
//! the device, a journal commit or a page read is not. So the rule needs no
//! list of "disk" syscalls, and a `write` that blocks on writeback counts
//! as surely as an `fdatasync`. (A lock of the kernel's — a file's inode
//! lock, the memory map's — sleeps the same way: its sleepers are rarely
//! most of a thread's time.)
//!
//! A known library on the call site (`known.rs`: SQLite's commit) gets its
//! own setting as the remedy.

use std::collections::{BTreeMap, BTreeSet};

use super::common::*;
use super::known::known;
use crate::report::{Culprit, CulpritKind, ExpectedGain, Finding, OffCpuReason, Report};
use crate::units::{duration, short};

pub const ID: &str = "io.synchronous";
/// A thread's time asleep uninterruptibly inside syscalls, over the run's
/// wall time: the calls are a large part of what it does (a fifth or more).
/// Under kerntax a syscall-heavy thread's own CPU time grows, so the share
/// reads lower than without it: `rsync --fsync`'s 400 flushes of 400 small
/// files read 16-34% of its receiver's time, and cost it 10-20% of its
/// files per second; SQLite's per-row commits 53-57%, Redis's
/// `appendfsync always` 31-36%.
pub const MIN_THREAD_IO_SHARE: f64 = 0.2;
/// Mean time per call of the syscall named: a round trip to a device, not
/// a cheap call made often (which is `syscall.storm`'s).
pub const MIN_MEAN_NS: f64 = 100_000.0;
/// Calls of the syscall named, at least: made over and over, once per small
/// unit of work, not once per batch (a program that flushes once at its
/// end, however long that flush, has batched already).
pub const MIN_CALLS: f64 = 100.0;

/// One thread's uninterruptible sleep inside syscalls: its time by
/// syscall, and its stacks.
struct IoThread<'a> {
    tid: u32,
    comm: &'a str,
    ns: u64,
    by_call: &'a BTreeMap<String, u64>,
    stacks: &'a [crate::report::TimedStack],
}

fn io_threads(r: &Report) -> Vec<IoThread<'_>> {
    r.offcpu
        .iter()
        .flat_map(|t| {
            t.reasons
                .iter()
                .filter(|x| x.reason == OffCpuReason::Io)
                .map(move |x| IoThread {
                    tid: t.tid,
                    comm: &t.comm,
                    ns: x.syscalls.values().sum(),
                    by_call: &x.syscalls,
                    stacks: &x.stacks,
                })
        })
        .collect()
}

/// Threads that were on a CPU or in uninterruptible calls for a share of
/// the run (the severity's denominator).
fn active_threads(r: &Report, io: &[IoThread<'_>]) -> usize {
    busy_threads(r).max(
        io.iter()
            .filter(|t| t.ns as f64 >= wall_ns(r) * ACTIVE_SHARE)
            .count(),
    )
}

/// Calls that make data durable: their cost is per call, whatever it
/// carries.
const FLUSHES: &[&str] = &[
    "fsync",
    "fdatasync",
    "sync_file_range",
    "msync",
    "syncfs",
    "sync",
];
/// Calls that read: their wait is the device's time to find the data.
const READS: &[&str] = &["read", "pread64", "readv", "preadv", "preadv2"];

/// The general levers for waits in `name`, by what the call does.
fn levers(name: &str) -> String {
    if FLUSHES.contains(&name) {
        format!(
            "Each {name} waits for the device before the thread goes on, so work done one \
             small unit at a time pays the device's latency once per unit. Make many units \
             durable together: one transaction or one flush per batch (group commit), append \
             them to a log flushed once per batch, or flush in the background where a unit \
             need not be on disk before the next one starts."
        )
    } else if READS.contains(&name) {
        format!(
            "Each {name} waits for the device to fetch data that is not in memory, one \
             request at a time. Read larger blocks or ask for more at once (readahead, \
             posix_fadvise WILLNEED, io_uring or several requests in flight), keep the data \
             that is read again in memory, or put it on a faster device."
        )
    } else {
        format!(
            "Each {name} waits for the file system to make its change durable (a journal \
             commit: file creation, removal, renaming, writes to a file opened O_SYNC or \
             O_DSYNC). Make fewer such changes: reuse files instead of creating and removing \
             one per unit, write through the page cache and flush once per batch, or keep \
             short-lived files on a tmpfs."
        )
    }
}

pub fn check(r: &Report) -> Vec<Finding> {
    let wall = wall_ns(r);
    let threads = io_threads(r);
    let Some(worst) = threads.iter().max_by_key(|t| t.ns) else {
        return vec![];
    };
    let heavy: Vec<&IoThread<'_>> = threads
        .iter()
        .filter(|t| ratio(t.ns as f64, wall) >= MIN_THREAD_IO_SHARE)
        .collect();
    // No thread over the share (the worst one is under it): nothing to say.
    if heavy.is_empty() {
        return vec![];
    }
    // The syscall where the heavy threads slept most.
    let mut by_call: BTreeMap<&str, u64> = BTreeMap::new();
    for t in &heavy {
        for (name, ns) in t.by_call {
            *by_call.entry(name).or_default() += ns;
        }
    }
    let Some((&name, _)) = by_call
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
    else {
        return vec![];
    };
    let Some(call) = r.syscalls.iter().find(|s| s.name == name) else {
        return vec![];
    };
    let returned = call.calls.saturating_sub(call.unfinished);
    let mean_ns = ratio(call.total_ns as f64, returned as f64);
    let io_ns: u64 = heavy.iter().map(|t| t.ns).sum();
    let workers = active_threads(r, &threads).max(1);
    let frames = worst
        .stacks
        .iter()
        .find(|s| s.frames.iter().any(|f| f.contains(name)))
        .or(worst.stacks.first())
        .map(|s| s.frames.clone())
        .unwrap_or_default();
    let at = call_site(&frames)
        .map(|c| format!(" in {c}"))
        .unwrap_or_default();
    let others: Vec<String> = by_call
        .iter()
        .filter(|(n, _)| **n != name)
        .map(|(n, ns)| format!("{n} {}", duration(*ns)))
        .collect();
    let also = if others.is_empty() {
        String::new()
    } else {
        format!(" (also waiting for the disk: {})", others.join(", "))
    };
    let share = ratio(worst.ns as f64, wall);
    let lib_fix = known(name, &frames).map(|k| format!(" {}", k.fix));
    let expected_gain = gain(r, &heavy, name, &frames);
    Draft {
        id: ID,
        title: format!(
            "{name}{at} waits for the disk: {} calls, {} each on average, {:.0}% of {}'s time{also}",
            short(call.calls as f64),
            duration(mean_ns as u64),
            share * 100.0,
            worst.comm
        ),
        severity: ratio(io_ns as f64, wall * workers as f64),
        evidence: vec![
            at_least("thread_io_share", share, MIN_THREAD_IO_SHARE),
            at_least("mean_ns", mean_ns, MIN_MEAN_NS),
            at_least("calls", call.calls as f64, MIN_CALLS),
        ],
        culprit: Culprit {
            kind: CulpritKind::Syscall,
            name: name.to_string(),
            frames,
        },
        remedy: format!("{}{}", levers(name), lib_fix.unwrap_or_default()),
        expected_gain,
    }
    .fire()
    .into_iter()
    .collect()
}

/// The calls batched, one for many: the heavy threads' waits in them, and
/// the CPU their path takes (a flush's own kernel work is most of a
/// server's system time).
fn gain(r: &Report, heavy: &[&IoThread<'_>], name: &str, frames: &[Frame]) -> ExpectedGain {
    let calls = super::gain::fixes::calls(
        r,
        &[(name, frames)],
        0.0,
        format!("were the threads' {name} calls batched (one wait for many)"),
    );
    // At most, the threads' other calls that wait for the device go with
    // it, their waits and their kernel work (a commit's journal created
    // and deleted around its flush).
    let others: BTreeSet<&str> = heavy
        .iter()
        .flat_map(|t| t.by_call.keys().map(String::as_str))
        .filter(|c| *c != name)
        .collect();
    let with_others: Vec<(&str, &[Frame])> = std::iter::once((name, frames))
        .chain(others.iter().map(|c| (*c, &[][..])))
        .collect();
    let all = super::gain::Fix {
        waits: heavy
            .iter()
            .map(|t| (t.tid, t.by_call.values().sum::<u64>() as f64))
            .collect(),
        wait_reasons: vec![OffCpuReason::Io],
        ..super::gain::fixes::calls(r, &with_others, 0.0, String::new())
    };
    super::gain::predict(
        r,
        &super::gain::Fix {
            waits: heavy
                .iter()
                .map(|t| (t.tid, t.by_call.get(name).copied().unwrap_or(0) as f64))
                .collect(),
            wait_reasons: vec![OffCpuReason::Io],
            at_most: Some(Box::new(all)),
            ..calls
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::{base, fired, syscall_report};
    use crate::report::{OffCpuReasonReport, OffCpuThread, TimedStack};

    const WALL: f64 = 1e9;

    /// One thread asleep uninterruptibly in `fdatasync` for `share` of the
    /// run, over `calls` calls of `mean_ns` each.
    fn flushing(share: f64, calls: f64, mean_ns: f64) -> Report {
        let mut r = base();
        let ns = (share * WALL) as u64;
        let frames: Vec<crate::frame::Frame> = vec![
            "__GI_fdatasync (fdatasync.c:28)".into(),
            "sqlite3PagerCommitPhaseOne (libsqlite3.so.0)".into(),
            "main (app.c:9)".into(),
        ];
        r.offcpu = vec![OffCpuThread {
            tid: 7,
            pid: 7,
            comm: "app".into(),
            total_ns: ns,
            wanted_ns: 0,
            reasons: vec![OffCpuReasonReport {
                reason: OffCpuReason::Io,
                ns,
                count: calls as u64,
                syscalls: [("fdatasync".to_string(), ns)].into(),
                stacks: vec![TimedStack {
                    frames,
                    ns,
                    samples: 10,
                    estimated: true,
                }],
            }],
        }];
        r.syscalls = vec![syscall_report("fdatasync", calls as u64, mean_ns)];
        r
    }

    fn fires(r: &Report) -> bool {
        fired(check, r)
    }

    #[test]
    fn io_synchronous_thresholds_issue_37() {
        let (up, down) = (1.02, 0.98);
        let ok = (MIN_THREAD_IO_SHARE * up, MIN_CALLS * up, MIN_MEAN_NS * up);
        assert!(fires(&flushing(ok.0, ok.1, ok.2)));
        assert!(!fires(&flushing(MIN_THREAD_IO_SHARE * down, ok.1, ok.2)));
        assert!(!fires(&flushing(ok.0, MIN_CALLS * down, ok.2)));
        assert!(!fires(&flushing(ok.0, ok.1, MIN_MEAN_NS * down)));
    }

    #[test]
    fn a_known_librarys_flushes_get_its_own_setting() {
        let f = &check(&flushing(0.6, 8000.0, 300_000.0))[0];
        assert_eq!(f.culprit.name, "fdatasync");
        assert!(
            f.title
                .starts_with("fdatasync in sqlite3PagerCommitPhaseOne waits for the disk"),
            "{}",
            f.title
        );
        assert!(f.remedy.contains("group commit"), "{}", f.remedy);
        assert!(f.remedy.contains("BEGIN ... COMMIT"), "{}", f.remedy);
        // Time in calls that wait for events is not this rule's.
        let mut r = flushing(0.6, 8000.0, 300_000.0);
        r.offcpu[0].reasons[0].reason = OffCpuReason::BlockingSyscall;
        assert!(check(&r).is_empty());
    }

    /// A live sqlite-commits run (issue 38's CI of 2026-12-02): the
    /// commits' own writes, through SQLite's pager, were many enough for
    /// `syscall.known-pattern` to name SQLite's fix first, ahead of the
    /// wait for the disk that is their cost. A pattern this rule gives the
    /// fix of is left to it.
    #[test]
    fn a_pattern_whose_flushes_are_waited_for_is_this_rules() {
        let with_writes = |r: &mut Report| {
            let mut w = syscall_report("pwrite64", 100_000, 2_000.0);
            w.callsites = vec![crate::report::Callsite {
                frames: vec![
                    "__libc_pwrite64 (pwrite64.c:25)".into(),
                    "sqlite3PagerCommitPhaseOne (libsqlite3.so.0)".into(),
                    "main (app.c:9)".into(),
                ],
                calls: 100_000,
                calls_estimated: true,
                samples: 10,
            }];
            r.syscalls.push(w);
            r.summary.syscalls = 200_000;
            r.summary.sys_ns = 600_000_000;
            r.summary.user_ns = 400_000_000;
        };
        let mut r = flushing(0.6, 8000.0, 300_000.0);
        with_writes(&mut r);
        assert!(fires(&r));
        assert!(super::super::known_pattern::check(&r).is_empty());
        // Were the flushes not waited for, the pattern is named.
        r.offcpu[0].reasons[0].reason = OffCpuReason::BlockingSyscall;
        assert!(!fires(&r));
        let f = &super::super::known_pattern::check(&r)[0];
        assert!(f.title.starts_with("SQLite commits"), "{}", f.title);
    }

    /// Issue 39 (sqlite-commits): a commit's flushes batched take, at
    /// most, its other waits for the device (the journal deleted) and
    /// their kernel work with them. One thread, a 1 s run: 0.4 s of CPU
    /// (100 samples: 30 in fdatasync's kernel path, 20 in unlink's, 50 its
    /// own), 0.4 s in fdatasync, 0.1 s in unlink. The flushes alone leave
    /// 0.28 s of CPU and the 0.1 s of unlink (62% at best); with unlink's
    /// wait and kernel work, 0.2 s of CPU (80%).
    #[test]
    fn a_batched_flush_reaches_at_most_the_commits_other_device_calls() {
        let mut r = flushing(0.4, 8000.0, 300_000.0);
        r.duration_ns = WALL as u64;
        r.threads = vec![crate::findings::tests::thread_report(7, 400_000_000)];
        let io = &mut r.offcpu[0].reasons[0];
        io.ns += 100_000_000;
        io.syscalls.insert("unlink".into(), 100_000_000);
        r.offcpu[0].total_ns = io.ns;
        let stack = |frames: &[&str], count: u64| crate::report::FoldedStack {
            frames: frames.iter().map(|f| (*f).into()).collect(),
            count,
            threads: vec![(7, count)],
        };
        r.cpu_samples.folded = vec![
            stack(
                &[
                    "main (app.c:9)",
                    "sqlite3PagerCommitPhaseOne (libsqlite3.so.0)",
                    "__GI_fdatasync (fdatasync.c:28)",
                    "__x64_sys_fdatasync [k]",
                ],
                30,
            ),
            stack(
                &[
                    "main (app.c:9)",
                    "unlink (unlink.c:1)",
                    "__x64_sys_unlink [k]",
                ],
                20,
            ),
            stack(&["main (app.c:9)", "insert (app.c:5)"], 50),
        ];
        let f = &check(&r)[0];
        let g = &f.expected_gain;
        let [low, high] = g.range.unwrap();
        assert!((high - 0.8).abs() < 1e-6, "{g:?}");
        assert!(low <= g.share && g.share < 0.62, "{g:?}");
    }
}
