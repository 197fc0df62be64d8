//! `kerntax diff BEFORE AFTER`: what a change did, in the figures the
//! stories measured (wall, user and system CPU, switches, syscalls, lock
//! waits) and in the findings: which went away, which are new, which remain.
//! It reads two reports and nothing else.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::report::{Finding, LockKind, LockReport, Report};

/// Version of the diff document (its own contract, like the report's).
pub const DIFF_SCHEMA_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Diff {
    pub schema_version: u32,
    pub before: Side,
    pub after: Side,
    /// Whole-run figures.
    pub metrics: Vec<Delta>,
    /// Per syscall present on either side: calls, and time inside.
    pub syscalls: Vec<SyscallDelta>,
    /// Per contended lock present on either side (matched by name).
    pub locks: Vec<LockDelta>,
    pub findings: FindingsDelta,
}

/// Which report a side is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Side {
    pub command: Option<Vec<String>>,
    pub target_pid: u32,
    pub schema_version: u32,
    pub kerntax_version: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    /// The figure, its unit in the name.
    pub metric: String,
    pub before: f64,
    pub after: f64,
    /// (after - before) / before; null when before is 0.
    pub change: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyscallDelta {
    pub name: String,
    pub calls: Delta,
    pub total_ns: Delta,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockDelta {
    pub lock: String,
    pub wait_ns: Delta,
    pub blocked_ns: Delta,
    pub wakes: Delta,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FindingsDelta {
    /// In BEFORE only: the change made them go away.
    pub resolved: Vec<FindingRef>,
    /// In AFTER only.
    pub new: Vec<FindingRef>,
    /// In both, with the severity of each side.
    pub remaining: Vec<Remaining>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FindingRef {
    pub id: String,
    pub title: String,
    pub culprit: String,
    pub severity: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Remaining {
    pub id: String,
    pub culprit: String,
    pub before: FindingRef,
    pub after: FindingRef,
}

pub fn delta(metric: &str, before: f64, after: f64) -> Delta {
    let finite = |x: f64| if x.is_finite() { x } else { 0.0 };
    let (before, after) = (finite(before), finite(after));
    Delta {
        metric: metric.into(),
        before,
        after,
        change: (before != 0.0)
            .then(|| (after - before) / before.abs())
            .filter(|c| c.is_finite()),
    }
}

pub fn diff(before: &Report, after: &Report) -> Diff {
    Diff {
        schema_version: DIFF_SCHEMA_VERSION,
        before: side(before),
        after: side(after),
        metrics: metrics(before, after),
        syscalls: syscalls(before, after),
        locks: locks(before, after),
        findings: findings(&before.findings, &after.findings),
    }
}

fn side(r: &Report) -> Side {
    Side {
        command: r.command.clone(),
        target_pid: r.target_pid,
        schema_version: r.schema_version,
        kerntax_version: r.kerntax_version.clone(),
    }
}

/// A whole-run figure: its name and how to read it from a report.
type Figure = (&'static str, fn(&Report) -> f64);

fn metrics(b: &Report, a: &Report) -> Vec<Delta> {
    let figures: &[Figure] = &[
        ("wall_ns", |r| r.duration_ns as f64),
        ("user_ns", |r| r.summary.user_ns as f64),
        ("sys_ns", |r| r.summary.sys_ns as f64),
        ("sys_percent", |r| r.summary.sys_percent),
        ("voluntary_switches_per_s", |r| {
            r.summary.voluntary_switches_per_s
        }),
        ("involuntary_switches_per_s", |r| {
            r.summary.involuntary_switches_per_s
        }),
        ("syscalls", |r| r.summary.syscalls as f64),
        ("syscalls_per_s", |r| r.summary.syscalls_per_s),
        ("lock_wait_ns", |r| r.contended_wait_ns()),
        ("spin_share", |r| r.spin.spin_share),
    ];
    figures
        .iter()
        .map(|(name, f)| delta(name, f(b), f(a)))
        .collect()
}

fn syscalls(b: &Report, a: &Report) -> Vec<SyscallDelta> {
    let mut by_name: BTreeMap<&str, [(f64, f64); 2]> = BTreeMap::new();
    for (i, r) in [b, a].into_iter().enumerate() {
        for s in &r.syscalls {
            let e = by_name.entry(&s.name).or_default();
            e[i].0 += s.calls as f64;
            e[i].1 += s.total_ns as f64;
        }
    }
    let mut out: Vec<SyscallDelta> = by_name
        .into_iter()
        .map(|(name, [x, y])| SyscallDelta {
            name: name.into(),
            calls: delta("calls", x.0, y.0),
            total_ns: delta("total_ns", x.1, y.1),
        })
        .collect();
    out.sort_by(|p, q| {
        let most = |d: &SyscallDelta| d.total_ns.before.max(d.total_ns.after);
        most(q).total_cmp(&most(p)).then(p.name.cmp(&q.name))
    });
    out
}

/// A lock's name for matching across runs: a SysV semaphore's id changes
/// from run to run, its number within the set does not.
fn lock_key(l: &LockReport) -> String {
    match (&l.symbol, &l.address) {
        _ if l.kind == LockKind::SysvSem => format!("sysv-sem sem {}", l.semnum.unwrap_or(0)),
        (Some(s), _) => format!("{} {s}", l.kind.name()),
        (None, Some(a)) => format!("{} {a}", l.kind.name()),
        (None, None) => l.kind.name().to_string(),
    }
}

fn locks(b: &Report, a: &Report) -> Vec<LockDelta> {
    let mut by_key: BTreeMap<String, [(f64, f64, f64); 2]> = BTreeMap::new();
    for (i, r) in [b, a].into_iter().enumerate() {
        for l in r.locks.iter().filter(|l| l.contention) {
            let e = by_key.entry(lock_key(l)).or_default();
            e[i].0 += l.wait_ns as f64;
            e[i].1 += l.blocked_ns as f64;
            e[i].2 += l.wakes as f64;
        }
    }
    let mut out: Vec<LockDelta> = by_key
        .into_iter()
        .map(|(lock, [x, y])| LockDelta {
            lock,
            wait_ns: delta("wait_ns", x.0, y.0),
            blocked_ns: delta("blocked_ns", x.1, y.1),
            wakes: delta("wakes", x.2, y.2),
        })
        .collect();
    out.sort_by(|p, q| {
        let most = |d: &LockDelta| d.wait_ns.before.max(d.wait_ns.after);
        most(q).total_cmp(&most(p)).then(p.lock.cmp(&q.lock))
    });
    out
}

fn reference(f: &Finding) -> FindingRef {
    FindingRef {
        id: f.id.clone(),
        title: f.title.clone(),
        culprit: f.culprit.name.clone(),
        severity: f.severity,
    }
}

/// Findings match by rule and culprit, then, for what is left, by rule
/// alone (a culprit may be named differently in another run, such as a
/// semaphore's id).
fn findings(before: &[Finding], after: &[Finding]) -> FindingsDelta {
    let mut left: Vec<Option<&Finding>> = after.iter().map(Some).collect();
    let mut out = FindingsDelta::default();
    let mut unmatched = vec![];
    for b in before {
        let same = left
            .iter()
            .position(|a| a.is_some_and(|a| a.id == b.id && a.culprit.name == b.culprit.name));
        match same {
            Some(i) => out.remaining.push(remaining(b, left[i].take().unwrap())),
            None => unmatched.push(b),
        }
    }
    for b in unmatched {
        match left.iter().position(|a| a.is_some_and(|a| a.id == b.id)) {
            Some(i) => out.remaining.push(remaining(b, left[i].take().unwrap())),
            None => out.resolved.push(reference(b)),
        }
    }
    out.new = left.into_iter().flatten().map(reference).collect();
    out
}

fn remaining(b: &Finding, a: &Finding) -> Remaining {
    Remaining {
        id: b.id.clone(),
        culprit: a.culprit.name.clone(),
        before: reference(b),
        after: reference(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{analyse, tests as synthetic};

    /// Before: a syscall storm and a poll scan; after: the storm fixed, the
    /// poll still there, and spinning new.
    fn before_after() -> (Report, Report) {
        let mut before = synthetic::storm("rt_sigprocmask", 2e6, 1.0, 0.8, 160.0);
        before.polls = synthetic::polling("poll", 1000.0, 0.001, 1000, 0.3).polls;
        before.command = Some(vec!["./server".into(), "--old".into()]);
        before.findings = analyse(&before);
        let mut after = synthetic::spinning(0.5, 50, 0.0);
        after.polls = synthetic::polling("poll", 1000.0, 0.001, 1000, 0.2).polls;
        after.duration_ns /= 2;
        after.command = Some(vec!["./server".into(), "--new".into()]);
        after.findings = analyse(&after);
        (before, after)
    }

    #[test]
    fn findings_are_resolved_new_or_remaining() {
        let (b, a) = before_after();
        let d = diff(&b, &a);
        let ids = |v: &[FindingRef]| v.iter().map(|f| f.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&d.findings.resolved), ["syscall.storm"]);
        assert_eq!(ids(&d.findings.new), ["spin.waste"]);
        assert_eq!(d.findings.remaining.len(), 1);
        assert_eq!(d.findings.remaining[0].id, "poll.low-readiness");
        let wall = &d.metrics[0];
        assert_eq!((wall.metric.as_str(), wall.change), ("wall_ns", Some(-0.5)));
        let sc = d
            .syscalls
            .iter()
            .find(|s| s.name == "rt_sigprocmask")
            .unwrap();
        assert_eq!(
            (sc.calls.before, sc.calls.after, sc.calls.change),
            (2e6, 0.0, Some(-1.0))
        );
    }

    #[test]
    fn a_semaphore_keeps_its_identity_across_runs_though_its_id_changes() {
        let mut b = crate::findings::tests::base();
        let mut l = crate::analyze::build::tests::sample_lock(LockKind::SysvSem, "x");
        l.symbol = None;
        l.semid = Some(1);
        l.semnum = Some(2);
        b.locks = vec![l.clone()];
        let mut a = b.clone();
        a.locks[0].semid = Some(99);
        a.locks[0].wait_ns /= 4;
        let d = diff(&b, &a);
        assert_eq!(d.locks.len(), 1);
        assert_eq!(d.locks[0].lock, "sysv-sem sem 2");
        assert_eq!(d.locks[0].wait_ns.change, Some(-0.75));
    }

    #[test]
    fn golden_diff_text_and_json() {
        let (mut b, mut a) = before_after();
        b.kerntax_version = "VERSION".into();
        a.kerntax_version = "VERSION".into();
        let d = diff(&b, &a);
        crate::render::assert_golden("diff.txt", &crate::render::diff_text::render(&d));
        crate::render::assert_golden("diff.json", &serde_json::to_string_pretty(&d).unwrap());
    }

    #[test]
    fn changes_from_zero_and_to_nothing() {
        assert_eq!(delta("x", 0.0, 5.0).change, None);
        assert_eq!(delta("x", 4.0, 0.0).change, Some(-1.0));
        assert_eq!(delta("x", f64::NAN, 1.0).before, 0.0);
    }
}
