//! `sched.oversubscribed`: more runnable threads than CPUs. Threads spend
//! their off-CPU time waiting for a CPU rather than for anything they asked
//! for, and are switched out against their will: each switch costs cache
//! warmth, and a preempted lock holder makes everyone behind it wait.

use super::common::*;
use crate::report::{Culprit, CulpritKind, Finding, OffCpuReason, Report};

pub const ID: &str = "sched.oversubscribed";
/// Threads waiting for a CPU, on average over the run.
pub const MIN_RUNQUEUE_THREADS: f64 = 1.0;
/// Involuntary context switches per second, all threads. A CPU-bound
/// thread sharing a CPU is preempted a few hundred times a second by time
/// slicing alone; more means wake-ups keep preempting.
pub const MIN_INVOLUNTARY_PER_S: f64 = 2_000.0;
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
    let comm = r.processes.first().map_or("?", |p| p.comm.as_str());
    Draft {
        id: ID,
        title: format!(
            "{:.1} threads on average wait for a CPU: more runnable threads than CPUs",
            runqueue
        ),
        severity: ratio(involuntary_ns, wall_ns(r) * threads),
        evidence: vec![
            at_least("runqueue_threads", runqueue, MIN_RUNQUEUE_THREADS),
            at_least(
                "involuntary_switches_per_s",
                r.summary.involuntary_switches_per_s,
                MIN_INVOLUNTARY_PER_S,
            ),
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
                .map(|w| vec![format!("most preempted: {} (tid {})", w.0, w.1)])
                .unwrap_or_default(),
        },
        remedy: "Run no more busy threads than CPUs: size worker pools to the CPUs the process \
                 may use (sched_getaffinity / nproc), hand work to a fixed pool instead of a \
                 thread per task, and make spinning threads yield or park. Where that cannot \
                 change, pin latency-critical threads to CPUs of their own."
            .into(),
        expected_gain: wall_gain(
            r,
            involuntary_ns / threads,
            "run-queue wait per thread, which fewer runnable threads than CPUs would avoid",
        ),
    }
    .fire()
    .into_iter()
    .collect()
}
