//! A recording analysed: the report a run gives, worked out from what it
//! recorded alone. The live run and `kerntax report FILE` both come here,
//! so a recording read back gives the report its run gave.

use super::build::{Inputs, build};
use super::timeline;
use crate::model::LockKey;
use crate::recording::Recording;
use crate::report::Report;

/// A recording's report and what `--perfetto` needs besides it.
pub struct Analysed {
    pub report: Report,
    /// Each lock key's name in the report (`LockReport::display_name`).
    pub lock_names: Vec<(LockKey, String)>,
}

pub fn report(rec: &Recording) -> Analysed {
    let run = &rec.run;
    let tally = rec.samples.to_tally();
    let analyses = super::run(
        &rec.kernel,
        &tally,
        &rec.named,
        &rec.kernel_stacks,
        &rec.threads,
        run.duration_ns,
        run.cpu_hz,
    );
    let mut lock_names: Vec<(LockKey, String)> = analyses
        .lock_names
        .iter()
        .map(|(k, n)| (*k, n.clone()))
        .collect();
    lock_names.sort();
    let mut facts = run.clone();
    timeline::contended(
        &mut facts.timeline,
        run.start_mono_ns,
        &analyses.contended_spans,
    );
    let report = build(Inputs {
        run: facts,
        kernel: rec.kernel.clone(),
        threads: rec.threads.clone(),
        sites: analyses.sites,
        paths: analyses.paths,
        cpu_samples: analyses.cpu_samples,
        spin: analyses.spin,
        polls: analyses.polls,
        locks: analyses.locks,
        waits: analyses.waits,
        offcpu: analyses.offcpu,
        wakeups: analyses.wakeups,
        blockers: analyses.blockers,
    });
    Analysed { report, lock_names }
}
