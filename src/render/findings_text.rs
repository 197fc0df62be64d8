//! The findings section: what is wrong, the figures that say so, where,
//! what to do, and what it can win. First in the report, since it is what
//! a reader came for.

use std::fmt::Write;

use super::text::{duration, stack};
use crate::report::{Bound, Evidence, Finding, Report};

const WIDTH: usize = 96;

/// A figure as a reader takes it: shares as percentages, big numbers short.
fn figure(metric: &str, x: f64) -> String {
    if metric.contains("share") || metric.ends_with("ratio") {
        format!("{:.1}%", x * 100.0)
    } else if metric.ends_with("_ns") {
        duration(x.max(0.0) as u64)
    } else if x.abs() >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x.abs() >= 1e4 {
        format!("{:.1} k", x / 1e3)
    } else if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

fn evidence(e: &Evidence) -> String {
    let op = match e.bound {
        Bound::Min => ">=",
        Bound::Max => "<=",
    };
    format!(
        "{} {} ({op} {})",
        e.metric,
        figure(&e.metric, e.value),
        figure(&e.metric, e.threshold)
    )
}

/// `text` wrapped at WIDTH after `label`, continued under its end.
pub(crate) fn wrapped(out: &mut String, label: &str, text: &str) {
    let blank = " ".repeat(label.len());
    let mut indent = label;
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent.len() + line.len() + 1 + word.len() > WIDTH {
            let _ = writeln!(out, "{indent}{line}");
            indent = &blank;
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        let _ = writeln!(out, "{indent}{line}");
    }
}

fn finding(out: &mut String, n: usize, f: &Finding) {
    let _ = writeln!(out, "{n}. [{}] {}", f.id, f.title);
    let _ = writeln!(
        out,
        "   severity {:.0}%   {}",
        f.severity * 100.0,
        f.expected_gain.words("")
    );
    let ev: Vec<String> = f.evidence.iter().map(evidence).collect();
    wrapped(out, "   evidence: ", &ev.join(", "));
    let _ = writeln!(out, "   culprit:  {}", f.culprit.name);
    if !f.culprit.frames.is_empty() {
        stack(out, "", &f.culprit.frames);
    }
    wrapped(out, "   remedy:   ", &f.remedy);
    let basis = if f.expected_gain.estimate {
        format!("an estimate: {}", f.expected_gain.basis)
    } else {
        f.expected_gain.basis.clone()
    };
    wrapped(out, "   gain:     ", &basis);
}

pub fn findings(r: &Report, out: &mut String) {
    if r.findings.is_empty() {
        let _ = writeln!(out, "\nFINDINGS: none (no rule's thresholds were met)");
        return;
    }
    let _ = writeln!(out, "\nFINDINGS (causes first, then most at stake)");
    for (i, f) in r.findings.iter().enumerate() {
        finding(out, i + 1, f);
    }
}
