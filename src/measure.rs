//! What a fix measures without kerntax (issue 39): the bad and the fixed
//! variant of a program run alternately, several times each, and the
//! fastest run of each kept. One run of each says little: a host has slow
//! phases seconds long in which every program runs 2-3x slower at once,
//! and kerntax's own cost per system call would slow a syscall-heavy bad
//! variant more than its fix. `kerntax demo`, `tests/demo.rs` and
//! `bench/gain` measure the same way, so the figures they print agree.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// Runs of each variant `kerntax demo` takes the fastest of.
pub const DEMO_RUNS: usize = 3;

/// The share of the bad variant's wall time the fixed one saves, run
/// without kerntax: `runs` of each, alternately, fastest of each kept.
pub fn unprofiled_gain(program: &Path, bad: &[&str], fixed: &[&str], runs: usize) -> Result<f64> {
    let time = |args: &[&str]| -> Result<f64> {
        let start = Instant::now();
        let status = Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .status()
            .with_context(|| format!("running {}", program.display()))?;
        if !status.success() {
            bail!("{} {}: {status}", program.display(), args.join(" "));
        }
        Ok(start.elapsed().as_secs_f64())
    };
    let (mut best_bad, mut best_fixed) = (f64::MAX, f64::MAX);
    for _ in 0..runs.max(1) {
        best_bad = best_bad.min(time(bad)?);
        best_fixed = best_fixed.min(time(fixed)?);
    }
    Ok(1.0 - best_fixed / best_bad)
}
