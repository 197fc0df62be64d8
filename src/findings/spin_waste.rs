//! `spin.waste` (RocketMQ): CPU burned waiting instead of working — samples
//! that land in a user spin loop (at a PAUSE), or threads calling
//! sched_yield in a storm, which only asks the scheduler for someone else to
//! run and comes straight back when there is nobody. Spinning pays only when
//! the wait is shorter than a sleep and a wake-up; beyond that a lock should
//! back off and park.

use super::common::*;
use crate::render::text::short;
use crate::report::{Culprit, CulpritKind, Finding, Report};

pub const ID: &str = "spin.waste";
/// Share of on-CPU samples in a spin-wait loop.
pub const MIN_SPIN_SHARE: f64 = 0.2;
/// Fewer samples say too little either way.
pub const MIN_SPIN_SAMPLES: f64 = 10.0;
/// sched_yield calls per second, all threads.
pub const MIN_YIELDS_PER_S: f64 = 500.0;

const REMEDY: &str = "Spinning only pays while the holder is about to release. Bound it: spin \
    k times with backoff (PAUSE), then yield, then park on a futex, and adapt k to how often \
    spinning succeeds (RocketMQ's adaptive backoff spin lock); or use a mutex that spins \
    briefly before sleeping (PTHREAD_MUTEX_ADAPTIVE_NP). Never spin with more spinning threads \
    than CPUs.";

pub fn check(r: &Report) -> Vec<Finding> {
    let s = &r.spin;
    let spun = s.spin_stacks.first();
    let yields_per_s: f64 = s.yields.iter().map(|y| y.calls_per_s).sum();
    let yield_calls: u64 = s.yields.iter().map(|y| y.calls).sum();
    let spin_cpu_ns = s.spin_share * cpu_ns(r);
    let spinning = Draft {
        id: ID,
        title: format!(
            "{:.0}% of CPU samples spin waiting for a lock",
            s.spin_share * 100.0
        ),
        severity: s.spin_share,
        evidence: vec![
            at_least("spin_share", s.spin_share, MIN_SPIN_SHARE),
            at_least("spin_samples", s.spin_samples as f64, MIN_SPIN_SAMPLES),
        ],
        culprit: Culprit {
            kind: CulpritKind::Thread,
            name: spun
                .and_then(|f| {
                    // The spinning function, not the PAUSE helper it calls.
                    f.frames.iter().rev().map(|x| function(x)).find(|x| {
                        !x.contains("relax") && !x.contains("pause") && !x.ends_with("[k]")
                    })
                })
                .unwrap_or_default()
                .to_string(),
            frames: spun
                .map(|f| f.frames.iter().rev().cloned().collect())
                .unwrap_or_default(),
        },
        remedy: REMEDY.into(),
        expected_gain: cpu_gain(r, spin_cpu_ns, "CPU time sampled in spin loops"),
    }
    .fire();
    if spinning.is_some() {
        return spinning.into_iter().collect();
    }
    let top = s.yields.first();
    let sched_yield = r.syscalls.iter().find(|c| c.name == "sched_yield");
    let yield_sys_ns = sched_yield.map_or(0.0, |_| {
        r.summary.sys_ns as f64 * ratio(yield_calls as f64, r.summary.syscalls as f64)
    });
    Draft {
        id: ID,
        title: format!(
            "threads call sched_yield {} times a second",
            short(yields_per_s)
        ),
        severity: s.spin_share + ratio(yield_sys_ns, cpu_ns(r)),
        evidence: vec![at_least("yields_per_s", yields_per_s, MIN_YIELDS_PER_S)],
        culprit: Culprit {
            kind: CulpritKind::Thread,
            name: top
                .map(|t| format!("{} (tid {})", t.comm, t.tid))
                .unwrap_or_default(),
            frames: sched_yield
                .and_then(|c| c.callsites.first())
                .map(|c| c.frames.clone())
                .unwrap_or_default(),
        },
        remedy: REMEDY.into(),
        expected_gain: cpu_gain(
            r,
            spin_cpu_ns + yield_sys_ns,
            "CPU time in spin loops and in sched_yield",
        ),
    }
    .fire()
    .into_iter()
    .collect()
}
