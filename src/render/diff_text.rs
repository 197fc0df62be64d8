//! `kerntax diff` in the terminal. Reads only the `Diff`.

use std::fmt::Write;

use super::text::{count, duration, rate};
use crate::diff::{Delta, Diff, FindingRef, Side};

/// Syscalls and locks shown; the JSON has them all.
const ROWS: usize = 12;

fn change(d: &Delta) -> String {
    match d.change {
        Some(c) => format!("{:+.0}%", c * 100.0),
        None if d.after != 0.0 => "new".into(),
        None => "-".into(),
    }
}

fn who(s: &Side) -> String {
    match &s.command {
        Some(argv) => argv.join(" "),
        None => format!("pid {}", s.target_pid),
    }
}

fn ns(x: f64) -> String {
    duration(x.max(0.0) as u64)
}

fn figure(d: &Delta) -> (&'static str, fn(f64) -> String) {
    let pct: fn(f64) -> String = |x| format!("{x:.1}%");
    let share: fn(f64) -> String = |x| format!("{:.1}%", x * 100.0);
    let int: fn(f64) -> String = |x| count(x.max(0.0) as u64);
    match d.metric.as_str() {
        "wall_ns" => ("wall time", ns),
        "user_ns" => ("user CPU", ns),
        "sys_ns" => ("system CPU", ns),
        "sys_percent" => ("system CPU share", pct),
        "voluntary_switches_per_s" => ("voluntary switches", rate),
        "involuntary_switches_per_s" => ("involuntary switches", rate),
        "syscalls" => ("syscalls", int),
        "syscalls_per_s" => ("syscall rate", rate),
        "lock_wait_ns" => ("lock wait", ns),
        "spin_share" => ("CPU spinning", share),
        _ => ("?", |x| format!("{x}")),
    }
}

fn finding_line(out: &mut String, tag: &str, f: &FindingRef) {
    let _ = writeln!(out, "  {tag:<10} {:<24} {}  [{}]", f.id, f.title, f.culprit);
}

pub fn render(d: &Diff) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kerntax diff\n  before: {}\n  after:  {}\n",
        who(&d.before),
        who(&d.after)
    );
    let _ = writeln!(
        out,
        "{:<24} {:>14} {:>14} {:>8}",
        "", "BEFORE", "AFTER", "CHANGE"
    );
    for m in &d.metrics {
        let (name, show) = figure(m);
        let _ = writeln!(
            out,
            "{name:<24} {:>14} {:>14} {:>8}",
            show(m.before),
            show(m.after),
            change(m)
        );
    }
    if !d.syscalls.is_empty() {
        let _ = writeln!(
            out,
            "\n{:<24} {:>14} {:>14} {:>8} {:>12} {:>12} {:>8}",
            "SYSCALL",
            "CALLS BEFORE",
            "CALLS AFTER",
            "CHANGE",
            "TIME BEFORE",
            "TIME AFTER",
            "CHANGE"
        );
        for s in d.syscalls.iter().take(ROWS) {
            let _ = writeln!(
                out,
                "{:<24} {:>14} {:>14} {:>8} {:>12} {:>12} {:>8}",
                s.name,
                count(s.calls.before as u64),
                count(s.calls.after as u64),
                change(&s.calls),
                ns(s.total_ns.before),
                ns(s.total_ns.after),
                change(&s.total_ns)
            );
        }
    }
    if !d.locks.is_empty() {
        let _ = writeln!(
            out,
            "\n{:<40} {:>12} {:>12} {:>8}",
            "LOCK", "WAIT BEFORE", "WAIT AFTER", "CHANGE"
        );
        for l in d.locks.iter().take(ROWS) {
            let _ = writeln!(
                out,
                "{:<40} {:>12} {:>12} {:>8}",
                l.lock,
                ns(l.wait_ns.before),
                ns(l.wait_ns.after),
                change(&l.wait_ns)
            );
        }
    }
    let f = &d.findings;
    let _ = writeln!(out, "\nFINDINGS");
    if f.resolved.is_empty() && f.new.is_empty() && f.remaining.is_empty() {
        let _ = writeln!(out, "  none on either side");
    }
    for x in &f.resolved {
        finding_line(&mut out, "resolved", x);
    }
    for x in &f.remaining {
        finding_line(&mut out, "remaining", &x.after);
    }
    for x in &f.new {
        finding_line(&mut out, "new", x);
    }
    out
}
