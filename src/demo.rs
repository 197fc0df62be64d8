//! `kerntax demo`: the lab. Each scenario is a small C program reproducing one
//! of the stories kerntax exists for, in a bad and a fixed variant, compiled
//! by build.rs and embedded here so the demo runs from any installed binary.

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
    pub bad: &'static [&'static str],
    pub fixed: &'static [&'static str],
}

pub const SCENARIOS: &[Scenario] = &[Scenario {
    name: "ruby-switch",
    story: "Ruby 1.8: rt_sigprocmask on every green-thread switch",
    about: "2,000,000 user-level thread switches: bad uses swapcontext (saves the signal mask: one \
            rt_sigprocmask per switch), fixed uses _setjmp/_longjmp (no system call)",
    program: "ruby_switch",
    binary: include_bytes!(concat!(env!("KERNTAX_LAB_DIR"), "/ruby_switch")),
    bad: &["bad"],
    fixed: &["fixed"],
}];

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

fn delta_line(name: &str, before: f64, after: f64, unit: &str) -> String {
    let change = if before > 0.0 {
        format!("{:+.0}%", (after - before) * 100.0 / before)
    } else {
        "n/a".into()
    };
    format!("  {name:<26} {before:>14.2} {after:>14.2} {unit:<6} {change:>8}\n")
}

/// The figures the stories cared about, bad next to fixed.
pub fn compare(bad: &Report, fixed: &Report) -> String {
    let mut out = format!("  {:<26} {:>14} {:>14}\n", "", "bad", "fixed");
    let (b, f) = (&bad.summary, &fixed.summary);
    out += &delta_line(
        "wall time",
        bad.duration_ns as f64 / 1e6,
        fixed.duration_ns as f64 / 1e6,
        "ms",
    );
    out += &delta_line("system CPU share", b.sys_percent, f.sys_percent, "%");
    out += &delta_line(
        "syscalls per second",
        b.syscalls_per_s,
        f.syscalls_per_s,
        "/s",
    );
    let switches =
        |s: &crate::report::Summary| s.voluntary_switches_per_s + s.involuntary_switches_per_s;
    out += &delta_line("context switches per sec", switches(b), switches(f), "/s");
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
        for (variant, args) in [("bad", s.bad), ("fixed", s.fixed)] {
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
        println!(
            "--- {}: bad vs fixed\n{}",
            s.name,
            compare(&reports[0], &reports[1])
        );
    }
    Ok(0)
}
