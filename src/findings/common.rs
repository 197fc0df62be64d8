//! What the rules share: evidence with thresholds, the gate that fires a
//! finding only when all of it holds, and the figures several rules read.

use crate::report::{
    Bound, Culprit, CulpritKind, Evidence, ExpectedGain, Finding, LockReport, Report,
};

/// `value` must be at least `threshold`.
pub fn at_least(metric: &str, value: f64, threshold: f64) -> Evidence {
    Evidence {
        metric: metric.into(),
        value,
        threshold,
        bound: Bound::Min,
    }
}

/// `value` must be at most `threshold`.
pub fn at_most(metric: &str, value: f64, threshold: f64) -> Evidence {
    Evidence {
        metric: metric.into(),
        value,
        threshold,
        bound: Bound::Max,
    }
}

/// A finding in the making: it becomes one only if all its evidence holds.
pub struct Draft {
    pub id: &'static str,
    pub title: String,
    pub severity: f64,
    pub evidence: Vec<Evidence>,
    pub culprit: Culprit,
    pub remedy: String,
    pub expected_gain: ExpectedGain,
}

impl Draft {
    pub fn fire(self) -> Option<Finding> {
        self.evidence.iter().all(Evidence::holds).then(|| Finding {
            id: self.id.into(),
            title: self.title,
            severity: clamp01(self.severity),
            evidence: self.evidence,
            culprit: self.culprit,
            remedy: self.remedy,
            expected_gain: self.expected_gain,
        })
    }
}

pub fn clamp01(x: f64) -> f64 {
    if x.is_finite() {
        x.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// part / whole, 0 when there is no whole.
pub fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 { part / whole } else { 0.0 }
}

pub fn wall_ns(r: &Report) -> f64 {
    r.duration_ns as f64
}

pub fn cpu_ns(r: &Report) -> f64 {
    (r.summary.user_ns + r.summary.sys_ns) as f64
}

/// A gain of `time_ns` of the run's wall time.
pub fn wall_gain(r: &Report, time_ns: f64, basis: &str) -> ExpectedGain {
    ExpectedGain {
        time_ns: time_ns.max(0.0) as u64,
        share: clamp01(ratio(time_ns, wall_ns(r))),
        basis: basis.into(),
    }
}

/// A gain of `time_ns` of the run's CPU time.
pub fn cpu_gain(r: &Report, time_ns: f64, basis: &str) -> ExpectedGain {
    ExpectedGain {
        time_ns: time_ns.max(0.0) as u64,
        share: clamp01(ratio(time_ns, cpu_ns(r))),
        basis: basis.into(),
    }
}

pub fn lock_culprit(l: &LockReport) -> Culprit {
    Culprit {
        kind: CulpritKind::Lock,
        name: l.display_name(),
        frames: l
            .waiter_stacks
            .first()
            .map(|s| s.frames.clone())
            .unwrap_or_default(),
    }
}

/// Share of the waiting threads' time spent in `l`'s calls.
pub fn waiting_share(r: &Report, l: &LockReport) -> f64 {
    ratio(l.wait_ns as f64, wall_ns(r) * f64::from(l.threads.max(1)))
}

pub use crate::stacks::frame::function;

/// The first frame of a stack (innermost first) that is the program's own
/// code rather than libc's or libpthread's lock machinery: where the lock
/// is taken from.
pub fn caller(frames: &[String]) -> Option<&str> {
    frames.iter().map(|f| function(f)).find(|f| !is_runtime(f))
}

fn is_runtime(function: &str) -> bool {
    let f = function.trim_start_matches('_');
    [
        "futex", "lll_", "pthread_", "GI_", "sem", "syscall", "libc_", "clock",
    ]
    .iter()
    .any(|p| f.starts_with(p))
        || function.contains("pthread_mutex")
        || function.contains("pthread_rwlock")
        || function.contains("pthread_cond")
}
