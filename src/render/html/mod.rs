//! `--html FILE`: one self-contained page (styles and scripts inline, no
//! network) with the header figures, the findings, the timeline, flame
//! graphs and sortable tables. Reads only the `Report`. Every string that
//! comes from the target (names, paths, argv) goes through `esc`.

mod chart;
mod flame;

use crate::frame::short_frames;

use std::fmt::Write;

use super::folded;
use super::text::{count, duration, rate};
use crate::report::{Bound, Report};

const CSS: &str = include_str!("page.css");
const JS: &str = include_str!("page.js");
/// Table rows shown; the JSON has them all.
const ROWS: usize = 200;

/// Text for HTML element content and attribute values.
///
/// Copies the runs between the five special bytes whole, found with
/// `memchr` (vector compares): a flame graph's SVG is escaped into its
/// frame's `srcdoc`, some hundreds of KiB a page, and a char-by-char match
/// was most of a page's rendering (and of the html fuzz harness's time).
/// All five are ASCII, so each run ends on a char boundary.
pub fn esc(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    let mut done = 0;
    // The next `&<>` and the next `"'` at or after `done` (None: none left).
    let find3 = |from: usize| memchr::memchr3(b'&', b'<', b'>', &bytes[from..]).map(|i| from + i);
    let find2 = |from: usize| memchr::memchr2(b'"', b'\'', &bytes[from..]).map(|i| from + i);
    let (mut next3, mut next2) = (find3(0), find2(0));
    loop {
        let at = match (next3, next2) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => break,
        };
        out.push_str(&s[done..at]);
        out.push_str(match bytes[at] {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            _ => "&#39;",
        });
        done = at + 1;
        if next3 == Some(at) {
            next3 = find3(done);
        } else {
            next2 = find2(done);
        }
    }
    out.push_str(&s[done..]);
    out
}

fn target(r: &Report) -> String {
    match &r.command {
        Some(argv) => argv.join(" "),
        None => format!("pid {}", r.target_pid),
    }
}

fn header(r: &Report, out: &mut String) {
    let s = &r.summary;
    let status = match (r.exit_status, &r.exit_signal) {
        (Some(c), Some(sig)) => format!("killed by {sig}, exit status {c}"),
        (Some(c), None) => format!("exit status {c}"),
        _ => "running when profiling ended".into(),
    };
    let _ = writeln!(
        out,
        "<h1>kerntax: <code id=\"target\">{}</code></h1><p class=\"muted\">pid {} · {} · kerntax {} · report schema {}</p>",
        esc(&target(r)),
        r.target_pid,
        esc(&status),
        esc(&r.kerntax_version),
        r.schema_version
    );
    let figures = [
        ("wall", duration(r.duration_ns)),
        (
            "user CPU",
            format!("{} ({:.0}%)", duration(s.user_ns), s.user_percent),
        ),
        (
            "system CPU",
            format!("{} ({:.0}%)", duration(s.sys_ns), s.sys_percent),
        ),
        ("voluntary switches", rate(s.voluntary_switches_per_s)),
        ("involuntary switches", rate(s.involuntary_switches_per_s)),
        (
            "syscalls",
            format!("{} ({})", rate(s.syscalls_per_s), count(s.syscalls)),
        ),
        (
            "processes / threads",
            format!("{} / {}", r.processes.len(), r.threads.len()),
        ),
    ];
    out.push_str("<div class=\"figures\" id=\"figures\">");
    for (name, value) in figures {
        let _ = write!(out, "<div>{}<b>{}</b></div>", esc(name), esc(&value));
    }
    out.push_str("</div>\n");
}

fn frames(out: &mut String, frames: &[crate::frame::Frame]) {
    if frames.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<div class=\"frames\">{}</div>",
        esc(&short_frames(frames).join("\n"))
    );
}

fn findings(r: &Report, out: &mut String) {
    out.push_str("<h2>Findings</h2>\n<div id=\"findings\">\n");
    if r.findings.is_empty() {
        out.push_str("<p class=\"muted\">none: no rule's thresholds were met</p>\n");
    }
    for f in &r.findings {
        let _ = write!(
            out,
            "<div class=\"finding\"><h3><span class=\"id\">{}</span> {}</h3>\
             <p>severity {:.0}% · {}: {}</p><p>evidence: ",
            esc(&f.id),
            esc(&f.title),
            f.severity * 100.0,
            esc(&f.expected_gain.words("")),
            esc(&f.expected_gain.basis)
        );
        let ev: Vec<String> = f
            .evidence
            .iter()
            .map(|e| {
                let op = if e.bound == Bound::Min {
                    "&ge;"
                } else {
                    "&le;"
                };
                format!(
                    "<code>{} {:.4} ({op} {})</code>",
                    esc(&e.metric),
                    e.value,
                    e.threshold
                )
            })
            .collect();
        out.push_str(&ev.join(", "));
        let _ = write!(out, "</p><p>culprit: <b>{}</b></p>", esc(&f.culprit.name));
        frames(out, &f.culprit.frames);
        let _ = writeln!(out, "<p>remedy: {}</p></div>", esc(&f.remedy));
    }
    out.push_str("</div>\n");
}

/// A sortable table: header names, then rows of (text, sort value) cells.
fn table(out: &mut String, id: &str, head: &[&str], rows: Vec<Vec<(String, Option<f64>)>>) {
    let _ = write!(
        out,
        "<table class=\"sortable\" id=\"{}\"><thead><tr>",
        esc(id)
    );
    for h in head {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    for row in rows.into_iter().take(ROWS) {
        out.push_str("<tr>");
        for (text, v) in row {
            match v {
                Some(v) if v.is_finite() => {
                    let _ = write!(out, "<td data-v=\"{v}\">{}</td>", esc(&text));
                }
                _ => {
                    let _ = write!(out, "<td>{}</td>", esc(&text));
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
}

fn n(x: u64) -> (String, Option<f64>) {
    (count(x), Some(x as f64))
}

fn t(ns: u64) -> (String, Option<f64>) {
    (duration(ns), Some(ns as f64))
}

fn s(text: &str) -> (String, Option<f64>) {
    (text.to_string(), None)
}

fn tables(r: &Report, out: &mut String) {
    out.push_str("<h2>Wait sites</h2>\n");
    table(
        out,
        "table-waits",
        &[
            "site",
            "class",
            "why",
            "sleeps",
            "futile",
            "timed out",
            "waiters",
            "processes",
            "waiting threads",
            "waited",
            "released by",
        ],
        r.waits
            .iter()
            .zip(crate::analyze::waits::displays(
                &r.waits.iter().collect::<Vec<_>>(),
            ))
            .map(|(w, name)| {
                vec![
                    s(&name),
                    s(w.class.name()),
                    s(&w.evidence.join("; ")),
                    n(w.waits),
                    n(w.futile),
                    n(w.timed_out),
                    n(u64::from(w.waiters)),
                    n(u64::from(w.processes)),
                    (format!("{:.2}", w.waiting_threads), Some(w.waiting_threads)),
                    t(w.wait_ns),
                    s(&w.releases
                        .first()
                        .map(|x| {
                            match crate::analyze::waits::release_site(x, w.runtime_lock.as_deref())
                            {
                                Some(site) => format!("{} in {site}", x.mechanism),
                                None => x.mechanism.clone(),
                            }
                        })
                        .unwrap_or_default()),
                ]
            })
            .collect(),
    );
    out.push_str("<h2>Syscalls</h2>\n");
    table(
        out,
        "table-syscalls",
        &[
            "syscall",
            "calls",
            "errors",
            "total",
            "max",
            "top call site",
        ],
        r.syscalls
            .iter()
            .map(|c| {
                vec![
                    s(&c.name),
                    n(c.calls),
                    n(c.errors),
                    {
                        // Issue 21: scaled from the calls timed in a storm.
                        let (text, key) = t(c.total_ns);
                        match c.timed_calls {
                            Some(timed) if timed < c.calls.saturating_sub(c.unfinished) => {
                                (format!("~{text}"), key)
                            }
                            _ => (text, key),
                        }
                    },
                    t(c.max_ns),
                    s(&c.callsites
                        .first()
                        .map(|x| short_frames(&x.frames).join(" < "))
                        .unwrap_or_default()),
                ]
            })
            .collect(),
    );
    out.push_str("<h2>Locks</h2>\n");
    table(
        out,
        "table-locks",
        &[
            "lock",
            "contention",
            "waits",
            "blocked",
            "waited",
            "max",
            "wakes/s",
            "threads",
            "mapping",
        ],
        r.locks
            .iter()
            .map(|l| {
                vec![
                    s(&l.display_name()),
                    s(if l.contention { "yes" } else { "no" }),
                    n(l.waits),
                    n(l.blocked),
                    t(l.wait_ns),
                    t(l.max_wait_ns),
                    (rate(l.wakes_per_s), Some(l.wakes_per_s)),
                    n(u64::from(l.threads)),
                    s(l.mapping.as_deref().unwrap_or("")),
                ]
            })
            .collect(),
    );
    out.push_str("<h2>I/O multiplexing</h2>\n");
    table(
        out,
        "table-polls",
        &[
            "pid",
            "syscall",
            "calls",
            "fds/call",
            "max fds",
            "ready/call",
            "ready",
            "timeouts",
            "system time",
        ],
        r.polls
            .iter()
            .map(|p| {
                vec![
                    n(u64::from(p.pid)),
                    s(&p.syscall),
                    n(p.calls),
                    (format!("{:.1}", p.fds_per_call), Some(p.fds_per_call)),
                    n(p.max_fds),
                    (format!("{:.2}", p.ready_per_call), Some(p.ready_per_call)),
                    match p.ready_ratio {
                        Some(q) => (format!("{:.1}%", q * 100.0), Some(q)),
                        None => s("-"),
                    },
                    n(p.timeouts),
                    t(p.cpu_ns),
                ]
            })
            .collect(),
    );
    out.push_str("<h2>Threads</h2>\n");
    table(
        out,
        "table-threads",
        &[
            "thread",
            "pid",
            "tid",
            "user",
            "system",
            "voluntary",
            "involuntary",
            "sched_yield",
        ],
        r.threads
            .iter()
            .map(|x| {
                vec![
                    s(&x.comm),
                    n(u64::from(x.pid)),
                    n(u64::from(x.tid)),
                    t(x.user_ns),
                    t(x.sys_ns),
                    n(x.voluntary_switches),
                    n(x.involuntary_switches),
                    n(x.yields),
                ]
            })
            .collect(),
    );
}

fn flames(r: &Report, out: &mut String) {
    out.push_str(
        "<h2>Flame graphs</h2>\n<p class=\"muted\">Click a frame to zoom, Ctrl-F to search.</p>\n",
    );
    let views = [
        flame::View {
            id: "flame-cpu",
            title: "On-CPU",
            count_name: "samples",
            stacks: folded::cpu(r),
        },
        flame::View {
            id: "flame-offcpu",
            title: "Off-CPU by reason",
            count_name: "ns",
            stacks: folded::offcpu(r),
        },
        flame::View {
            id: "flame-waits",
            title: "Wait sites by class (waiters)",
            count_name: "ns",
            stacks: folded::wait_sites(r),
        },
        flame::View {
            id: "flame-lock-waiters",
            title: "Lock waits (waiters)",
            count_name: "ns",
            stacks: folded::lock_waiters(r),
        },
        flame::View {
            id: "flame-lock-wakers",
            title: "Lock hand-offs (wakers)",
            count_name: "wake-ups",
            stacks: folded::lock_wakers(r),
        },
        flame::View {
            id: "flame-syscalls",
            title: "Syscalls by call site",
            count_name: "calls",
            stacks: folded::syscalls(r),
        },
    ];
    for v in &views {
        flame::render(v, out);
    }
}

fn footer(r: &Report, out: &mut String) {
    let lost = r.loss.nonzero();
    let lost = if lost.is_empty() {
        "none".to_string()
    } else {
        lost.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        out,
        "<h2>Sampling and loss</h2><p id=\"loss\">stacks: {} samples ({}); loss: {}</p>",
        count(r.sampling.stack_samples),
        esc(&r.sampling.policy),
        esc(&lost)
    );
}

pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>kerntax: {}</title>\
         <script>window.addEventListener('error',function(e){{var h=document.documentElement;h.setAttribute('data-errors',(h.getAttribute('data-errors')||'')+String(e.message)+';');}});</script>\
         <style>{CSS}</style></head><body>\n",
        esc(&target(r))
    );
    header(r, &mut out);
    findings(r, &mut out);
    out.push_str("<h2>Timeline</h2>\n<div id=\"timeline\">\n");
    chart::timeline(r, &mut out);
    out.push_str("</div>\n");
    flames(r, &mut out);
    tables(r, &mut out);
    footer(r, &mut out);
    let _ = write!(out, "<script>{JS}</script>\n</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::build::{build, tests::sample_inputs};

    const EVIL: &str = "<script>alert(1)</script>\"'&";

    /// The char-by-char escaping `esc` replaced, as the reference.
    fn esc_by_char(s: &str) -> String {
        let mut out = String::new();
        for c in s.chars() {
            match c {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '"' => out.push_str("&quot;"),
                '\'' => out.push_str("&#39;"),
                c => out.push(c),
            }
        }
        out
    }

    #[test]
    fn escaping_by_runs_equals_escaping_by_char() {
        let cases = [
            "",
            "plain",
            "&",
            "''",
            "<a href=\"x\">é&ü</a>",
            "ends with <",
            "\"starts",
            "mixed '<>&\"' runs ✓ of ünïcode & more >>",
            EVIL,
        ];
        for c in cases {
            assert_eq!(esc(c), esc_by_char(c), "{c:?}");
        }
        // Every order of the five among multi-byte chars.
        let alphabet = ['&', '<', '>', '"', '\'', 'x', 'é', '✓'];
        let mut n = 0u32;
        while n < 8u32.pow(5) {
            let s: String = (0..5)
                .map(|i| alphabet[(n / 8u32.pow(i) % 8) as usize])
                .collect();
            assert_eq!(esc(&s), esc_by_char(&s), "{s:?}");
            n += 1;
        }
    }

    #[test]
    fn strings_from_the_target_cannot_inject_markup() {
        let mut r = build(sample_inputs());
        r.command = Some(vec![EVIL.into()]);
        for th in &mut r.threads {
            th.comm = EVIL.into();
        }
        r.locks[0].symbol = Some(EVIL.into());
        let sc = r
            .syscalls
            .iter_mut()
            .find(|c| !c.callsites.is_empty())
            .unwrap();
        sc.callsites[0].frames = vec![format!("{EVIL} (x.c:1)").into()];
        r.cpu_samples.frequency_hz = 99;
        r.cpu_samples.folded = vec![crate::report::FoldedStack {
            frames: vec!["main".into(), EVIL.into()],
            count: 5,
            threads: vec![],
        }];
        let html = render(&r);
        // The page's own two scripts, and no other.
        assert_eq!(html.matches("<script>").count(), 2, "{html}");
        assert!(!html.contains(EVIL));
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;"));
        // Inside a flame graph's srcdoc, markup is escaped twice over.
        assert!(!html.contains("<script>alert"));
    }

    #[test]
    fn the_page_has_its_parts_and_needs_no_network() {
        let html = render(&build(sample_inputs()));
        for id in [
            "figures",
            "findings",
            "timeline",
            "table-syscalls",
            "table-locks",
            "table-waits",
            "flame-waits",
            "table-polls",
            "table-threads",
            "flame-syscalls",
            "flame-lock-waiters",
        ] {
            assert!(html.contains(&format!("id=\"{id}\"")), "{id}");
        }
        assert!(!html.contains("http://") || !html.contains("src=\"http"));
        assert!(!html.contains("src=\"https"));
        assert!(html.contains("<iframe class=\"flamegraph\" id=\"flame-syscalls\""));
    }

    /// Issue #10: C++ frames lose their parameter lists on the page (the
    /// JSON keeps them): in tables, culprit stacks and flame graphs.
    #[test]
    fn cxx_frames_are_shown_short() {
        let html = render(&build(sample_inputs()));
        // The sample wait site waits in `Cache::lookup(std::string const&)`.
        assert!(html.contains("Cache::lookup via port::Mutex::Lock"));
        assert!(
            !html.contains("std::string const"),
            "a parameter list is shown"
        );
    }
}
