//! `spin.waste` (RocketMQ): CPU burned waiting instead of working, one
//! finding per busy-wait loop — however it spins: at a PAUSE, on a
//! compare-and-swap retried at once, or with plain loads polling a value
//! another thread writes — and one per function calling sched_yield in a
//! storm, which only asks the scheduler for someone else to run and comes
//! straight back when there is nobody. Spinning pays only when the wait is
//! shorter than a sleep and a wake-up; beyond that a lock should back off
//! and park. With more spinners than CPUs, a spinner holds the CPU the
//! thread it waits for needs.

use std::collections::BTreeMap;

use super::common::*;
use crate::report::{Culprit, CulpritKind, Finding, Report, SpinLoop};
use crate::units::short;

pub const ID: &str = "spin.waste";
/// Share of on-CPU samples in spin-wait loops, all loops together.
pub const MIN_SPIN_SHARE: f64 = 0.2;
/// Share of on-CPU samples in one loop, for it to be a finding of its own.
pub const MIN_LOOP_SHARE: f64 = 0.05;
/// Fewer samples in a loop say too little either way.
pub const MIN_SPIN_SAMPLES: f64 = 10.0;
/// sched_yield calls per second from one function.
pub const MIN_YIELDS_PER_S: f64 = 500.0;

const REMEDY: &str = "Spinning only pays while the holder is about to release. Bound it: spin \
    k times with backoff (PAUSE), then yield, then park on a futex, and adapt k to how often \
    spinning succeeds (RocketMQ's adaptive backoff spin lock); or use a mutex that spins \
    briefly before sleeping (PTHREAD_MUTEX_ADAPTIVE_NP). Never spin with more spinning threads \
    than CPUs.";

const PLAIN_REMEDY: &str = "A loop that polls a value another thread writes burns its CPU \
    and, with more pollers than CPUs, the CPU the writer needs. Wait on it instead: a \
    condition variable, a futex wait on the word, an eventfd or pipe the writer signals (in \
    Java: LockSupport.park/unpark, a BlockingQueue or a CountDownLatch; in JavaScript: \
    Atomics.wait/Atomics.notify); if the wait must stay short, spin a bounded number of times \
    with PAUSE (Thread.onSpinWait, std::hint::spin_loop) and then park.";

fn kind_words(kind: &str) -> &'static str {
    match kind {
        "pause" => "a spin loop with PAUSE",
        "cas" => "a compare-and-swap retried at once",
        "plain-loads" => "a loop of plain loads polling memory",
        _ => "a spin loop",
    }
}

fn loop_finding(r: &Report, l: &SpinLoop) -> Option<Finding> {
    let cpus = r.summary.cpus.max(1);
    let crowded = if l.threads > cpus {
        format!(", {} threads spinning on {cpus} CPUs", l.threads)
    } else {
        String::new()
    };
    Draft {
        id: ID,
        title: format!(
            "{:.0}% of CPU samples spin in {}: {}{crowded}",
            l.share * 100.0,
            l.function,
            kind_words(&l.kind)
        ),
        severity: l.share,
        evidence: vec![
            at_least("spin_share", r.spin.spin_share, MIN_SPIN_SHARE),
            at_least("loop_share", l.share, MIN_LOOP_SHARE),
            at_least("loop_samples", l.samples as f64, MIN_SPIN_SAMPLES),
        ],
        culprit: Culprit {
            kind: CulpritKind::Thread,
            name: l.function.clone(),
            frames: l.frames.iter().rev().cloned().collect(),
        },
        remedy: if l.kind == "plain-loads" {
            PLAIN_REMEDY.into()
        } else {
            REMEDY.into()
        },
        expected_gain: {
            let samples = super::gain::Samples::of(r);
            let n = samples.program_samples;
            let share = if n > 0 {
                ratio(l.samples as f64, n as f64).min(1.0)
            } else {
                l.share
            };
            // The threads that run the loop's function spend its CPU.
            let on = samples.through_frames(|f| f.function() == l.function);
            super::gain::predict(
                r,
                &super::gain::fixes::cpu(
                    super::gain::Through {
                        share,
                        samples: l.samples,
                        threads: on.threads,
                    },
                    format!(
                        "were the threads to sleep instead of spinning in {}",
                        l.function
                    ),
                ),
            )
        },
    }
    .fire()
}

/// Per function calling sched_yield: (calls, its top stack).
fn yield_sites(r: &Report) -> BTreeMap<String, (u64, Vec<Frame>)> {
    let mut out: BTreeMap<String, (u64, Vec<Frame>)> = BTreeMap::new();
    let Some(c) = r.syscalls.iter().find(|c| c.name == "sched_yield") else {
        return out;
    };
    for site in &c.callsites {
        let name = caller(&site.frames).unwrap_or("[unknown]").to_string();
        let e = out.entry(name).or_default();
        if e.1.is_empty() {
            e.1 = site.frames.clone();
        }
        e.0 += site.calls;
    }
    out
}

fn yield_finding(r: &Report, function: &str, calls: u64, frames: Vec<Frame>) -> Option<Finding> {
    let per_s = ratio(calls as f64, wall_ns(r) / 1e9);
    let yield_sys_ns = calls_system_ns(r, calls);
    let expected_gain = super::gain::predict(
        r,
        &super::gain::fixes::calls(
            r,
            &[("sched_yield", frames.as_slice())],
            ratio(yield_sys_ns, cpu_ns(r)),
            format!("were {function}'s threads to sleep instead of yielding"),
        ),
    );
    Draft {
        id: ID,
        title: format!(
            "{function} calls sched_yield {} times a second",
            short(per_s)
        ),
        severity: ratio(yield_sys_ns, cpu_ns(r)),
        evidence: vec![at_least("yields_per_s", per_s, MIN_YIELDS_PER_S)],
        culprit: Culprit {
            kind: CulpritKind::Thread,
            name: function.to_string(),
            frames,
        },
        remedy: REMEDY.into(),
        expected_gain,
    }
    .fire()
}

/// A report written before loops were told apart: its top spin stack as
/// one loop.
fn one_loop(r: &Report) -> Option<SpinLoop> {
    let top = r.spin.spin_stacks.first()?;
    let function = top
        .frames
        .iter()
        .rev()
        .map(|x| x.function())
        .find(|x| !x.contains("cpu_relax") && !x.ends_with("[k]"))?
        .to_string();
    Some(SpinLoop {
        function,
        kind: "pause".into(),
        samples: r.spin.spin_samples,
        share: r.spin.spin_share,
        threads: 1,
        frames: top.frames.clone(),
    })
}

pub fn check(r: &Report) -> Vec<Finding> {
    let old = r.spin.loops.is_empty().then(|| one_loop(r)).flatten();
    let mut out: Vec<Finding> = r
        .spin
        .loops
        .iter()
        .chain(&old)
        .filter_map(|l| loop_finding(r, l))
        .collect();
    for (function, (calls, frames)) in yield_sites(r) {
        out.extend(yield_finding(r, &function, calls, frames));
    }
    out
}
