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
            let at_most = threads_spinning(r, &on.threads, n, l.samples);
            super::gain::predict(
                r,
                &super::gain::Fix {
                    at_most,
                    ..super::gain::fixes::cpu(
                        super::gain::Through {
                            share,
                            samples: l.samples,
                            threads: on.threads,
                        },
                        format!(
                            "were the threads to sleep instead of spinning in {}",
                            l.function
                        ),
                    )
                },
            )
        },
    }
    .fire()
}

/// The range's high end of a loop's fix: all the spinning of the threads
/// that run it, when they spin elsewhere too. The remedy makes those
/// threads wait instead of polling, and a JIT compiles one source loop
/// into several functions (inlined into its caller and on its own, as V8
/// does node-spin's `waitForJob`), so one loop's samples can fall under
/// two names, each a loop of its own here. `threads` are the loop's
/// threads, `(tid, samples)`; `program_samples` all of the program's.
fn threads_spinning(
    r: &Report,
    threads: &[(u32, u64)],
    program_samples: u64,
    loop_samples: u64,
) -> Option<Box<super::gain::Fix>> {
    let mut by: BTreeMap<u32, u64> = BTreeMap::new();
    for st in &r.spin.spin_stacks {
        for (tid, n) in &st.threads {
            if threads.iter().any(|t| t.0 == *tid) {
                *by.entry(*tid).or_default() += n;
            }
        }
    }
    let all: u64 = by.values().sum();
    (all > loop_samples && program_samples > 0).then(|| {
        Box::new(super::gain::fixes::cpu(
            super::gain::Through {
                share: ratio(all as f64, program_samples as f64).min(1.0),
                samples: all,
                threads: by.into_iter().collect(),
            },
            String::new(),
        ))
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// node-spin's workers, recorded: one source loop spun in as V8's
    /// inlined `workerLoop` (459 samples) and on its own as `waitForJob`
    /// (129), the same 4 threads; 54% measured against 39-53% from the
    /// first alone.
    #[test]
    fn a_loops_high_end_is_all_the_spinning_of_its_threads() {
        let mut r = crate::findings::tests::spinning_in(
            &[
                ("workerLoop", "plain-loads", 0.2, 40),
                ("waitForJob", "plain-loads", 0.175, 35),
            ],
            0.0,
        );
        r.spin.spin_stacks[0].threads = vec![(1, 30), (2, 10)];
        // Thread 9 spins too, but never in the first loop.
        r.spin.spin_stacks[1].threads = vec![(2, 15), (9, 20)];
        let loop_threads = [(1, 30), (2, 10)];
        let most = threads_spinning(&r, &loop_threads, 200, 40).unwrap();
        assert_eq!(most.cpu_samples, 55);
        assert!((most.cpu_share - 55.0 / 200.0).abs() < 1e-9);
        assert_eq!(most.cpu_where, vec![(1, 30), (2, 25)]);
        // Its threads spin nowhere else: no high end of its own.
        r.spin.spin_stacks[1].threads = vec![(9, 35)];
        assert!(threads_spinning(&r, &loop_threads, 200, 40).is_none());
    }
}
