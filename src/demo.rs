//! `kerntax demo`: the lab. Each scenario is a small C program reproducing one
//! of the stories kerntax exists for, in a bad and a fixed variant (and
//! sometimes steps between), compiled by build.rs and embedded here so the
//! demo runs from any installed binary.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

use crate::error::Exit;
use crate::render::text;
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
        name: "rocketmq-lock",
        story: "RocketMQ: a short critical section under a mutex, handed off by futex",
        about: "8 threads put messages under one lock: bad is a plain mutex (each contended handoff a \
                futex wait/wake and a context switch), fixed an adaptive mutex that spins before sleeping",
        program: "rocketmq_lock",
        binary: include_bytes!(concat!(env!("KERNTAX_LAB_DIR"), "/rocketmq_lock")),
        variants: &[("bad", &["mutex"]), ("fixed", &["adaptive"])],
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
        let _ = writeln!(
            out,
            "  {:<14} {}\n  {:<14} {}",
            s.name, s.story, "", s.about
        );
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

fn delta_line(name: &str, before: f64, after: f64, show: impl Fn(f64) -> String) -> String {
    let change = if before > 0.0 {
        format!("{:+.0}%", (after - before) * 100.0 / before)
    } else {
        "n/a".into()
    };
    format!(
        "  {name:<20} {:>14} {:>14} {change:>8}\n",
        show(before),
        show(after)
    )
}

/// The figures the stories cared about, bad next to fixed.
pub fn compare(bad: &Report, fixed: &Report) -> String {
    let mut out = format!(
        "  {:<20} {:>14} {:>14} {:>8}\n",
        "", "bad", "fixed", "change"
    );
    let (b, f) = (&bad.summary, &fixed.summary);
    let ns = |v: f64| text::duration(v as u64);
    let pct = |v: f64| format!("{v:.0}%");
    out += &delta_line(
        "wall time",
        bad.duration_ns as f64,
        fixed.duration_ns as f64,
        ns,
    );
    out += &delta_line("system CPU share", b.sys_percent, f.sys_percent, pct);
    out += &delta_line("syscalls", b.syscalls_per_s, f.syscalls_per_s, text::rate);
    let switches =
        |s: &crate::report::Summary| s.voluntary_switches_per_s + s.involuntary_switches_per_s;
    out += &delta_line("context switches", switches(b), switches(f), text::rate);
    out
}

pub fn run(only: Option<&str>, json_dir: Option<&Path>) -> Result<i32> {
    let scenarios: Vec<&Scenario> = match only {
        Some(name) => vec![find(name)?],
        None => SCENARIOS.iter().collect(),
    };
    let dir = tempfile::tempdir().context("creating a directory for the lab programs")?;
    if let Some(d) = json_dir {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let color = crate::cli::stdout_is_tty();
    for s in scenarios {
        println!("=== {}: {}\n{}\n", s.name, s.story, s.about);
        let exe = extract(dir.path(), s)?;
        let mut reports = vec![];
        for &(variant, args) in s.variants {
            let mut argv: Vec<OsString> = vec![exe.clone().into()];
            argv.extend(args.iter().map(OsString::from));
            let json = json_dir.map(|d| d.join(format!("{}-{variant}.json", s.name)));
            println!("--- {variant}: {} {}", s.program, args.join(" "));
            let outcome = session::profile(What::Run(argv), &Options::default(), Instant::now())?;
            println!("{}", text::render(&outcome.report, color));
            if let Some(path) = json {
                crate::render::json::write(&outcome.report, &path)?;
            }
            reports.push(outcome.report);
        }
        let (bad, fixed) = (&reports[0], &reports[reports.len() - 1]);
        println!("--- {}: bad vs fixed\n{}", s.name, compare(bad, fixed));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::build::{build, tests::sample_inputs};

    #[test]
    fn comparison_shows_both_sides_and_the_change() {
        let bad = build(sample_inputs());
        let mut fixed = bad.clone();
        fixed.duration_ns /= 4;
        fixed.summary.syscalls_per_s = 0.0;
        let table = compare(&bad, &fixed);
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
