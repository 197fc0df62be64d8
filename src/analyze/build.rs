//! Assembles a `Report` from the analyses' results and the kernel's
//! counters, its findings worked out last. No I/O.

use crate::fixed_hash::HashMap;
use std::collections::BTreeMap;

use crate::analyze::aggregate::{ThreadUsage, estimate_sites};
use crate::model::KernelCounters;
use crate::names::{errno_name, syscall_name};
use crate::recording::RunFacts;
use crate::report::*;
use crate::target::ExitStatus;

/// A symbolized call site of one syscall with its summed sample weight.
#[derive(Clone, Debug)]
pub struct SampledSite {
    pub nr: u32,
    pub frames: Vec<crate::frame::Frame>,
    pub weight: u64,
    pub samples: u64,
}

pub struct Inputs {
    /// The run's facts, its timeline with the contended sleeps added.
    pub run: RunFacts,
    pub kernel: KernelCounters,
    pub threads: Vec<ThreadUsage>,
    pub sites: Vec<SampledSite>,
    /// Per file syscall, the paths its sampled calls named (weighted).
    pub paths: HashMap<u32, HashMap<String, u64>>,
    pub locks: Vec<LockReport>,
    pub waits: Vec<WaitSite>,
    pub offcpu: Vec<OffCpuThread>,
    pub wakeups: Vec<WakeupReport>,
    pub blockers: Vec<Blocker>,
    pub polls: Vec<PollReport>,
    pub cpu_samples: CpuProfile,
    pub spin: SpinReport,
}

fn per_s(count: u64, duration_ns: u64) -> f64 {
    if duration_ns == 0 {
        0.0
    } else {
        count as f64 * 1e9 / duration_ns as f64
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

pub fn signal_name(sig: i32) -> String {
    // SAFETY: strsignal returns a pointer to a static or thread-local string.
    let desc = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(sig)) };
    let abbrev = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        _ => return format!("signal {sig} ({})", desc.to_string_lossy()),
    };
    abbrev.to_string()
}

fn processes(threads: &[ThreadUsage]) -> Vec<ProcessReport> {
    let mut by_pid: BTreeMap<u32, Vec<&ThreadUsage>> = BTreeMap::new();
    for t in threads {
        by_pid.entry(t.pid).or_default().push(t);
    }
    by_pid
        .into_iter()
        .map(|(pid, ts)| {
            let leader = ts.iter().find(|t| t.tid == pid).copied();
            let any = leader.unwrap_or(ts[0]);
            ProcessReport {
                pid,
                ppid: any.ppid,
                comm: any.comm.clone(),
                thread_count: ts.len() as u32,
                exit_status: leader
                    .filter(|l| l.exited)
                    .map(|l| ExitStatus::from_wait_status(l.exit_code).shell_code()),
            }
        })
        .collect()
}

/// Paths kept per syscall in the report, most calls first.
const MAX_REPORTED_PATHS: usize = 8;

/// The paths a syscall's sampled calls named, their weights scaled to its
/// exact calls.
fn paths(exact_calls: u64, named: Option<&HashMap<String, u64>>) -> Vec<PathCount> {
    let Some(named) = named else { return vec![] };
    let total: u64 = named.values().sum();
    let mut out: Vec<PathCount> = named
        .iter()
        .map(|(path, &w)| PathCount {
            path: path.clone(),
            calls: if total == 0 {
                0
            } else {
                (w as u128 * exact_calls as u128 / total as u128) as u64
            },
        })
        .collect();
    out.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.path.cmp(&b.path)));
    out.truncate(MAX_REPORTED_PATHS);
    out
}

fn callsites(exact_calls: u64, sites: &[&SampledSite]) -> Vec<Callsite> {
    // Stacks that symbolize alike are one call site.
    let mut merged: BTreeMap<&[crate::frame::Frame], (u64, u64)> = BTreeMap::new();
    for s in sites {
        let e = merged.entry(&s.frames).or_default();
        e.0 += s.weight;
        e.1 += s.samples;
    }
    let list: Vec<_> = merged.into_iter().map(|(k, (w, n))| (k, w, n)).collect();
    estimate_sites(exact_calls, &list)
        .into_iter()
        .map(|s| Callsite {
            frames: s.key.to_vec(),
            calls: s.calls,
            calls_estimated: s.estimated,
            samples: s.samples,
        })
        .collect()
}

pub fn build(inp: Inputs) -> Report {
    let mut sites_by_nr: HashMap<u32, Vec<&SampledSite>> = HashMap::default();
    for s in &inp.sites {
        sites_by_nr.entry(s.nr).or_default().push(s);
    }
    let mut errnos_by_nr: HashMap<u32, BTreeMap<String, u64>> = HashMap::default();
    for &(nr, err, count) in &inp.kernel.errnos {
        *errnos_by_nr
            .entry(nr)
            .or_default()
            .entry(errno_name(err))
            .or_default() += count;
    }

    let mut syscalls: Vec<SyscallReport> = inp
        .kernel
        .syscalls
        .iter()
        .map(|c| {
            let (total_ns, mut hist) = super::latency::estimate(c);
            while hist.last() == Some(&0) {
                hist.pop();
            }
            SyscallReport {
                name: syscall_name(c.nr),
                nr: c.nr,
                calls: c.calls,
                errors: c.errors,
                errnos: errnos_by_nr.remove(&c.nr).unwrap_or_default(),
                total_ns,
                timed_calls: Some(c.timed),
                bytes: if crate::names::moves_data(&syscall_name(c.nr)) {
                    c.ret_sum
                } else {
                    0
                },
                bytes_requested: c.req_sum,
                max_ns: c.max_ns,
                hist_log2_ns: hist,
                unfinished: c.calls.saturating_sub(c.returns),
                callsites: callsites(c.calls, sites_by_nr.get(&c.nr).map_or(&[][..], |v| v)),
                paths: paths(c.calls, inp.paths.get(&c.nr)),
            }
        })
        .collect();
    syscalls.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(b.calls.cmp(&a.calls))
            .then(a.nr.cmp(&b.nr))
    });

    let user_ns: u64 = inp.threads.iter().map(|t| t.user_ns).sum();
    let sys_ns: u64 = inp.threads.iter().map(|t| t.sys_ns).sum();
    let voluntary: u64 = inp.threads.iter().map(|t| t.voluntary_switches).sum();
    let involuntary: u64 = inp.threads.iter().map(|t| t.involuntary_switches).sum();
    let calls: u64 = syscalls.iter().map(|s| s.calls).sum();
    let errors: u64 = syscalls.iter().map(|s| s.errors).sum();
    let d = inp.run.duration_ns;
    let summary = Summary {
        user_ns,
        sys_ns,
        user_percent: percent(user_ns, user_ns + sys_ns),
        sys_percent: percent(sys_ns, user_ns + sys_ns),
        voluntary_switches: voluntary,
        involuntary_switches: involuntary,
        voluntary_switches_per_s: per_s(voluntary, d),
        involuntary_switches_per_s: per_s(involuntary, d),
        syscalls: calls,
        syscall_errors: errors,
        syscalls_per_s: per_s(calls, d),
        cpus: inp.run.cpus,
        cpus_used: per_s(user_ns + sys_ns, d) / 1e9,
    };

    let threads = inp
        .threads
        .iter()
        .map(|t| ThreadReport {
            tid: t.tid,
            pid: t.pid,
            comm: t.comm.clone(),
            user_ns: t.user_ns,
            sys_ns: t.sys_ns,
            voluntary_switches: t.voluntary_switches,
            involuntary_switches: t.involuntary_switches,
            yields: t.yields,
            syscalls: t.syscalls,
            exited: t.exited,
        })
        .collect();

    let mut report = Report {
        schema_version: SCHEMA_VERSION,
        kerntax_version: env!("CARGO_PKG_VERSION").to_string(),
        mode: inp.run.mode,
        command: inp.run.command,
        target_pid: inp.run.target_pid,
        exit_status: inp.run.exit.map(ExitStatus::shell_code),
        exit_signal: match inp.run.exit {
            Some(ExitStatus::Signal(s)) => Some(signal_name(s)),
            _ => None,
        },
        end_reason: inp.run.end_reason,
        duration_ns: d,
        summary,
        findings: vec![],
        processes: processes(&inp.threads),
        threads,
        syscalls,
        locks: inp.locks,
        waits: inp.waits,
        offcpu: inp.offcpu,
        wakeups: inp.wakeups,
        blockers: inp.blockers,
        polls: inp.polls,
        cpu_samples: inp.cpu_samples,
        spin: inp.spin,
        timeline: inp.run.timeline,
        sampling: inp.run.sampling,
        loss: inp.run.loss,
        profiler: inp.run.profiler,
        host: inp.run.host,
    };
    report.findings = crate::findings::analyse(&report);
    report
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::SyscallCounters;

    fn usage(pid: u32, tid: u32, user: u64, sys: u64, exited: bool, exit_code: i32) -> ThreadUsage {
        ThreadUsage {
            yields: 0,
            syscalls: 0,
            tid,
            pid,
            ppid: 1,
            comm: format!("t{tid}"),
            user_ns: user,
            sys_ns: sys,
            voluntary_switches: 2,
            involuntary_switches: 1,
            exited,
            exit_code,
        }
    }

    pub(crate) fn sample_lock(kind: LockKind, symbol: &str) -> LockReport {
        let stack = |f: &str| LockStack {
            frames: vec![
                "__lll_lock_wait (lowlevellock.c:49)".into(),
                format!("{f} (app.c:10)").into(),
            ],
            count: 90,
            wait_ns: 900_000,
            samples: 9,
            estimated: true,
        };
        LockReport {
            kind,
            contention: kind.is_contention(),
            symbol: Some(symbol.into()),
            role: None,
            runtime_lock: None,
            address: Some("0x5000".into()),
            mapping: Some("app".into()),
            pids: vec![100],
            semid: None,
            semnum: None,
            waits: 100,
            blocked: 90,
            futile: 10,
            timeouts: 0,
            wait_ns: 1_000_000,
            blocked_ns: 990_000,
            max_wait_ns: 50_000,
            hist_log2_ns: vec![0, 1],
            cpu_ns: 20_000,
            wakes: 95,
            woken: 90,
            wakes_per_s: 47.5,
            futile_per_s: 5.0,
            threads: 3,
            waiter_stacks: vec![stack("lookup")],
            waker_stacks: vec![stack("release")],
        }
    }

    pub fn sample_inputs() -> Inputs {
        let kernel = KernelCounters {
            syscalls: vec![
                SyscallCounters {
                    nr: 110,
                    calls: 1000,
                    returns: 1000,
                    // A storm: one call in ten timed, scaled to all.
                    timed: 100,
                    total_ns: 5_000,
                    max_ns: 900,
                    hist_log2_ns: vec![0, 0, 0, 0, 0, 1, 99, 0],
                    ..Default::default()
                },
                SyscallCounters {
                    nr: 3,
                    calls: 10,
                    returns: 10,
                    errors: 10,
                    timed: 10,
                    total_ns: 70_000,
                    max_ns: 9000,
                    ..Default::default()
                },
                SyscallCounters {
                    nr: 231,
                    calls: 1,
                    returns: 0,
                    ..Default::default()
                },
            ],
            errnos: vec![(3, 9, 10)],
            ..Default::default()
        };
        Inputs {
            run: sample_facts(),
            kernel,
            threads: vec![
                usage(100, 100, 300, 100, true, 9),
                usage(100, 101, 100, 500, true, 9),
                usage(102, 102, 0, 0, true, 3 << 8),
            ],
            paths: HashMap::default(),
            sites: vec![
                SampledSite {
                    nr: 110,
                    frames: vec![
                        "getppid (libc.so.6)".into(),
                        "call_getppid (calls.c:30)".into(),
                    ],
                    weight: 700,
                    samples: 70,
                },
                SampledSite {
                    nr: 110,
                    frames: vec![
                        "getppid (libc.so.6)".into(),
                        "call_getppid (calls.c:30)".into(),
                    ],
                    weight: 100,
                    samples: 10,
                },
                SampledSite {
                    nr: 110,
                    frames: vec!["getppid (libc.so.6)".into(), "other (calls.c:90)".into()],
                    weight: 200,
                    samples: 20,
                },
            ],
            locks: vec![
                sample_lock(LockKind::Mutex, "g_lock"),
                sample_lock(LockKind::Condvar, "g_cond"),
            ],
            offcpu: vec![],
            wakeups: vec![],
            blockers: vec![],
            polls: vec![],
            cpu_samples: CpuProfile::default(),
            spin: SpinReport::default(),
            waits: vec![sample_wait_site()],
        }
    }

    pub fn sample_facts() -> RunFacts {
        RunFacts {
            mode: Mode::Run,
            command: Some(vec!["calls".into(), "getppid".into()]),
            target_pid: 100,
            exit: Some(ExitStatus::Signal(9)),
            end_reason: EndReason::TargetExited,
            duration_ns: 2_000_000_000,
            start_mono_ns: 0,
            cpus: 2,
            cpu_hz: 99,
            timeline: Timeline::default(),
            sampling: Sampling {
                stack_samples: 100,
                stack_samples_deferred: 0,
                policy: "test".into(),
                latency_policy: "test".into(),
                stack_bytes_copied: 0,
                unwinder: "test".into(),
                jit: vec![],
                interpreters: Default::default(),
            },
            loss: Loss::default(),
            profiler: Profiler {
                mechanism: "test".into(),
                attach_ns: 1,
                peak_rss_bytes: 2,
                kernel: "k".into(),
                kernel_lacks: vec![],
                window_cpu_ns: 3,
                held: [("stacks".to_string(), 4)].into_iter().collect(),
                started_unix_ns: 1_764_000_000_000_000_000,
                programs: vec![crate::model::ProgramCost {
                    name: "kt_sys_enter".into(),
                    runs: 10,
                    run_ns: 1000,
                    recursion_misses: 0,
                }],
            },
            host: Default::default(),
        }
    }

    pub(crate) fn sample_wait_site() -> WaitSite {
        WaitSite {
            function: "Cache::lookup(std::string const&)".into(),
            via: vec!["port::Mutex::Lock()".into()],
            class: WaitClass::Contention,
            evidence: vec![
                "80% of the woken waiting was ended by threads that wait here too: they take turns"
                    .into(),
            ],
            prior: crate::report::WaitPrior::LockAcquire,
            waits: 1_000,
            futile: 4_000,
            timed_out: 0,
            woken: 1_000,
            interrupted: 0,
            wait_ns: 100_000_000,
            waiting_threads: 0.05,
            waiters: 3,
            waiter_tids: vec![101, 102, 103],
            locks: vec!["mutex in Cache::lookup ([heap])".into()],
            processes: 1,
            waiter_cpu_share: 0.6,
            waiter_between_busy_share: 0.8,
            loop_share: 0.0,
            nested_share: 1.0,
            syscalls: [("futex".to_string(), 100_000_000)].into(),
            lock_words: 1,
            turns_share: 0.8,
            relay_share: 0.0,
            runtime_lock: None,
            releases: vec![Release {
                mechanism: "futex".into(),
                site: Some("Cache::release(int)".into()),
                from_waiters: true,
                in_target: true,
                wakers: 3,
                count: 800,
                wait_ns: 80_000_000,
                stacks: vec![CountedStack {
                    frames: vec![
                        "port::Mutex::Unlock() (port.cc:20)".into(),
                        "Cache::release(int) (cache.cc:40)".into(),
                    ],
                    count: 800,
                    samples: 80,
                    estimated: true,
                }],
            }],
            stacks: vec![TimedStack {
                frames: vec![
                    "__lll_lock_wait (lowlevellock.c:49)".into(),
                    "port::Mutex::Lock() (port.cc:10)".into(),
                    "Cache::lookup(std::string const&) (cache.cc:30)".into(),
                ],
                ns: 100_000_000,
                samples: 100,
                estimated: true,
            }],
            estimated: true,
        }
    }

    #[test]
    fn summary_processes_and_ranking() {
        let r = build(sample_inputs());
        assert_eq!(r.schema_version, SCHEMA_VERSION);
        assert_eq!(
            (r.exit_status, r.exit_signal.as_deref()),
            (Some(137), Some("SIGKILL"))
        );
        assert_eq!((r.summary.user_ns, r.summary.sys_ns), (400, 600));
        assert!((r.summary.sys_percent - 60.0).abs() < 1e-9);
        assert_eq!(r.summary.syscalls, 1011);
        assert!((r.summary.syscalls_per_s - 505.5).abs() < 1e-9);
        assert!((r.summary.voluntary_switches_per_s - 3.0).abs() < 1e-9);
        assert_eq!(r.processes.len(), 2);
        assert_eq!(
            (
                r.processes[0].pid,
                r.processes[0].thread_count,
                r.processes[0].exit_status
            ),
            (100, 2, Some(137))
        );
        assert_eq!(r.processes[1].exit_status, Some(3));
        // Ranked by total time: close (70 us) before getppid (50 us).
        let names: Vec<_> = r.syscalls.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["close", "getppid", "exit_group"]);
        assert_eq!(r.syscalls[0].errnos.get("EBADF"), Some(&10));
        assert_eq!(r.syscalls[2].unfinished, 1);
        assert_eq!(r.syscalls[1].hist_log2_ns, vec![0, 0, 0, 0, 0, 10, 990]);
    }

    #[test]
    fn identical_symbolized_stacks_merge_and_split_the_exact_count() {
        let r = build(sample_inputs());
        let sites = &r.syscalls[1].callsites;
        assert_eq!(sites.len(), 2);
        assert_eq!(sites[0].frames[1], "call_getppid (calls.c:30)");
        assert_eq!((sites[0].calls, sites[0].samples), (800, 80));
        assert_eq!(sites[1].calls, 200);
        assert!(sites.iter().all(|s| s.calls_estimated));
    }
}
