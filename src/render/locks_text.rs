//! The terminal report's lock sections: contention ranked by what it cost,
//! then what threads waited on for work (condition variables, joins), apart.

use std::fmt::Write;

use super::text::{count, duration, rate, share, stack};
use crate::report::{LockKind, LockReport, Report};

/// Locks listed, and how many of them get their stacks shown.
const LOCKS_SHOWN: usize = 10;
const LOCKS_WITH_STACKS: usize = 3;
const STACKS_PER_SIDE: usize = 2;

fn title(l: &LockReport) -> String {
    let what = match (&l.symbol, l.semid, &l.role, &l.address) {
        (Some(sym), _, _, _) => sym.clone(),
        (None, Some(semid), _, _) => format!("semid {semid} sem {}", l.semnum.unwrap_or(0)),
        // A runtime lock's role is named by the lock itself.
        (None, None, Some(role), _)
            if l.runtime_lock.as_ref().is_some_and(|r| role.starts_with(r)) =>
        {
            role.clone()
        }
        (None, None, Some(role), _) => format!("in {role}"),
        (None, None, None, Some(addr)) => addr.clone(),
        (None, None, None, None) => "?".to_string(),
    };
    match &l.mapping {
        Some(m) => format!("{what} ({}, {m})", l.kind.name()),
        None => format!("{what} ({})", l.kind.name()),
    }
}

/// A second stack is shown only with at least this share of the waits.
const MIN_STACK_SHARE: f64 = 0.10;

fn stacks(l: &LockReport, out: &mut String) {
    for (i, s) in l.waiter_stacks.iter().take(STACKS_PER_SIDE).enumerate() {
        if i > 0 && (s.count as f64) < l.waits as f64 * MIN_STACK_SHARE {
            break;
        }
        let label = format!("waiters {}", share(s.count, l.waits, s.estimated));
        stack(out, &label, &s.frames);
    }
    for s in l.waker_stacks.iter().take(1) {
        let label = format!("wakers {}", share(s.count, l.wakes, s.estimated));
        stack(out, &label, &s.frames);
    }
}

pub(crate) fn locks(r: &Report, out: &mut String) {
    let contended: Vec<&LockReport> = r
        .locks
        .iter()
        .filter(|l| l.contention && l.waits > 0)
        .collect();
    if !contended.is_empty() {
        let _ = writeln!(
            out,
            "\n{:<40} {:>9} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>7}",
            "LOCKS", "WAITS", "BLOCKED", "WAITED", "MAX", "WAKES", "FUTILE", "ON-CPU", "THREADS"
        );
        for (i, l) in contended.iter().take(LOCKS_SHOWN).enumerate() {
            let _ = writeln!(
                out,
                "{:<40} {:>9} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>7}",
                title(l),
                count(l.waits),
                count(l.blocked),
                duration(l.wait_ns),
                duration(l.max_wait_ns),
                rate(l.wakes_per_s),
                rate(l.futile_per_s),
                duration(l.cpu_ns),
                l.threads
            );
            if i < LOCKS_WITH_STACKS {
                stacks(l, out);
            }
        }
        if contended.len() > LOCKS_SHOWN {
            let _ = writeln!(
                out,
                "... {} more locks in the JSON report",
                contended.len() - LOCKS_SHOWN
            );
        }
    }
    waiting(r, out);
}

/// Condition variables and joins: where threads waited for work.
fn waiting(r: &Report, out: &mut String) {
    let idle: Vec<&LockReport> = r
        .locks
        .iter()
        .filter(|l| !l.contention && l.waits > 0)
        .collect();
    if idle.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nWAITING FOR WORK (not contention)         {:>9} {:>10} {:>7}",
        "WAITS", "WAITED", "THREADS"
    );
    let (joins, conds): (Vec<&LockReport>, Vec<&LockReport>) =
        idle.iter().partition(|l| l.kind == LockKind::ThreadJoin);
    for l in conds.iter().take(LOCKS_SHOWN) {
        let _ = writeln!(
            out,
            "{:<40} {:>9} {:>10} {:>7}",
            title(l),
            count(l.waits),
            duration(l.wait_ns),
            l.threads
        );
    }
    if !joins.is_empty() {
        let waits: u64 = joins.iter().map(|l| l.waits).sum();
        let ns: u64 = joins.iter().map(|l| l.wait_ns).sum();
        let label = format!("{} thread joins (pthread_join)", joins.len());
        let _ = writeln!(out, "{label:<40} {:>9} {:>10}", count(waits), duration(ns));
    }
}
