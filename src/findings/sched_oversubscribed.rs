//! `sched.oversubscribed`: more runnable threads than CPUs. Threads spend
//! their off-CPU time waiting for a CPU rather than for anything they asked
//! for, and are switched out against their will: each switch costs cache
//! warmth, and a preempted lock holder makes everyone behind it wait.
//!
//! Judged on CPUs and threads, not a switch rate: the threads that want to
//! run (those running, the CPUs used, and those waiting for a CPU) outnumber
//! the CPUs the target may use, and waiting for a CPU is most of their time
//! off it. Time slicing alone switches CPU-bound threads a few hundred
//! times a second, spinners fewer: a rate says nothing of how many wait.

use super::common::*;
use crate::report::{Culprit, CulpritKind, Finding, OffCpuReason, Report};

pub const ID: &str = "sched.oversubscribed";
/// Threads waiting for a CPU, on average over the run.
pub const MIN_RUNQUEUE_THREADS: f64 = 1.0;
/// Threads that want to run (CPUs used plus threads waiting for one) per
/// CPU the target may use: above one, the target alone oversubscribes them.
pub const MIN_RUNNABLE_PER_CPU: f64 = 1.0;
/// Share of all off-CPU time spent runnable but not running.
pub const MIN_INVOLUNTARY_SHARE: f64 = 0.5;

pub fn check(r: &Report) -> Vec<Finding> {
    let mut involuntary_ns = 0.0;
    let mut offcpu_ns = 0.0;
    let mut worst: Option<(&str, u32, u64)> = None;
    for t in &r.offcpu {
        offcpu_ns += t.total_ns as f64;
        for reason in t
            .reasons
            .iter()
            .filter(|x| x.reason == OffCpuReason::Involuntary)
        {
            involuntary_ns += reason.ns as f64;
            if worst.is_none_or(|w| reason.ns > w.2) {
                worst = Some((&t.comm, t.tid, reason.ns));
            }
        }
    }
    let runqueue = ratio(involuntary_ns, wall_ns(r));
    let threads = r.threads.len().max(1) as f64;
    let cpus = f64::from(r.summary.cpus.max(1));
    let runnable = r.summary.cpus_used + runqueue;
    let comm = r.processes.first().map_or("?", |p| p.comm.as_str());
    Draft {
        id: ID,
        title: format!(
            "{runqueue:.1} threads on average wait for a CPU: {runnable:.1} threads want to run on {cpus:.0} CPUs"
        ),
        severity: ratio(involuntary_ns, wall_ns(r) * threads),
        evidence: vec![
            at_least("runqueue_threads", runqueue, MIN_RUNQUEUE_THREADS),
            at_least("runnable_per_cpu", runnable / cpus, MIN_RUNNABLE_PER_CPU),
            at_least(
                "involuntary_share_of_offcpu",
                ratio(involuntary_ns, offcpu_ns),
                MIN_INVOLUNTARY_SHARE,
            ),
        ],
        culprit: Culprit {
            kind: CulpritKind::Process,
            name: format!("{comm} (pid {}, {} threads)", r.target_pid, r.threads.len()),
            frames: worst
                .map(|w| vec![format!("most preempted: {} (tid {})", w.0, w.1).into()])
                .unwrap_or_default(),
        },
        remedy: "Run no more busy threads than CPUs: size worker pools to the CPUs the process \
                 may use (sched_getaffinity / nproc), hand work to a fixed pool instead of a \
                 thread per task, and make spinning threads yield or park. Where that cannot \
                 change, pin latency-critical threads to CPUs of their own."
            .into(),
        expected_gain: {
            let t = super::gain::Samples::of(r).through_frames(switching);
            super::gain::predict(
                r,
                &super::gain::fixes::cpu(
                    t,
                    "were no more threads busy than CPUs (the switches between them gone, the \
                     work the same)"
                        .into(),
                ),
            )
        },
    }
    .fire()
    .into_iter()
    .collect()
}

/// A kernel frame of switching between threads: what fewer runnable
/// threads than CPUs saves (the work itself stays).
fn switching(f: &crate::frame::Frame) -> bool {
    f.as_str().strip_suffix(" [k]").is_some_and(|k| {
        [
            "__schedule",
            "schedule",
            "finish_task_switch",
            "pick_next_task",
            "__switch_to",
        ]
        .iter()
        .any(|s| k.starts_with(s))
    })
}
