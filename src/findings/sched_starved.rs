//! `sched.starved` (issue 37: a validation run slowed by its neighbours):
//! the target's threads wait for CPUs that other processes hold. Its own
//! code is not the cause; the remedy is the user's say over the machine.
//!
//! Two signals, each the kernel's: of the time the target's threads wanted
//! to run, the share they spent runnable on a run queue (its off-CPU
//! "involuntary" time against its CPU time), and the CPU time the rest of
//! the host used over the same window (/proc, collect/host.rs), with the
//! processes that used it named; and the host had no CPU to spare (its
//! idle CPUs over the window). `sched.oversubscribed` is the same wait
//! when the target's own threads outnumber the CPUs and the rest of the
//! host is quiet; this rule is the wait when the rest of the host is not.

use super::common::*;
use crate::report::{Culprit, CulpritKind, Finding, OffCpuReason, Report};

pub const ID: &str = "sched.starved";
/// Of the time its threads wanted to run (ran, or waited for a CPU), the
/// share they waited.
pub const MIN_WAIT_SHARE: f64 = 0.3;
/// CPUs the other processes kept busy on average.
pub const MIN_OTHERS_CPUS: f64 = 0.5;
/// CPUs the host left idle, at most: a wait for a CPU while CPUs sit idle
/// is the scheduler's wake-up latency (a thread woken onto a busy CPU
/// before another takes it), not CPUs others hold. Blind cases: Debian's
/// etcd under a paced load (0.25 CPUs used, 1.2 idle) and ActiveMQ's
/// producer (1.0 idle) read as starved without it.
pub const MAX_HOST_IDLE_CPUS: f64 = 0.5;
/// Others named in the title.
const NAMED: usize = 3;

pub fn check(r: &Report) -> Vec<Finding> {
    let involuntary_ns: f64 = r
        .offcpu
        .iter()
        .flat_map(|t| t.reasons.iter())
        .filter(|x| x.reason == OffCpuReason::Involuntary)
        .map(|x| x.ns as f64)
        .sum();
    let waiting = ratio(involuntary_ns, wall_ns(r));
    let wanted = r.summary.cpus_used + waiting;
    let wait_share = ratio(waiting, wanted);
    let others = r.others_cpus();
    let named: Vec<String> = r
        .host
        .others
        .iter()
        .take(NAMED)
        .map(|p| format!("{} (pid {}) {:.2}", p.comm, p.pid, p.cpus))
        .collect();
    let held_by = if named.is_empty() {
        "processes that ended before the run did".to_string()
    } else {
        named.join(", ")
    };
    let threads = busy_threads(r).max(1) as f64;
    let idle = (f64::from(r.summary.cpus) - r.host.busy_cpus).max(0.0);
    Draft {
        id: ID,
        title: format!(
            "Starved by other processes: its threads waited for a CPU {:.0}% of the time they wanted to run, while others used {others:.1} of {} CPUs: {held_by}",
            wait_share * 100.0,
            r.summary.cpus
        ),
        severity: ratio(involuntary_ns, wall_ns(r) * threads),
        evidence: vec![
            at_least("runqueue_share_of_wanted", wait_share, MIN_WAIT_SHARE),
            at_least("others_cpus", others, MIN_OTHERS_CPUS),
            at_most("host_idle_cpus", idle, MAX_HOST_IDLE_CPUS),
            // Its own threads fit the CPUs: when they outnumber them, the
            // wait is its own (`sched.oversubscribed`), whoever else runs.
            at_most(
                "wanted_per_cpu",
                ratio(wanted, f64::from(r.summary.cpus.max(1))),
                super::sched_oversubscribed::MIN_RUNNABLE_PER_CPU,
            ),
        ],
        culprit: Culprit {
            kind: CulpritKind::Process,
            name: held_by.clone(),
            frames: vec![],
        },
        remedy: format!(
            "Other processes hold the CPUs its threads wait for ({held_by}): the time is lost \
             to them, not to the program's own code. Give it the CPUs first: a higher priority \
             (nice -n -5 for it, renice +10 for them; chrt for latency-critical work), CPUs of \
             its own (taskset or a cpuset, with the others kept off them), a limit on the \
             others (a cgroup's cpu.max or cpu.weight; systemd's CPUQuota= or CPUWeight=), or \
             the others moved to another machine or another time."
        ),
        expected_gain: super::gain::predict(
            r,
            &super::gain::fixes::alone("were the CPUs its own (the others' work elsewhere)".into()),
        ),
    }
    .fire()
    .into_iter()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::{base, fired};
    use crate::report::{HostProcess, HostUsage, OffCpuReasonReport, OffCpuThread};

    const WALL: f64 = 1e9;

    /// One thread that ran `used` CPUs and waited for one `waiting` of the
    /// run, on 2 CPUs, while another process used `others` CPUs (the rest
    /// of the 2 idle).
    fn starved(used: f64, waiting: f64, others: f64) -> Report {
        let mut r = base();
        r.duration_ns = WALL as u64;
        r.summary.cpus = 2;
        r.summary.cpus_used = used;
        r.profiler.window_cpu_ns = 0;
        let inv = (waiting * WALL) as u64;
        r.offcpu = vec![OffCpuThread {
            tid: 101,
            pid: 100,
            comm: "gzip".into(),
            total_ns: inv,
            wanted_ns: inv,
            reasons: vec![OffCpuReasonReport {
                reason: OffCpuReason::Involuntary,
                ns: inv,
                count: 10,
                syscalls: Default::default(),
                stacks: vec![],
            }],
        }];
        r.host = HostUsage {
            measured: true,
            busy_cpus: used + others,
            steal_cpus: 0.0,
            others_named_cpus: others,
            others: vec![HostProcess {
                pid: 7,
                comm: "sha256sum".into(),
                cpus: others,
            }],
        };
        r
    }

    fn fires(r: &Report) -> bool {
        fired(check, r)
    }

    /// Waiting `share` of the time it wanted a CPU, with `wanted` CPUs.
    fn split(share: f64, wanted: f64) -> (f64, f64) {
        (wanted * (1.0 - share), wanted * share)
    }

    #[test]
    fn sched_starved_thresholds_issue_37() {
        let (up, down) = (1.02, 0.98);
        // It uses 1.1 CPUs: with the others at their threshold the host
        // has under MAX_HOST_IDLE_CPUS idle either side of it.
        let wanted = |share: f64| 1.1 / (1.0 - share);
        let (used, waiting) = split(MIN_WAIT_SHARE * up, wanted(MIN_WAIT_SHARE * up));
        assert!(fires(&starved(used, waiting, MIN_OTHERS_CPUS * up)));
        let (used_less, waiting_less) = split(MIN_WAIT_SHARE * down, wanted(MIN_WAIT_SHARE * down));
        assert!(!fires(&starved(
            used_less,
            waiting_less,
            MIN_OTHERS_CPUS * up
        )));
        assert!(!fires(&starved(used, waiting, MIN_OTHERS_CPUS * down)));
        // Its own threads outnumber the CPUs: its own wait, not theirs.
        let max = super::super::sched_oversubscribed::MIN_RUNNABLE_PER_CPU * 2.0;
        let (u, w) = split(0.5, max * down);
        assert!(fires(&starved(u, w, 1.0)));
        let (u, w) = split(0.5, max * up);
        assert!(!fires(&starved(u, w, 1.0)));
        // CPUs idle: a wake-up's latency, not CPUs held by others.
        let (u, w) = split(0.4, 1.5);
        let others = |idle: f64| 2.0 - u - idle;
        assert!(fires(&starved(u, w, others(MAX_HOST_IDLE_CPUS * down))));
        assert!(!fires(&starved(u, w, others(MAX_HOST_IDLE_CPUS * up))));
        // The host not measured (an older report): nothing to blame.
        let mut r = starved(used, waiting, 1.5);
        r.host.measured = false;
        assert!(!fires(&r));
    }

    #[test]
    fn the_neighbours_are_named_with_their_share() {
        let f = &check(&starved(0.5, 0.5, 1.5))[0];
        assert!(f.title.contains("sha256sum (pid 7) 1.50"), "{}", f.title);
        assert!(f.title.contains("50% of the time"), "{}", f.title);
        assert!(f.remedy.contains("cpu.max"), "{}", f.remedy);
    }
}
