//! `kerntax top` when its output is not a terminal: like `top -b`, one
//! plain frame per window (or one JSON object per line with `--json`), for
//! scripts, logs and agents. The same `Snapshot` the screen draws.

use std::fmt::Write;

use super::snapshot::Snapshot;
use super::view::View;
use crate::render::text::short;

/// Rows printed at most per frame.
pub const FRAME_ROWS: usize = 40;

/// A remedy's first sentence: a frame has a line per finding (the whole
/// remedy is in the screen's detail and the JSON lines).
fn first_sentence(text: &str) -> &str {
    match text.find(". ") {
        Some(i) => &text[..=i],
        None => text.lines().next().unwrap_or(""),
    }
}

/// One window as plain text, ending with a blank line.
pub fn frame(snap: &Snapshot, view: &View) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kerntax top: {} at {:.1} s, window {:.1} s: CPU {:.2} of {}, {} syscalls/s, \
         {} voluntary and {} involuntary switches/s, {} lost",
        snap.target,
        snap.at_s,
        snap.window_s,
        snap.cpus_used,
        snap.cpus,
        short(snap.syscalls_per_s),
        short(snap.voluntary_switches_per_s),
        short(snap.involuntary_switches_per_s),
        snap.lost
    );
    if let Some(why) = &snap.ended {
        let _ = writeln!(out, "{why}");
    }
    if snap.findings.is_empty() {
        let _ = writeln!(out, "findings: none over this window");
    }
    for f in &snap.findings {
        let _ = writeln!(
            out,
            "finding: {:.0}% {}; remedy: {}",
            f.severity * 100.0,
            super::snapshot::finding_line(f),
            first_sentence(&f.remedy)
        );
    }
    let id = if view.threads { "TID" } else { "PID" };
    let rows = view.rows(snap);
    let _ = writeln!(
        out,
        "{id:>8} {:<15} {:<5} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>8} {:>8} {:>8}  WAIT SITE",
        "COMM",
        "STATE",
        "CPU%",
        "RUNQ%",
        "LOCK%",
        "WORK%",
        "IO%",
        "POLL%",
        "SYSC/s",
        "VCSW/s",
        "ICSW/s"
    );
    for r in rows.iter().take(FRAME_ROWS) {
        let [cpu, runq, lock, work, io, poll] = r.shares.percents();
        let _ = writeln!(
            out,
            "{:>8} {:<15} {:<5} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>8} {:>8} {:>8}  {}",
            r.tid.unwrap_or(r.pid),
            r.comm,
            r.state,
            cpu,
            runq,
            lock,
            work,
            io,
            poll,
            short(r.syscalls_per_s),
            short(r.voluntary_switches_per_s),
            short(r.involuntary_switches_per_s),
            r.wait_site.as_deref().unwrap_or("-")
        );
    }
    if rows.len() > FRAME_ROWS {
        let _ = writeln!(out, "... {} more", rows.len() - FRAME_ROWS);
    }
    out.push('\n');
    out
}

/// One window as one line of JSON.
pub fn json_line(snap: &Snapshot) -> String {
    serde_json::to_string(snap).expect("a snapshot always serializes") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::assert_golden;
    use crate::top::fixture::lock_story;

    #[test]
    fn golden_top_plain_frame() {
        assert_golden("top_frame.txt", &frame(&lock_story(), &View::default()));
    }

    #[test]
    fn json_lines_read_back_as_the_snapshot() {
        let snap = lock_story();
        let line = json_line(&snap);
        assert_eq!(line.matches('\n').count(), 1);
        let back: Snapshot = serde_json::from_str(&line).unwrap();
        assert_eq!(back, snap);
    }
}
