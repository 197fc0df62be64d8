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
    let lib = known(name, &frames);
    let lib_fix = lib.map(|k| format!(" {}", k.fix));
    let expected_gain = gain(r, &heavy, name, &frames, lib);
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
fn gain(
    r: &Report,
    heavy: &[&IoThread<'_>],
    name: &str,
    frames: &[Frame],
    lib: Option<&crate::runtime::KnownPattern>,
) -> ExpectedGain {
    let calls = super::gain::fixes::calls(
        r,
        &[(name, frames)],
        0.0,
        format!("were the threads' {name} calls batched (one wait for many)"),
    );
    // At most, the threads' other calls that wait for the device go with
    // it, their waits and their kernel work (a commit's journal created
    // and deleted around its flush), and where a library's known pattern
    // names the commit the flush is made in (SQLite's), all of its path.
    let others: BTreeSet<&str> = heavy
        .iter()
        .flat_map(|t| t.by_call.keys().map(String::as_str))
        .filter(|c| *c != name)
        .collect();
    let with_others: Vec<(&str, &[Frame])> = std::iter::once((name, frames))
        .chain(others.iter().map(|c| (*c, &[][..])))
        .collect();
    // A thread that sleeps on the device comes back to caches others
    // used meanwhile: what its calls cost the code around them goes too
    // (`fixes::with_aftermath`).
    use super::gain::fixes;
    let cpu = match lib {
        Some(p) => {
            fixes::cpu_with_aftermath(r, fixes::calls_or_pattern(&with_others, p), String::new())
        }
        None => fixes::cpu_with_aftermath(r, fixes::calls_path(&with_others), String::new()),
    };
    let all = super::gain::Fix {
        waits: heavy
            .iter()
            .map(|t| (t.tid, t.by_call.values().sum::<u64>() as f64))
            .collect(),
        wait_reasons: vec![OffCpuReason::Io],
        ..cpu
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
#[path = "io_synchronous_tests.rs"]
mod tests;
