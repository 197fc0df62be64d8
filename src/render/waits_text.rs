//! The terminal report's wait sites: where the threads wait, grouped by the
//! program's own code, each with its class and the evidence for it, and
//! what ended the waits. Contention first.

use std::fmt::Write;

use super::findings_text::wrapped;
use super::text::{count, duration, stack};
use crate::analyze::waits::{displays, release_site};
use crate::report::{Release, Report, WaitClass};

const SITES_SHOWN: usize = 8;
/// Sites whose stacks and release side are shown.
const SITES_WITH_STACKS: usize = 2;
/// Contended sites keeping at least this many threads waiting on average
/// get their evidence shown too.
const MIN_EXPLAINED_THREADS: f64 = 0.05;

fn release(r: &Release, runtime_lock: Option<&str>) -> String {
    let who = if r.from_waiters {
        "the waiters themselves".to_string()
    } else if r.in_target {
        format!("{} other thread(s) of the target", r.wakers)
    } else {
        format!("{} thread(s) outside it", r.wakers)
    };
    let site = release_site(r, runtime_lock).map_or_else(String::new, |s| format!(" in {s}"));
    format!(
        "{} by {who}{site}: {} waits, {}",
        r.mechanism,
        count(r.count),
        duration(r.wait_ns)
    )
}

/// `s` cut to `width` characters, with `…` where it was cut.
pub(crate) fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut out: String = s.chars().take(width - 1).collect();
    out.push('…');
    out
}

pub(crate) fn waits(r: &Report, out: &mut String) {
    let shown: Vec<_> = r
        .waits
        .iter()
        .filter(|s| s.wait_ns > 0 || s.futile > 0)
        .collect();
    if shown.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{:<44} {:<17} {:>9} {:>9} {:>9} {:>8} {:>7} {:>10}",
        "WAIT SITES (where threads wait)",
        "CLASS",
        "SLEEPS",
        "FUTILE",
        "TIMEOUTS",
        "WAITERS",
        "AVG",
        "WAITED"
    );
    let names = displays(&shown);
    for (i, s) in shown.iter().take(SITES_SHOWN).enumerate() {
        let waiters = if s.processes > 1 {
            format!("{}/{}p", s.waiters, s.processes)
        } else {
            s.waiters.to_string()
        };
        let _ = writeln!(
            out,
            "{:<44} {:<17} {:>9} {:>9} {:>9} {:>8} {:>7.2} {:>10}",
            fit(&names[i], 44),
            s.class.name(),
            count(s.waits),
            count(s.futile),
            count(s.timed_out),
            waiters,
            s.waiting_threads,
            duration(s.wait_ns)
        );
        let important = i < SITES_WITH_STACKS
            || (s.class == WaitClass::Contention && s.waiting_threads >= MIN_EXPLAINED_THREADS);
        if !important {
            continue;
        }
        wrapped(out, "    why: ", &s.evidence.join("; "));
        if let Some(top) = s.releases.first() {
            wrapped(
                out,
                "    released: ",
                &release(top, s.runtime_lock.as_deref()),
            );
        }
        if i < SITES_WITH_STACKS {
            if let Some(st) = s.stacks.first() {
                stack(out, "waits at", &st.frames);
            }
            if let Some(st) = s.releases.first().and_then(|r| r.stacks.first()) {
                stack(out, "released at", &st.frames);
            }
        }
    }
    if shown.len() > SITES_SHOWN {
        let _ = writeln!(
            out,
            "... {} more wait sites in the JSON report",
            shown.len() - SITES_SHOWN
        );
    }
}
