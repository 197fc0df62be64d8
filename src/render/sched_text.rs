//! The terminal report's off-CPU and wake-up sections.

use std::fmt::Write;

use super::text::{count, duration, stack};
use crate::report::{OffCpuReason, OffCpuThread, Report};

const THREADS_SHOWN: usize = 8;
const THREADS_WITH_STACKS: usize = 2;
const WAKEUPS_SHOWN: usize = 8;

const COLUMNS: [(OffCpuReason, &str); 8] = [
    (OffCpuReason::Lock, "LOCK"),
    (OffCpuReason::WaitingForWork, "WORK"),
    (OffCpuReason::IoMultiplexing, "POLL"),
    (OffCpuReason::BlockingSyscall, "SYSCALL"),
    (OffCpuReason::Io, "IO"),
    (OffCpuReason::Sleep, "SLEEP"),
    (OffCpuReason::Involuntary, "INVOL"),
    (OffCpuReason::Other, "OTHER"),
];

fn cell(t: &OffCpuThread, r: OffCpuReason) -> String {
    t.reasons
        .iter()
        .find(|x| x.reason == r)
        .map_or_else(|| "-".to_string(), |x| duration(x.ns))
}

pub(crate) fn offcpu(r: &Report, out: &mut String) {
    let shown: Vec<&OffCpuThread> = r
        .offcpu
        .iter()
        .filter(|t| t.total_ns > 0)
        .take(THREADS_SHOWN)
        .collect();
    if shown.is_empty() {
        return;
    }
    let _ = write!(out, "\n{:<28} {:>10}", "OFF-CPU", "TOTAL");
    for (_, name) in COLUMNS {
        let _ = write!(out, " {name:>10}");
    }
    out.push('\n');
    for (i, t) in shown.iter().enumerate() {
        let who = format!("{} {}", t.comm, t.tid);
        let _ = write!(out, "{who:<28} {:>10}", duration(t.total_ns));
        for (reason, _) in COLUMNS {
            let _ = write!(out, " {:>10}", cell(t, reason));
        }
        out.push('\n');
        if i < THREADS_WITH_STACKS
            && let Some(top) = t.reasons.iter().find(|x| !x.stacks.is_empty())
        {
            stack(out, top.reason.name(), &top.stacks[0].frames);
        }
    }
    if r.offcpu.len() > THREADS_SHOWN {
        let _ = writeln!(
            out,
            "... {} more threads in the JSON report",
            r.offcpu.len() - THREADS_SHOWN
        );
    }
}

pub(crate) fn wakeups(r: &Report, out: &mut String) {
    if r.wakeups.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "
{:<44} {:>9} {:>11}  HOW",
        "WAKE-UPS (waker -> woken)", "COUNT", "ENDED WAIT"
    );
    for w in r.wakeups.iter().take(WAKEUPS_SHOWN) {
        let edge = format!(
            "{} {} -> {} {}",
            w.waker_comm, w.waker_tid, w.woken_comm, w.woken_tid
        );
        let _ = writeln!(
            out,
            "{edge:<44} {:>9} {:>11}  {}",
            count(w.count),
            duration(w.wait_ns),
            w.mechanism
        );
    }
    if let Some(b) = r.blockers.first() {
        let _ = writeln!(
            out,
            "most waited on: {} {} (its wake-ups ended {} of waiting by {} threads)",
            b.comm,
            b.tid,
            duration(b.wait_ns),
            b.threads_woken
        );
    }
}

pub(crate) fn polls(r: &Report, out: &mut String) {
    if r.polls.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{:<28} {:>9} {:>9} {:>9} {:>10} {:>7} {:>9} {:>10}",
        "I/O MULTIPLEXING",
        "CALLS",
        "CALLS/S",
        "FDS/CALL",
        "READY/CALL",
        "READY",
        "TIMEOUTS",
        "SYS CPU"
    );
    for p in r.polls.iter().take(WAKEUPS_SHOWN) {
        let ready = p
            .ready_ratio
            .map_or_else(|| "-".to_string(), |x| format!("{:.1}%", x * 100.0));
        let _ = writeln!(
            out,
            "{:<28} {:>9} {:>9} {:>9.1} {:>10.1} {:>7} {:>9} {:>10}",
            format!("{} (pid {})", p.syscall, p.pid),
            count(p.calls),
            super::text::rate(p.calls_per_s),
            p.fds_per_call,
            p.ready_per_call,
            ready,
            count(p.timeouts),
            duration(p.cpu_ns)
        );
        if let Some(site) = p.callsites.first() {
            stack(out, "at", &site.frames);
        }
    }
}

const FUNCTIONS_SHOWN: usize = 10;

pub(crate) fn cpu(r: &Report, out: &mut String) {
    let c = &r.cpu_samples;
    if c.samples == 0 {
        return;
    }
    let pct = |n: u64| n as f64 * 100.0 / c.samples as f64;
    let _ = writeln!(
        out,
        "\nON-CPU: {} Hz, {} samples, {:.0}% user, {:.0}% kernel",
        c.frequency_hz,
        count(c.samples),
        pct(c.user_samples),
        pct(c.kernel_samples)
    );
    let _ = writeln!(
        out,
        "{:<60} {:>7} {:>7} {:>7}",
        "FUNCTION", "SELF", "KERNEL", "TOTAL"
    );
    for f in c.functions.iter().take(FUNCTIONS_SHOWN) {
        let _ = writeln!(
            out,
            "{:<60} {:>6.1}% {:>6.1}% {:>6.1}%",
            super::waits_text::fit(&crate::frame::short_function(&f.name), 60),
            pct(f.self_user + f.self_kernel),
            pct(f.self_kernel),
            pct(f.total)
        );
    }
    let s = &r.spin;
    if s.spin_samples > 0 {
        let _ = writeln!(
            out,
            "spinning: {:.1}% of on-CPU samples at spin-wait loops",
            s.spin_share * 100.0
        );
        if let Some(top) = s.spin_stacks.first() {
            let frames: Vec<crate::frame::Frame> = top.frames.iter().rev().cloned().collect();
            stack(out, "spins at", &frames);
        }
    }
    for y in s.yields.iter().take(3) {
        let _ = writeln!(
            out,
            "sched_yield: {} {} called it {} times ({})",
            y.comm,
            y.tid,
            count(y.calls),
            super::text::rate(y.calls_per_s)
        );
    }
}

/// Rows the terminal timeline shows at most (intervals are merged to fit).
const TIMELINE_ROWS: usize = 10;

pub(crate) fn timeline(r: &Report, out: &mut String) {
    let b = &r.timeline.buckets;
    if b.len() < 2 {
        return;
    }
    let per_row = b.len().div_ceil(TIMELINE_ROWS);
    let _ = writeln!(
        out,
        "\n{:<17} {:>9} {:>9} {:>12} {:>12} {:>12} {:>11}",
        "TIMELINE", "USER CPU", "SYS CPU", "VOL SW/S", "INVOL SW/S", "SYSCALLS/S", "LOCK WAIT"
    );
    for rows in b.chunks(per_row) {
        let d: u64 = rows.iter().map(|x| x.duration_ns).sum::<u64>().max(1);
        let sum = |f: fn(&crate::report::TimelineBucket) -> u64| rows.iter().map(f).sum::<u64>();
        let per_s = |n: u64| super::text::rate(n as f64 * 1e9 / d as f64);
        let pct = |ns: u64| format!("{:.0}%", ns as f64 * 100.0 / d as f64);
        let start = rows[0].t_ns as f64 / 1e9;
        let end = (rows[rows.len() - 1].t_ns + rows[rows.len() - 1].duration_ns) as f64 / 1e9;
        let _ = writeln!(
            out,
            "{:<17} {:>9} {:>9} {:>12} {:>12} {:>12} {:>11}",
            format!("{start:.1}-{end:.1} s"),
            pct(sum(|x| x.user_ns)),
            pct(sum(|x| x.sys_ns)),
            per_s(sum(|x| x.voluntary_switches)),
            per_s(sum(|x| x.involuntary_switches)),
            per_s(sum(|x| x.syscalls)),
            duration(sum(|x| x.lock_wait_ns))
        );
    }
}
