//! What the rest of the host did with the CPUs while the target ran (issue
//! 37: a program starved by its neighbours). A target whose threads wait for
//! a CPU they do not oversubscribe themselves waits for CPUs that others
//! hold; who they are is the user's lever (priority, affinity, a cgroup
//! limit, moving the neighbour).
//!
//! Read from /proc at the window's start and end, not hooked: the CPUs' busy
//! time (/proc/stat) and each process's CPU time (/proc/PID/stat), in clock
//! ticks (USER_HZ, 100 a second). A process that started and ended inside
//! the window is in the busy time but has no name here; that remainder is
//! said as such. Cost: one read of each process's stat file, twice.

use std::collections::HashMap;
use std::fs;

use crate::report::{HostProcess, HostUsage};

/// Other processes kept by name, most CPU first.
const MAX_PROCESSES: usize = 8;
/// Clock ticks per second of /proc's CPU times (USER_HZ: 100 on every
/// Linux architecture kerntax runs on).
const TICKS_PER_S: u64 = 100;
const NS_PER_TICK: u64 = 1_000_000_000 / TICKS_PER_S;

/// The host's CPU time at one moment.
pub struct HostSnapshot {
    /// All CPUs' non-idle time (user, nice, system, irq, softirq, steal).
    busy_ticks: u64,
    /// Of it, the time the hypervisor ran something else on this VM's
    /// CPUs (steal).
    steal_ticks: u64,
    /// Per process: its command name, CPU time (user + system) and start
    /// time (which tells a reused pid from the process it had).
    processes: HashMap<u32, (String, u64, u64)>,
}

impl HostSnapshot {
    /// None when /proc/stat cannot be read.
    pub fn now() -> Option<HostSnapshot> {
        let stat = fs::read_to_string("/proc/stat").ok()?;
        let (busy_ticks, steal_ticks) = busy_ticks(&stat)?;
        let mut processes = HashMap::new();
        for e in fs::read_dir("/proc").ok()?.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(p) = fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| process_ticks(&s))
            {
                processes.insert(pid, p);
            }
        }
        Some(HostSnapshot {
            busy_ticks,
            steal_ticks,
            processes,
        })
    }
}

/// The `cpu` line's non-idle ticks, and of them the stolen ones: user
/// nice system idle iowait irq softirq steal (guest time is already in
/// user).
fn busy_ticks(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    Some((at(0) + at(1) + at(2) + at(5) + at(6) + at(7), at(7)))
}

/// A process's comm, utime + stime and start time from its stat line (the
/// comm may hold spaces and parentheses: the fields after it follow the
/// last ')').
fn process_ticks(stat: &str) -> Option<(String, u64, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the comm.
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    // Field 22, starttime.
    let started: u64 = rest.get(19)?.parse().ok()?;
    Some((comm, utime + stime, started))
}

/// The CPUs used by everyone and by the processes other than `mine` (the
/// target's and kerntax's own) between two snapshots `wall_ns` apart.
pub fn usage(start: &HostSnapshot, end: &HostSnapshot, wall_ns: u64, mine: &[u32]) -> HostUsage {
    let per_s = |ticks: u64| (ticks * NS_PER_TICK) as f64 / wall_ns.max(1) as f64;
    let mut others: Vec<HostProcess> = end
        .processes
        .iter()
        .filter(|(pid, _)| !mine.contains(pid))
        .filter_map(|(&pid, (comm, t, started))| {
            // A process new since the start counts from zero (a pid reused
            // by another process too). Not its comm: a kernel worker's
            // names the work it is doing.
            let before = start
                .processes
                .get(&pid)
                .filter(|(_, _, s)| s == started)
                .map_or(0, |(_, b, _)| *b);
            let ticks = t.saturating_sub(before);
            (ticks > 0).then(|| HostProcess {
                pid,
                comm: comm.clone(),
                cpus: per_s(ticks),
            })
        })
        .collect();
    others.sort_by(|a, b| b.cpus.total_cmp(&a.cpus).then(a.pid.cmp(&b.pid)));
    let named_cpus = others.iter().map(|p| p.cpus).sum();
    others.truncate(MAX_PROCESSES);
    HostUsage {
        measured: true,
        busy_cpus: per_s(end.busy_ticks.saturating_sub(start.busy_ticks)),
        steal_cpus: per_s(end.steal_ticks.saturating_sub(start.steal_ticks)),
        others_named_cpus: named_cpus,
        others,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comm_with_spaces_and_parentheses_is_read_whole() {
        let line = "42 (my (odd) prog) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 5 1000";
        assert_eq!(process_ticks(line), Some(("my (odd) prog".into(), 300, 5)));
        assert_eq!(
            busy_ticks("cpu  10 1 5 1000 7 2 3 4 0 0\ncpu0 1 1 1 1 1 1 1 1 0 0\n"),
            Some((25, 4))
        );
    }

    #[test]
    fn others_are_what_the_rest_used_most_first() {
        let snap = |busy, p: &[(u32, &str, u64, u64)]| HostSnapshot {
            busy_ticks: busy,
            steal_ticks: busy / 8,
            processes: p
                .iter()
                .map(|&(pid, c, t, s)| (pid, (c.to_string(), t, s)))
                .collect(),
        };
        let start = snap(
            0,
            &[
                (1, "target", 0, 1),
                (2, "yes", 100, 1),
                (3, "kworker/0:0-a", 5, 1),
                (5, "old", 70, 1),
            ],
        );
        // The kernel worker renamed itself; pid 5 is another process now.
        let end = snap(
            400,
            &[
                (1, "target", 100, 1),
                (2, "yes", 300, 1),
                (3, "kworker/0:0-b", 5, 1),
                (4, "gcc", 50, 9),
                (5, "new", 80, 9),
                (9, "kerntax", 10, 1),
            ],
        );
        let u = usage(&start, &end, 2_000_000_000, &[1, 9]);
        assert!(u.measured);
        assert!((u.busy_cpus - 2.0).abs() < 1e-9);
        assert!((u.steal_cpus - 0.25).abs() < 1e-9);
        let named: Vec<(&str, f64)> = u.others.iter().map(|p| (p.comm.as_str(), p.cpus)).collect();
        assert_eq!(named, vec![("yes", 1.0), ("new", 0.4), ("gcc", 0.25)]);
        assert!((u.others_named_cpus - 1.65).abs() < 1e-9);
    }
}
