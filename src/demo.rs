//! `kerntax demo`: the lab. Each scenario is a small C program reproducing one
//! of the stories kerntax exists for, in a bad and a fixed variant (and
//! sometimes steps between), compiled by build.rs and embedded here so the
//! demo runs from any installed binary.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

use crate::error::Exit;
use crate::render::text::{self, short};
use crate::report::Report;
use crate::session::{self, Options, What};

pub struct Scenario {
    pub name: &'static str,
    pub story: &'static str,
    /// What the bad variant does wrong and what the fixed one changes.
    pub about: &'static str,
    pub program: &'static str,
    binary: &'static [u8],
    /// (label, program arguments): "bad" first, "fixed" last.
    pub variants: &'static [(&'static str, &'static [&'static str])],
}

const BAD_FIXED: &[(&str, &[&str])] = &[("bad", &["bad"]), ("fixed", &["fixed"])];

pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "ruby-switch",
        story: "Ruby 1.8: rt_sigprocmask on every green-thread switch",
        about: "2,000,000 user-level thread switches: bad uses swapcontext (saves the signal mask: one \
                rt_sigprocmask per switch), fixed uses _setjmp/_longjmp (no system call)",
        program: "ruby_switch",
        binary: include_bytes!(concat!(env!("KERNTAX_LAB_DIR"), "/ruby_switch")),
        variants: BAD_FIXED,
    },
    Scenario {
        name: "icinga-namespace",
        story: "Icinga 2: one exclusive lock on a read-mostly namespace",
        about: "8 threads look names up in a namespace: bad takes its exclusive mutex for every read, \
                rwlock takes a shared read lock, fixed freezes the namespace and reads it with no lock",
        program: "icinga_namespace",
        binary: include_bytes!(concat!(env!("KERNTAX_LAB_DIR"), "/icinga_namespace")),
        variants: &[
            ("bad", &["bad", "8", "250000"]),
            ("rwlock", &["rwlock", "8", "250000"]),
            ("fixed", &["fixed", "8", "250000"]),
        ],
    },
    Scenario {
        name: "zabbix-config",
        story: "Zabbix: pollers queued on one global config lock (a SysV semaphore)",
        about: "8 poller processes: bad takes the global config semaphore for each item, each value and \
                an unneeded macro lookup; fixed shards the queues by itemid % 4 with a semaphore each \
                and resolves the macro once",
        program: "zabbix_config",
        binary: include_bytes!(concat!(env!("KERNTAX_LAB_DIR"), "/zabbix_config")),
        variants: BAD_FIXED,
    },
    Scenario {
        name: "prol2tp-tunnels",
        story: "ProL2TP: poll() over every tunnel's socket and timers in an ordered list",
        about: "an L2TP daemon brings up 1,000 tunnels, 20 control messages each, one tunnel talking at \
                a time: bad polls every socket on each turn and walks an ordered list to re-arm a timer; \
                fixed waits with epoll and keeps the timers in a heap",
        program: "prol2tp_tunnels",
        binary: include_bytes!(concat!(env!("KERNTAX_LAB_DIR"), "/prol2tp_tunnels")),
        variants: BAD_FIXED,
    },
    Scenario {
        name: "rocketmq-lock",
        story: "RocketMQ: spin lock, mutex, or the adaptive backoff spin (ABS) lock",
        about: "4 threads encode messages and put them under one lock with a short critical section: bad is a plain \
                mutex (each contended handoff a futex wait/wake and a context switch), spin a pure spin \
                lock, spin-yield spins k = 1000 times then yields, fixed the ABS lock (spin with backoff, \
                adapt k, park on a futex when spinning keeps failing)",
        program: "rocketmq_lock",
        binary: include_bytes!(concat!(env!("KERNTAX_LAB_DIR"), "/rocketmq_lock")),
        variants: &[
            ("bad", &["mutex", "4", "500000", "0"]),
            ("spin", &["spin", "4", "500000", "0"]),
            ("spin-yield", &["spin-yield", "4", "500000", "0"]),
            ("fixed", &["abs", "4", "500000", "0"]),
        ],
    },
];

pub fn find(name: &str) -> Result<&'static Scenario, Exit> {
    SCENARIOS.iter().find(|s| s.name == name).ok_or_else(|| {
        let names: Vec<_> = SCENARIOS.iter().map(|s| s.name).collect();
        Exit::new(
            2,
            format!(
                "no lab scenario named {name:?}; scenarios: {}",
                names.join(", ")
            ),
        )
    })
}

pub fn list() -> String {
    let mut out = String::from("lab scenarios (kerntax demo NAME runs one):\n");
    for s in SCENARIOS {
        let _ = writeln!(out, "\n{}\n    {}\n    {}", s.name, s.story, s.about);
        for (label, args) in s.variants {
            let _ = writeln!(
                out,
                "    run {:<12} {} {}",
                format!("{label}:"),
                s.program,
                args.join(" ")
            );
        }
    }
    out
}

fn extract(dir: &Path, s: &Scenario) -> Result<PathBuf> {
    let path = dir.join(s.program);
    std::fs::write(&path, s.binary)
        .with_context(|| format!("writing lab program {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// One row of the comparison: the figure for each variant, then the change
/// from the first (bad) to the last (fixed).
fn row(name: &str, values: &[f64], show: impl Fn(f64) -> String) -> String {
    let (first, last) = (values[0], values[values.len() - 1]);
    let change = if first > 0.0 {
        format!("{:+.0}%", (last - first) * 100.0 / first)
    } else if last > 0.0 {
        "new".into()
    } else {
        "-".into()
    };
    let mut line = format!("  {name:<20}");
    for &v in values {
        let _ = write!(line, " {:>12}", show(v));
    }
    let _ = writeln!(line, " {change:>8}");
    line
}

/// The figures the stories cared about, one column per variant, bad first
/// and fixed last.
pub fn compare(variants: &[(&str, &Report)]) -> String {
    let mut out = format!("  {:<20}", "");
    for (label, _) in variants {
        let _ = write!(out, " {label:>12}");
    }
    let _ = writeln!(out, " {:>8}", "change");
    let of =
        |f: &dyn Fn(&Report) -> f64| -> Vec<f64> { variants.iter().map(|(_, r)| f(r)).collect() };
    let ns = |v: f64| text::duration(v as u64);
    let pct = |v: f64| format!("{v:.0}%");
    out += &row("wall time", &of(&|r| r.duration_ns as f64), ns);
    out += &row(
        "CPU time",
        &of(&|r| (r.summary.user_ns + r.summary.sys_ns) as f64),
        ns,
    );
    out += &row("system CPU share", &of(&|r| r.summary.sys_percent), pct);
    out += &row("syscalls", &of(&|r| r.summary.syscalls_per_s), text::rate);
    out += &row(
        "context switches",
        &of(&|r| r.summary.voluntary_switches_per_s + r.summary.involuntary_switches_per_s),
        text::rate,
    );
    out += &row(
        "lock wait",
        &of(&|r| {
            r.locks
                .iter()
                .filter(|l| l.contention)
                .map(|l| l.blocked_ns)
                .sum::<u64>() as f64
        }),
        ns,
    );
    out += &row("CPU spinning", &of(&|r| r.spin.spin_share * 100.0), pct);
    if let (Some((_, bad)), Some((_, fixed))) = (variants.first(), variants.last())
        && let Some(f) = bad.findings.first()
    {
        let g = &f.expected_gain;
        let range = g
            .range
            .map(|[low, high]| format!(" ({:.0}-{:.0}%)", low * 100.0, high * 100.0))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  the bad variant's first finding predicts {:.0}% less wall time{range}; the \
             profiled fixed run took {:.0}% less",
            g.point() * 100.0,
            measured_gain(bad, fixed) * 100.0
        );
    }
    out += &row(
        "sched_yield",
        &of(&|r| r.spin.yields.iter().fold(0.0, |sum, y| sum + y.calls_per_s)),
        text::rate,
    );
    out
}

/// The share of the bad run's wall time the fixed run saved (the lab's
/// variants do the same work).
pub fn measured_gain(bad: &Report, fixed: &Report) -> f64 {
    if bad.duration_ns == 0 {
        return 0.0;
    }
    1.0 - fixed.duration_ns as f64 / bad.duration_ns as f64
}

/// The throughput a lab program printed: the first figure in parentheses,
/// as in `... in 0.916 s (2.18 M switches/s)` or `(19303 NVPS)`.
pub fn throughput(output: &str) -> Option<(f64, String)> {
    output.lines().find_map(|line| {
        let inner = line.split_once('(')?.1;
        let inner = inner.split([')', ',']).next()?;
        let mut words = inner.split_whitespace();
        let mut value: f64 = words.next()?.parse().ok()?;
        let mut unit = words.next()?;
        if let Some(scale) = match unit {
            "k" => Some(1e3),
            "M" => Some(1e6),
            "G" => Some(1e9),
            _ => None,
        } {
            value *= scale;
            unit = words.next()?;
        }
        (unit.ends_with("/s") || unit == "NVPS").then(|| (value, unit.to_string()))
    })
}

/// What `kerntax demo` was asked for.
pub struct DemoOptions<'a> {
    pub only: Option<&'a str>,
    /// Where every variant's JSON and HTML report, its recording and
    /// `index.html` go.
    pub out: &'a Path,
    /// Print each variant's whole text report too.
    pub verbose: bool,
}

/// Frames of the first finding's culprit shown in the summary.
const SUMMARY_FRAMES: usize = 4;

/// The bad variant's first finding, short: what, where, what to do.
pub fn first_finding(label: &str, r: &Report) -> String {
    let mut out = String::new();
    let Some(f) = r.findings.first() else {
        let _ = writeln!(out, "  {label}: no finding");
        return out;
    };
    let _ = writeln!(out, "  {label}, first finding: [{}] {}", f.id, f.title);
    let _ = writeln!(out, "    culprit: {}", f.culprit.name);
    for frame in f.culprit.frames.iter().take(SUMMARY_FRAMES) {
        let _ = writeln!(out, "             {}", crate::frame::short_frame(frame));
    }
    crate::render::findings_text::wrapped(&mut out, "    remedy:  ", &f.remedy);
    let _ = writeln!(out, "    {}", f.expected_gain.words(" of the run"));
    out
}

/// Each variant's findings by id, then what the last (fixed) variant made
/// of the first (bad) one's.
pub fn findings_fates(variants: &[(&str, &Report)]) -> String {
    let mut out = String::from("  findings:\n");
    for (label, r) in variants {
        let ids: Vec<&str> = r.findings.iter().map(|f| f.id.as_str()).collect();
        let ids = if ids.is_empty() {
            "none".to_string()
        } else {
            ids.join(", ")
        };
        let _ = writeln!(out, "    {label:<12} {ids}");
    }
    let (Some((_, bad)), Some((fixed_label, fixed))) = (variants.first(), variants.last()) else {
        return out;
    };
    let d = crate::diff::diff(bad, fixed);
    for f in &bad.findings {
        let resolved = d
            .findings
            .resolved
            .iter()
            .any(|x| x.id == f.id && x.culprit == f.culprit.name);
        let fate = if resolved { "resolved" } else { "still" };
        let _ = writeln!(out, "    [{}] {fate} in {fixed_label}", f.id);
    }
    for f in &d.findings.new {
        let _ = writeln!(out, "    [{}] new in {fixed_label}", f.id);
    }
    out
}

/// The program's line that says how fast it went, else its first line.
fn program_line(printed: &str) -> &str {
    printed
        .lines()
        .find(|l| throughput(l).is_some())
        .or_else(|| printed.lines().next())
        .unwrap_or("")
        .trim()
}

/// Where a variant's reports go in the demo's folder: DIR/NAME-VARIANT
/// with `.json`, `.html` and `.rec` (`*` as the variant: all of them).
fn report_file(name: &str, variant: &str, extension: &str) -> String {
    format!("{name}-{variant}.{extension}")
}

/// A story that ran: its scenario and each variant's report, in order.
struct Story {
    scenario: &'static Scenario,
    reports: Vec<Report>,
}

pub fn run(opts: &DemoOptions<'_>) -> Result<i32> {
    let scenarios: Vec<&'static Scenario> = match opts.only {
        Some(name) => vec![find(name)?],
        None => SCENARIOS.iter().collect(),
    };
    let dir = tempfile::tempdir().context("creating a directory for the lab programs")?;
    std::fs::create_dir_all(opts.out)
        .with_context(|| format!("creating {}", opts.out.display()))?;
    let color = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut stories = vec![];
    for s in scenarios {
        println!("=== {}: {}", s.name, s.story);
        let mut about = String::new();
        crate::render::findings_text::wrapped(&mut about, "    ", s.about);
        print!("{about}");
        let exe = extract(dir.path(), s)?;
        let mut reports = vec![];
        let mut throughputs = vec![];
        for &(variant, args) in s.variants {
            let mut argv: Vec<OsString> = vec![exe.clone().into()];
            argv.extend(args.iter().map(OsString::from));
            // The program's own output, kept to read its throughput from.
            let out_path = dir.path().join(format!("{variant}.out"));
            let out_file = std::fs::File::create(&out_path)
                .with_context(|| format!("creating {}", out_path.display()))?;
            let options = Options {
                target_stdout: Some(out_file.as_raw_fd()),
                ..Options::default()
            };
            let outcome = session::profile(What::Run(argv), &options, Instant::now())?;
            drop(out_file);
            let printed = std::fs::read_to_string(&out_path).unwrap_or_default();
            if opts.verbose {
                println!("--- {variant}: {} {}", s.program, args.join(" "));
                print!("{printed}");
                let report = text::render(&outcome.report, color);
                println!("{}", text::for_terminal(report, &std::io::stdout()));
            } else {
                println!("  ran {variant:<11} {}", program_line(&printed));
            }
            throughputs.push(throughput(&printed));
            let outputs = crate::render::Outputs {
                json: Some(opts.out.join(report_file(s.name, variant, "json"))),
                html: Some(opts.out.join(report_file(s.name, variant, "html"))),
                ..Default::default()
            };
            outputs.write(&outcome.report)?;
            // Its recording beside them, for `kerntax report` with newer rules.
            crate::recording::file::write(
                &opts.out.join(report_file(s.name, variant, "rec")),
                &outcome.recording,
            )?;
            reports.push(outcome.report);
        }
        let columns: Vec<(&str, &Report)> =
            s.variants.iter().map(|v| v.0).zip(reports.iter()).collect();
        let labels: Vec<&str> = columns.iter().map(|c| c.0).collect();
        let mut table = String::new();
        if let Some(all) = throughputs.iter().cloned().collect::<Option<Vec<_>>>() {
            let unit = all[0].1.clone();
            let values: Vec<f64> = all.iter().map(|t| t.0).collect();
            table += &row(&format!("throughput {unit}"), &values, short);
        }
        let table = compare(&columns).replacen('\n', &format!("\n{table}"), 1);
        // The fix measured as `bench/gain` and tests/demo.rs measure it.
        let (bad_args, fixed_args) = (s.variants[0].1, s.variants[s.variants.len() - 1].1);
        let measured = match crate::measure::unprofiled_gain(
            &exe,
            bad_args,
            fixed_args,
            crate::measure::DEMO_RUNS,
        ) {
            Ok(g) => format!(
                "  measured without kerntax: the fix takes {:.0}% less wall time (fastest of {} \
                 alternate runs each)\n",
                g * 100.0,
                crate::measure::DEMO_RUNS
            ),
            Err(e) => format!("  measured without kerntax: not measured ({e:#})\n"),
        };
        let table = format!("{table}{measured}");
        let summary = format!(
            "\n{}\n  {}\n{}\n{}  reports: {}\n",
            first_finding(labels[0], &reports[0]),
            labels.join(" vs "),
            table,
            findings_fates(&columns),
            opts.out.join(report_file(s.name, "*", "html")).display()
        );
        println!("{}", text::for_terminal(summary, &std::io::stdout()));
        stories.push(Story {
            scenario: s,
            reports,
        });
    }
    let index = opts.out.join("index.html");
    std::fs::write(&index, index_page(&stories))
        .with_context(|| format!("writing {}", index.display()))?;
    let shown = std::fs::canonicalize(&index).unwrap_or(index);
    println!(
        "Every variant's report, as HTML and JSON: {}",
        shown.display()
    );
    Ok(0)
}

/// `index.html`: each story, its variants' pages and JSON, and what the
/// bad variant was found to do.
fn index_page(stories: &[Story]) -> String {
    use crate::render::html::esc;
    let mut out = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>kerntax demo</title><style>body{font:14px/1.4 system-ui,sans-serif;\
         max-width:1000px;margin:0 auto;padding:16px}li{margin:2px 0}\
         .id{font-family:monospace;color:#c33}</style></head><body>\n\
         <h1>kerntax demo: the lab's stories, each bad and fixed</h1>\n",
    );
    for st in stories {
        let s = st.scenario;
        let _ = writeln!(
            out,
            "<section id=\"{}\"><h2>{}</h2><p>{}</p><ul>",
            esc(s.name),
            esc(s.story),
            esc(s.about)
        );
        for ((label, args), r) in s.variants.iter().zip(&st.reports) {
            let found = r.findings.first().map_or("no finding".to_string(), |f| {
                format!("<span class=\"id\">{}</span> {}", esc(&f.id), esc(&f.title))
            });
            let _ = writeln!(
                out,
                "<li><a href=\"{html}\">{label}</a> (<a href=\"{json}\">JSON</a>) \
                 <code>{prog} {args}</code>: {found}</li>",
                html = esc(&report_file(s.name, label, "html")),
                json = esc(&report_file(s.name, label, "json")),
                label = esc(label),
                prog = esc(s.program),
                args = esc(&args.join(" ")),
            );
        }
        out.push_str("</ul></section>\n");
    }
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::build::{build, tests::sample_inputs};

    #[test]
    fn comparison_shows_both_sides_and_the_change() {
        let bad = build(sample_inputs());
        let mut fixed = bad.clone();
        fixed.duration_ns /= 4;
        fixed.summary.syscalls_per_s = 0.0;
        let table = compare(&[("bad", &bad), ("fixed", &fixed)]);
        let wall = table.lines().find(|l| l.contains("wall time")).unwrap();
        assert!(
            wall.contains("2.000 s") && wall.contains("500.0 ms") && wall.ends_with("-75%"),
            "{wall}"
        );
        let calls = table.lines().find(|l| l.contains("syscalls")).unwrap();
        assert!(
            calls.contains("505.5/s") && calls.ends_with("-100%"),
            "{calls}"
        );
    }

    #[test]
    fn every_scenario_is_found_by_name_and_unknown_names_are_refused() {
        for s in SCENARIOS {
            assert_eq!(find(s.name).unwrap().name, s.name);
            assert!(!s.binary.is_empty());
        }
        assert!(matches!(find("nope"), Err(e) if e.code == 2));
    }
}
