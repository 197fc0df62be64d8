//! What a fix is worth (issue 39): a finding's expected gain predicted from
//! the run's own critical path, not from the culprit's share of the run.
//!
//! A lock's waiting is not what its removal saves: the work it serialised
//! then runs in parallel up to the CPUs, the CPU its hand-offs cost goes
//! too, and what bounds the run next may be another thread's chain. So the
//! rules describe their fix as a [`Fix`] (the waits it removes, the CPU it
//! removes, named by the code the CPU samples pass through), and
//! [`predict`] builds the run's bounds from the report ([`model`]) and
//! says how much shorter the fix makes them, with a range.
//!
//! Two corrections make the prediction about the program rather than about
//! the profiled run: the profiler's own CPU (samples inside kerntax's BPF
//! programs) is taken out of every thread's CPU time before the model is
//! built, and a thread's waits count as fixed (the disk, a peer, a timer)
//! or elastic (ended by another thread of the program) by who ended them
//! in the wake-up graph.

pub mod fixes;
pub mod model;
mod samples;

use std::collections::{BTreeSet, HashMap};

use crate::report::{ExpectedGain, OffCpuReason, Report};

pub use samples::{Samples, Through, lock_machinery};

/// What a fix removes, as a rule states it.
#[derive(Clone, Debug, Default)]
pub struct Fix {
    /// Waits it removes: thread, time.
    pub waits: Vec<(u32, f64)>,
    /// The off-CPU reasons those waits fall under.
    pub wait_reasons: Vec<OffCpuReason>,
    /// The share of the program's CPU samples it removes (the profiler's
    /// own aside), and how many samples that share rests on.
    pub cpu_share: f64,
    pub cpu_samples: u64,
    /// Those samples by thread, `(tid, samples)`: the CPU removed is
    /// charged to the threads that spent it (empty: where is not known).
    pub cpu_where: Vec<(u32, u64)>,
    /// The threads that CPU is charged to, in proportion to their CPU time
    /// (empty: all of the program's).
    pub cpu_threads: Vec<u32>,
    /// The share of the program's CPU the rule measures the fix removes by
    /// other means (system time in proportion to calls), used where the
    /// run has no CPU samples (recordings made without them).
    pub without_samples: f64,
    /// The most the fix could remove, where the rule cannot tell how far
    /// it reaches (a batched flush that takes the rest of a commit's device
    /// work with it): the range's high end.
    pub at_most: Option<Box<Fix>>,
    /// The least the fix could remove, where the rule's remedy has a
    /// partial form (an adaptive lock that ends a lock's churn but keeps
    /// its collisions): the range's low end.
    pub at_least: Option<Box<Fix>>,
    /// Waits that pace a thread from outside the program (its source, its
    /// disk) and the fix takes away all the same (the source made fast).
    pub fixed_waits: Vec<(u32, f64)>,
    /// The fix leaves the program the CPUs the rest of the host took.
    pub frees_background: bool,
    /// What the prediction assumes, in a line: "were the lock never held
    /// across X".
    pub assumes: String,
}

/// A thread does a real part of the work, and its own chain may bound the
/// run, when its CPU time (or the wait the fix takes from it) is at least
/// this share of the busiest thread's CPU time (housekeeping threads that
/// sleep on timers do not bound a run).
pub const WORKER_CPU_SHARE: f64 = 0.2;

/// A thread of the program whose wake-ups ended at least this share of the
/// program's waiting bounds the run too, whatever its CPU (a pipeline's
/// reader).
pub const BLOCKER_WAIT_SHARE: f64 = 0.1;

/// Below this many CPU samples behind the CPU a fix removes, the share is
/// too uncertain to give a number: the gain is given as a range only.
pub const MIN_FIX_SAMPLES: u64 = 20;

/// Below this share of the measured time explained by the model's bounds,
/// the run's time is mostly something the model does not see: a range
/// only.
pub const MIN_EXPLAINED: f64 = 0.5;

/// The fix's predicted gain, as the report carries it.
pub fn predict(r: &Report, fix: &Fix) -> ExpectedGain {
    let s = Samples::of(r);
    let unsampled;
    let fix = if s.program_samples == 0 && fix.cpu_share == 0.0 && fix.without_samples > 0.0 {
        unsampled = Fix {
            cpu_share: fix.without_samples,
            ..fix.clone()
        };
        &unsampled
    } else {
        fix
    };
    let run = build(r, fix, &s);
    let g = run.gain();
    // The sampled share's own error: two standard errors of a binomial,
    // of the share with two samples added each way (Agresti-Coull), so a
    // share of all or none of a few samples is not certain.
    let sampled = fix.cpu_share > 0.0 && fix.cpu_samples > 0 && s.program_samples > 0;
    let sampling_error = |share: f64| {
        let n = s.program_samples.max(1) as f64 + 4.0;
        let p = (share * (n - 4.0) + 2.0) / n;
        2.0 * (p * (1.0 - p) / n).sqrt()
    };
    let (mut low, mut high) = (g.low, g.high);
    if sampled {
        let err = sampling_error(fix.cpu_share);
        for (end, delta) in [(&mut low, -err), (&mut high, err)] {
            let mut f = fix.clone();
            f.cpu_share = (fix.cpu_share + delta).clamp(0.0, 1.0);
            let other = build(r, &f, &s).gain();
            *end = if delta < 0.0 {
                end.min(other.low)
            } else {
                end.max(other.high)
            };
        }
    }
    // The most the fix could remove is read from samples too: its high
    // end with their error.
    if let Some(most) = &fix.at_most {
        let mut most = (**most).clone();
        if sampled && most.cpu_share > 0.0 {
            most.cpu_share = (most.cpu_share + sampling_error(most.cpu_share)).min(1.0);
        }
        high = high.max(build(r, &most, &s).gain().high);
    }
    if let Some(least) = &fix.at_least {
        low = low.min(build(r, least, &s).gain().low);
    }
    // The busiest peer's work, were it serial (a one-thread client), bounds
    // the run whatever the fix: the low end.
    if let Some(peer) = busiest_peer(r) {
        let with_peer = model::Run {
            peer_chain: Some(peer),
            ..run.clone()
        };
        low = low.min(with_peer.gain().low);
    }
    let no_estimate = if sampled && fix.cpu_samples < MIN_FIX_SAMPLES && fix.waits.is_empty() {
        Some(format!(
            "only {} CPU samples show the cost it removes",
            fix.cpu_samples
        ))
    } else if g.explained < MIN_EXPLAINED {
        Some(format!(
            "the run's bounds explain only {:.0}% of its time",
            g.explained * 100.0
        ))
    } else {
        None
    };
    let wall = r.duration_ns as f64;
    let bound = match g.after {
        model::Bound::Cpus => "the CPUs".to_string(),
        model::Bound::Chain(tid) => format!("thread {tid}'s own chain"),
        model::Bound::Peer(pid) => format!("peer {pid}'s work"),
    };
    ExpectedGain {
        time_ns: (g.share * wall).max(0.0) as u64,
        share: g.share,
        basis: format!(
            "the run's critical path with the fix (the CPUs' work and each thread's own \
             chain of CPU and fixed waits; {:.0}% of the time explained): then bound by {bound}",
            g.explained * 100.0
        ),
        estimate: true,
        range: Some([low, high]),
        assumes: Some(fix.assumes.clone()),
        no_estimate,
    }
}

/// The model of the run `r` with `fix` applied.
pub fn build(r: &Report, fix: &Fix, s: &Samples) -> model::Run {
    // The profiler's cost lengthened the run as it lengthened the bound
    // that set it: the wall time without it, in that proportion.
    let with_profiler = build_with(r, fix, &|_| 1.0).makespan(false).0;
    let mut run = build_with(r, fix, &|tid| s.own_share(tid));
    if with_profiler > 0.0 {
        run.wall_ns *= run.makespan(false).0 / with_profiler;
    }
    run
}

/// The model of the run with `own(tid)` of each thread's CPU time its own.
fn build_with(r: &Report, fix: &Fix, own: &dyn Fn(u32) -> f64) -> model::Run {
    let off: HashMap<u32, &crate::report::OffCpuThread> =
        r.offcpu.iter().map(|t| (t.tid, t)).collect();
    let fixed_share = fixed_shares(r);
    let blockers = blockers(r);
    let cpu_of = |t: &crate::report::ThreadReport| (t.user_ns + t.sys_ns) as f64;
    // Whether a thread does a real part of the work is read from its CPU
    // time as measured; the wait a fix takes from it, against its own.
    let max_cpu = r.threads.iter().map(cpu_of).fold(0.0, f64::max);
    let max_own = r
        .threads
        .iter()
        .map(|t| cpu_of(t) * own(t.tid))
        .fold(0.0, f64::max);
    let removed_waits: HashMap<u32, f64> = fix.waits.iter().copied().collect();
    let is_charged = |tid: u32| fix.cpu_threads.is_empty() || fix.cpu_threads.contains(&tid);
    let charged_cpu: f64 = r
        .threads
        .iter()
        .filter(|t| is_charged(t.tid))
        .map(|t| cpu_of(t) * own(t.tid))
        .sum();
    let program_cpu: f64 = r.threads.iter().map(|t| cpu_of(t) * own(t.tid)).sum();
    // The CPU removed is a share of the whole program's, charged to the
    // fix's threads (at most all of theirs): to each as much as its samples
    // show it spent, what no charged thread's sample shows in proportion
    // to their CPU time.
    let removed_cpu = (fix.cpu_share * program_cpu).min(charged_cpu);
    let where_all: f64 = fix.cpu_where.iter().map(|w| w.1 as f64).sum();
    let where_charged: HashMap<u32, f64> = fix
        .cpu_where
        .iter()
        .filter(|w| is_charged(w.0) && r.threads.iter().any(|t| t.tid == w.0))
        .map(|w| (w.0, w.1 as f64))
        .collect();
    let unplaced = if where_all > 0.0 {
        1.0 - where_charged.values().sum::<f64>() / where_all
    } else {
        1.0
    };
    let charged_share = |tid: u32, cpu: f64| {
        let placed = if where_all > 0.0 {
            where_charged.get(&tid).copied().unwrap_or(0.0) / where_all
        } else {
            0.0
        };
        placed + unplaced * cpu / charged_cpu
    };
    let threads = r
        .threads
        .iter()
        .map(|t| {
            let cpu = cpu_of(t) * own(t.tid);
            let reasons = off.get(&t.tid).map(|o| o.reasons.as_slice()).unwrap_or(&[]);
            let phi = fixed_share.get(&t.tid).copied().unwrap_or(1.0);
            let fixed_of = |reason: OffCpuReason, ns: f64| match reason {
                OffCpuReason::Io | OffCpuReason::Sleep => ns,
                OffCpuReason::IoMultiplexing
                | OffCpuReason::BlockingSyscall
                | OffCpuReason::Other => phi * ns,
                _ => 0.0,
            };
            let fixed: f64 = reasons
                .iter()
                .map(|x| fixed_of(x.reason, x.ns as f64))
                .sum();
            let source = fix
                .fixed_waits
                .iter()
                .filter(|w| w.0 == t.tid)
                .map(|w| w.1)
                .sum::<f64>()
                .min(fixed);
            let removed_wait = removed_waits.get(&t.tid).copied().unwrap_or(0.0);
            // Its time in the fix's reasons, and the fixed part of it.
            let (in_reasons, fixed_in) = reasons
                .iter()
                .filter(|x| fix.wait_reasons.contains(&x.reason))
                .fold((0.0, 0.0), |(all, fixed), x| {
                    (all + x.ns as f64, fixed + fixed_of(x.reason, x.ns as f64))
                });
            let removed_fixed = if in_reasons > 0.0 {
                removed_wait.min(in_reasons) * fixed_in / in_reasons
            } else {
                0.0
            } + source;
            let removed_cpu_ns = if is_charged(t.tid) && charged_cpu > 0.0 {
                (removed_cpu * charged_share(t.tid, cpu)).min(cpu)
            } else {
                0.0
            };
            model::Thread {
                tid: t.tid,
                cpu_ns: cpu,
                fixed_wait_ns: fixed,
                // A thread the fix frees of a real wait bounds the run too;
                // one it frees of a moment's wait (a timer's sleeper that
                // took the lock once) does not.
                works: cpu_of(t) >= WORKER_CPU_SHARE * max_cpu
                    || blockers.contains(&t.tid)
                    || removed_wait >= WORKER_CPU_SHARE * max_own,
                removed_cpu_ns,
                removed_wait_ns: removed_wait + source,
                removed_fixed_ns: removed_fixed,
            }
        })
        .collect();
    let others_ns = r.others_cpus() * r.duration_ns as f64;
    let peers = peers_wake(r);
    model::Run {
        wall_ns: r.duration_ns as f64,
        cpus: cpus(r),
        peer_cpu_ns: if peers { others_ns } else { 0.0 },
        background_cpu_ns: if peers { 0.0 } else { others_ns },
        frees_background: fix.frees_background,
        threads,
        ..model::Run::default()
    }
}

fn cpus(r: &Report) -> f64 {
    if r.summary.cpus > 0 {
        f64::from(r.summary.cpus)
    } else {
        1.0
    }
}

/// For each woken thread of the program, the share of its waiting that
/// something outside the program ended (a peer, the disk, a timer): the
/// part of its waits a fix inside the program does not shorten.
fn fixed_shares(r: &Report) -> HashMap<u32, f64> {
    let mut all: HashMap<u32, (f64, f64)> = HashMap::new();
    for w in &r.wakeups {
        let e = all.entry(w.woken_tid).or_default();
        e.1 += w.wait_ns as f64;
        if !w.waker_in_target {
            e.0 += w.wait_ns as f64;
        }
    }
    all.into_iter()
        .filter(|(_, (_, total))| *total > 0.0)
        .map(|(tid, (fixed, total))| (tid, fixed / total))
        .collect()
}

/// Threads of the program whose wake-ups end a real share of its waiting.
fn blockers(r: &Report) -> BTreeSet<u32> {
    let total: f64 = r.blockers.iter().map(|b| b.wait_ns as f64).sum();
    r.blockers
        .iter()
        .filter(|b| b.in_target && b.wait_ns as f64 >= BLOCKER_WAIT_SHARE * total)
        .map(|b| b.tid)
        .collect()
}

/// A peer that used more than this many CPUs over the run is not serial
/// (one thread cannot): its work is not taken as a chain.
pub const SERIAL_PEER_MAX_CPUS: f64 = 1.0;

/// The busiest peer (another process that woke the program's threads)
/// that may be serial: its pid and CPU time over the run.
fn busiest_peer(r: &Report) -> Option<(u32, f64)> {
    if r.others_cpus() <= 0.0 {
        return None;
    }
    r.host
        .others
        .iter()
        .filter(|o| o.cpus <= SERIAL_PEER_MAX_CPUS)
        .filter(|o| {
            r.wakeups
                .iter()
                .any(|w| peer_wake(w) && w.waker_pid == o.pid)
        })
        .map(|o| (o.pid, o.cpus * r.duration_ns as f64))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// Whether other processes woke the program's threads: the others on the
/// host are then its peers (a load generator), whose work grows with its.
fn peers_wake(r: &Report) -> bool {
    r.wakeups.iter().any(peer_wake)
}

/// A wake-up of the program's threads by another process (not the
/// kernel's pid 0).
fn peer_wake(w: &crate::report::WakeupReport) -> bool {
    !w.waker_in_target && w.waker_pid != 0 && w.count > 0
}

#[cfg(test)]
mod tests;
