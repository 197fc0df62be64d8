//! What one window of `kerntax top` shows, made from the window's report:
//! per thread (and per process) where its wall time went — on a CPU, on a
//! run queue, in a lock wait, waiting for work, in I/O, in poll, asleep —
//! its syscall and switch rates and the wait site it spent most time at;
//! and the findings that hold over the window. Pure data: the screen, the
//! plain frames and the JSON lines all render a `Snapshot`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::report::{Finding, OffCpuReason, Report, WaitClass};

/// Below this share of the window no column names a row's state: the
/// thread did nothing measurable (its sleep, if any, goes on past the
/// window and is counted in the window it ends in).
pub const MIN_STATE_SHARE: f64 = 0.01;
/// Frames of a finding's culprit kept for its detail view.
pub const CULPRIT_FRAMES: usize = 12;

/// Where a row's window went, as shares of the window's wall time (0..1
/// each for a thread; a process sums its threads').
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Shares {
    pub on_cpu: f64,
    pub run_queue: f64,
    pub lock: f64,
    pub waiting_for_work: f64,
    pub io: f64,
    pub poll: f64,
    pub sleep: f64,
}

impl Shares {
    fn add(&mut self, o: &Shares) {
        self.on_cpu += o.on_cpu;
        self.run_queue += o.run_queue;
        self.lock += o.lock;
        self.waiting_for_work += o.waiting_for_work;
        self.io += o.io;
        self.poll += o.poll;
        self.sleep += o.sleep;
    }

    /// The columns every view shows, as percents with one decimal: on a
    /// CPU, run queue, lock, waiting for work, I/O, poll.
    pub fn percents(&self) -> [String; 6] {
        [
            self.on_cpu,
            self.run_queue,
            self.lock,
            self.waiting_for_work,
            self.io,
            self.poll,
        ]
        .map(|x| format!("{:.1}", x * 100.0))
    }

    /// The largest share's name, the row's state; "idle" under
    /// MIN_STATE_SHARE of the window per thread.
    pub fn state(&self, threads: u32) -> &'static str {
        let all = [
            (self.on_cpu, "cpu"),
            (self.run_queue, "runq"),
            (self.lock, "lock"),
            (self.waiting_for_work, "work"),
            (self.io, "io"),
            (self.poll, "poll"),
            (self.sleep, "sleep"),
        ];
        let (share, name) = all
            .into_iter()
            .fold((0.0, "idle"), |best, x| if x.0 > best.0 { x } else { best });
        if share < MIN_STATE_SHARE * threads.max(1) as f64 {
            "idle"
        } else {
            name
        }
    }
}

/// A thread, or a process (its threads summed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub pid: u32,
    /// None for a process row.
    pub tid: Option<u32>,
    pub comm: String,
    pub threads: u32,
    /// What most of its window was (`Shares::state`).
    pub state: String,
    pub shares: Shares,
    pub syscalls_per_s: f64,
    pub voluntary_switches_per_s: f64,
    pub involuntary_switches_per_s: f64,
    /// Where it waited most: the program's function and what its waits
    /// are, e.g. `Namespace::Get (contention)`.
    pub wait_site: Option<String>,
    pub exited: bool,
}

/// A finding in one line: its title, with its culprit first unless the
/// title names it already.
pub fn finding_line(h: &Headline) -> String {
    if h.title.contains(&h.culprit) {
        format!("{} ({})", h.title, h.id)
    } else {
        format!("{}: {} ({})", h.culprit, h.title, h.id)
    }
}

/// A finding, as the header and its detail show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    pub id: String,
    pub title: String,
    pub severity: f64,
    pub culprit: String,
    pub frames: Vec<crate::frame::Frame>,
    /// Each figure against its threshold, in words.
    pub evidence: Vec<String>,
    pub remedy: String,
    pub gain: String,
}

/// One window, ready to show.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Seconds from the start of the view to the window's end.
    pub at_s: f64,
    pub window_s: f64,
    pub target: String,
    pub cpus: u32,
    pub cpus_used: f64,
    pub syscalls_per_s: f64,
    pub voluntary_switches_per_s: f64,
    pub involuntary_switches_per_s: f64,
    pub findings: Vec<Headline>,
    /// Most on-CPU time first.
    pub threads: Vec<Row>,
    pub processes: Vec<Row>,
    /// Events, samples and counts lost in the window (`loss`).
    pub lost: u64,
    /// Set once profiling ended (the target exited, ...).
    pub ended: Option<String>,
}

fn headline(f: &Finding) -> Headline {
    Headline {
        id: f.id.clone(),
        title: f.title.clone(),
        severity: f.severity,
        culprit: f.culprit.name.clone(),
        frames: f
            .culprit
            .frames
            .iter()
            .take(CULPRIT_FRAMES)
            .cloned()
            .collect(),
        evidence: f
            .evidence
            .iter()
            .map(|e| {
                let bound = match e.bound {
                    crate::report::Bound::Min => ">=",
                    crate::report::Bound::Max => "<=",
                };
                format!("{} = {:.3} ({bound} {})", e.metric, e.value, e.threshold)
            })
            .collect(),
        remedy: f.remedy.clone(),
        gain: f.expected_gain.words(""),
    }
}

fn class_words(class: WaitClass) -> &'static str {
    match class {
        WaitClass::Contention => "contention",
        other => other.name(),
    }
}

/// How a thread's wall time split over the window: on-CPU time from its
/// usage, off-CPU time by reason. A sleep is counted in the window it ends
/// in, so one that began earlier can exceed what is left of this window:
/// the off-CPU shares are then scaled down to fit.
fn shares(r: &Report, tid: u32, cpu_ns: u64) -> Shares {
    let window = r.duration_ns.max(1) as f64;
    let mut s = Shares {
        on_cpu: (cpu_ns as f64 / window).min(1.0),
        ..Shares::default()
    };
    if let Some(off) = r.offcpu.iter().find(|o| o.tid == tid) {
        for reason in &off.reasons {
            let share = reason.ns as f64 / window;
            match reason.reason {
                OffCpuReason::Involuntary => s.run_queue += share,
                OffCpuReason::Lock => s.lock += share,
                OffCpuReason::WaitingForWork => s.waiting_for_work += share,
                OffCpuReason::IoMultiplexing => s.poll += share,
                OffCpuReason::BlockingSyscall | OffCpuReason::Io | OffCpuReason::Other => {
                    s.io += share
                }
                OffCpuReason::Sleep => s.sleep += share,
            }
        }
    }
    let off = s.run_queue + s.lock + s.waiting_for_work + s.io + s.poll + s.sleep;
    let room = (1.0 - s.on_cpu).max(0.0);
    if off > room && off > 0.0 {
        let k = room / off;
        for x in [
            &mut s.run_queue,
            &mut s.lock,
            &mut s.waiting_for_work,
            &mut s.io,
            &mut s.poll,
            &mut s.sleep,
        ] {
            *x *= k;
        }
    }
    s
}

/// The wait site with the most waiting among those `tid` waited at.
fn wait_site(r: &Report, tid: u32) -> Option<String> {
    let site = r
        .waits
        .iter()
        .filter(|w| w.waiter_tids.contains(&tid))
        .max_by_key(|w| w.wait_ns)?;
    let what = match &site.runtime_lock {
        Some(lock) => lock.clone(),
        None => class_words(site.class).to_string(),
    };
    Some(format!("{} ({what})", site.function))
}

/// The window's snapshot, `at_s` seconds into the view.
pub fn of(r: &Report, at_s: f64) -> Snapshot {
    let window_s = r.duration_ns as f64 / 1e9;
    let per_s = |n: u64| {
        if window_s > 0.0 {
            n as f64 / window_s
        } else {
            0.0
        }
    };
    let mut threads: Vec<Row> = r
        .threads
        .iter()
        .map(|t| {
            let sh = shares(r, t.tid, t.user_ns + t.sys_ns);
            Row {
                pid: t.pid,
                tid: Some(t.tid),
                comm: t.comm.clone(),
                threads: 1,
                state: sh.state(1).to_string(),
                shares: sh,
                syscalls_per_s: per_s(t.syscalls),
                voluntary_switches_per_s: per_s(t.voluntary_switches),
                involuntary_switches_per_s: per_s(t.involuntary_switches),
                wait_site: wait_site(r, t.tid),
                exited: t.exited,
            }
        })
        .collect();
    threads.sort_by(|a, b| {
        b.shares
            .on_cpu
            .total_cmp(&a.shares.on_cpu)
            .then(a.tid.cmp(&b.tid))
    });
    let processes = processes(&threads, r);
    let target = match &r.command {
        Some(argv) => format!("{} (pid {})", argv.join(" "), r.target_pid),
        None => format!(
            "pid {} ({})",
            r.target_pid,
            r.processes
                .iter()
                .find(|p| p.pid == r.target_pid)
                .map_or("?", |p| p.comm.as_str())
        ),
    };
    Snapshot {
        at_s,
        window_s,
        target,
        cpus: r.summary.cpus,
        cpus_used: r.summary.cpus_used,
        syscalls_per_s: r.summary.syscalls_per_s,
        voluntary_switches_per_s: r.summary.voluntary_switches_per_s,
        involuntary_switches_per_s: r.summary.involuntary_switches_per_s,
        findings: r.findings.iter().map(headline).collect(),
        threads,
        processes,
        lost: r.loss.total(),
        ended: None,
    }
}

/// The threads summed by process, most on-CPU time first.
fn processes(threads: &[Row], r: &Report) -> Vec<Row> {
    let mut by: BTreeMap<u32, Row> = BTreeMap::new();
    let mut sites: BTreeMap<u32, BTreeMap<String, f64>> = BTreeMap::new();
    for t in threads {
        let e = by.entry(t.pid).or_insert_with(|| Row {
            pid: t.pid,
            tid: None,
            comm: r
                .processes
                .iter()
                .find(|p| p.pid == t.pid)
                .map_or_else(|| t.comm.clone(), |p| p.comm.clone()),
            threads: 0,
            state: String::new(),
            shares: Shares::default(),
            syscalls_per_s: 0.0,
            voluntary_switches_per_s: 0.0,
            involuntary_switches_per_s: 0.0,
            wait_site: None,
            exited: true,
        });
        e.threads += 1;
        e.shares.add(&t.shares);
        e.syscalls_per_s += t.syscalls_per_s;
        e.voluntary_switches_per_s += t.voluntary_switches_per_s;
        e.involuntary_switches_per_s += t.involuntary_switches_per_s;
        e.exited &= t.exited;
        if let Some(site) = &t.wait_site {
            let waited = t.shares.lock + t.shares.waiting_for_work + t.shares.io + t.shares.poll;
            *sites
                .entry(t.pid)
                .or_default()
                .entry(site.clone())
                .or_default() += waited;
        }
    }
    let mut out: Vec<Row> = by
        .into_values()
        .map(|mut p| {
            p.state = p.shares.state(p.threads).to_string();
            p.wait_site = sites.get(&p.pid).and_then(|s| {
                s.iter()
                    .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0)))
                    .map(|(site, _)| site.clone())
            });
            p
        })
        .collect();
    out.sort_by(|a, b| {
        b.shares
            .on_cpu
            .total_cmp(&a.shares.on_cpu)
            .then(a.pid.cmp(&b.pid))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_line_names_its_culprit_once() {
        let mut h = crate::top::fixture::lock_story().findings.remove(0);
        assert_eq!(
            finding_line(&h),
            "g_namespace_lock (namespace_bad): One exclusive lock serializes the threads \
             that read a shared table (lock.exclusive-hot)"
        );
        h.title = format!("{} is fought over", h.culprit);
        assert_eq!(
            finding_line(&h),
            "g_namespace_lock (namespace_bad) is fought over (lock.exclusive-hot)"
        );
    }

    #[test]
    fn a_state_needs_a_share_of_the_window_per_thread() {
        let s = |lock: f64| Shares {
            lock,
            ..Shares::default()
        };
        assert_eq!(s(MIN_STATE_SHARE).state(1), "lock");
        assert_eq!(s(MIN_STATE_SHARE * 0.99).state(1), "idle");
        assert_eq!(s(MIN_STATE_SHARE * 2.0).state(2), "lock");
        assert_eq!(s(MIN_STATE_SHARE * 1.99).state(2), "idle");
    }

    #[test]
    fn a_sleep_longer_than_what_is_left_of_the_window_is_scaled_into_it() {
        use crate::report::{OffCpuReasonReport, OffCpuThread};
        let mut r = crate::findings::tests::base();
        r.duration_ns = 1_000_000_000;
        let reason = |reason, ns| OffCpuReasonReport {
            reason,
            ns,
            count: 1,
            syscalls: Default::default(),
            stacks: vec![],
        };
        r.offcpu = vec![OffCpuThread {
            tid: 7,
            pid: 7,
            comm: "t".into(),
            total_ns: 0,
            wanted_ns: 0,
            // A 3 s lock wait ending in this window, and 0.5 s on a run
            // queue, beside 0.2 s on a CPU.
            reasons: vec![
                reason(OffCpuReason::Lock, 3_000_000_000),
                reason(OffCpuReason::Involuntary, 500_000_000),
            ],
        }];
        let sh = shares(&r, 7, 200_000_000);
        assert!((sh.on_cpu - 0.2).abs() < 1e-9);
        assert!((sh.lock - 0.8 * 3.0 / 3.5).abs() < 1e-9, "{sh:?}");
        assert!((sh.run_queue - 0.8 * 0.5 / 3.5).abs() < 1e-9, "{sh:?}");
        // What fits is left as it is.
        r.offcpu[0].reasons = vec![reason(OffCpuReason::IoMultiplexing, 300_000_000)];
        let sh = shares(&r, 7, 200_000_000);
        assert!((sh.poll - 0.3).abs() < 1e-9, "{sh:?}");
    }
}
