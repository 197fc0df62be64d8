//! One window of a running session, analysed as a whole run is: the
//! counters' growth over the window (`window::since`), the threads' usage
//! between two snapshots, the samples that arrived in it. The findings are
//! the same rules on the window's figures, so they appear and go away as
//! the program changes.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use anyhow::Result;

use crate::analyze::build::{Inputs, build};
use crate::analyze::{self, aggregate::thread_usage};
use crate::collect::evict::Evicted;
use crate::model::{KernelCounters, ThreadCounters};
use crate::recording::RunFacts;
use crate::report::{EndReason, Loss, Mode, Profiler, Report, Sampling, Timeline};
use crate::session::Live;
use crate::stacks::jit;
use crate::stacks::kallsyms::Kallsyms;
use crate::tally::SampleTally;

use super::window;

/// Where the current window began: the counters and threads then.
struct Start {
    counters: KernelCounters,
    threads: Vec<ThreadCounters>,
    /// The run's losses so far: the kernel's and the unwinder's (the
    /// window's are their growth, `Loss::since`).
    loss: Loss,
    at: Instant,
    /// `at` on the wall clock, ns since the Unix epoch.
    unix_ns: u64,
}

/// What every window's report states about the session.
#[derive(Clone, Debug)]
pub struct Session {
    pub mode: Mode,
    pub command: Option<Vec<String>>,
    pub cpu_hz: u64,
    /// Delete the map entries that did not move over a window
    /// (`collect::evict`): only for a windows-only session (an agent), whose
    /// whole-run totals nobody reads.
    pub evict_idle: bool,
}

/// Reads a running session window by window.
pub struct Windows {
    session: Session,
    start: Option<Start>,
    /// Kernel stacks evicted after the last window: a sample still in the
    /// ring buffer then may name one.
    evicted_stacks: HashMap<i32, Vec<u64>>,
    /// Entries evicted so far (`Session::evict_idle`).
    pub evicted: Evicted,
}

impl Windows {
    pub fn new(session: Session) -> Windows {
        Windows {
            session,
            start: None,
            evicted_stacks: HashMap::new(),
            evicted: Evicted::default(),
        }
    }

    /// Whether the first window has begun.
    pub fn started(&self) -> bool {
        self.start.is_some()
    }

    /// Where a window ends and the next begins: the threads' snapshot
    /// (first: it moves their pending off-CPU time into the maps the
    /// counters read), the counters, and the samples since the last mark.
    /// With `evict_since`, the entries that did not move since that read
    /// are deleted (and left out of the counters).
    fn mark(
        live: &mut Live<'_, '_>,
        evict_since: Option<&KernelCounters>,
        evicted: &mut Evicted,
    ) -> Result<(Start, SampleTally)> {
        let threads = live.collector.snapshot_flushing()?;
        let counters = match evict_since {
            Some(earlier) => {
                let (c, e) = live.collector.counters_evicting(earlier)?;
                evicted.add(&e);
                c
            }
            None => live.collector.counters()?,
        };
        let loss = crate::session::loss(
            &counters.loss,
            0,
            live.unwinding,
            0,
            0,
            0,
            &jit::Gathered::default(),
        );
        let start = Start {
            counters,
            threads,
            loss,
            at: Instant::now(),
            unix_ns: crate::session::own::unix_ns(std::time::SystemTime::now()),
        };
        Ok((start, live.take_window()))
    }

    /// Begins the first window now; the samples before it are dropped.
    pub fn begin(&mut self, live: &mut Live<'_, '_>) -> Result<()> {
        // Windows name mostly the same frames, once a second.
        live.unwinding
            .names_cache
            .get_or_insert_with(Default::default);
        self.start = Some(Self::mark(live, None, &mut self.evicted)?.0);
        Ok(())
    }

    /// The report of the window that ends now; the next one begins.
    pub fn report(&mut self, live: &mut Live<'_, '_>) -> Result<Report> {
        if self.start.is_none() {
            self.begin(live)?;
        }
        let start = self.start.take().expect("begun above");
        let evict_since = self.session.evict_idle.then_some(&start.counters);
        let (next, tally) = Self::mark(live, evict_since, &mut self.evicted)?;
        let kernel = window::since(&next.counters, &start.counters);
        let (threads, _) = thread_usage(&start.threads, &kernel.exited_threads, &next.threads);
        let duration_ns = next.at.duration_since(start.at).as_nanos().max(1) as u64;
        // The map holds the run's kernel stacks: the window's samples' are
        // named (and their unnamed frames counted), not all of them again.
        let used: HashSet<i32> = tally
            .cpu
            .keys()
            .filter_map(|(_, c, _)| c.kernel_stack)
            .collect();
        let mut stacks = live.collector.kernel_stacks();
        let previous = std::mem::take(&mut self.evicted_stacks);
        if self.session.evict_idle {
            // The stacks no sample of the window used leave the map, from
            // this same read.
            let idle: HashMap<i32, Vec<u64>> =
                stacks.extract_if(|id, _| !used.contains(id)).collect();
            self.evicted.kernel_stacks += live.collector.delete_kernel_stacks(idle.values());
            self.evicted_stacks = idle;
        }
        for (id, ips) in previous {
            stacks.entry(id).or_insert(ips);
        }
        stacks.retain(|id, _| used.contains(id));
        let none = Kallsyms::default();
        let kernel_stacks = live
            .kallsyms
            .try_get()
            .unwrap_or(&none)
            .name_stacks(&stacks);
        let named = crate::stacks::name::name(live.unwinding, &kernel, &tally);
        let a = analyze::run(
            &kernel,
            &tally,
            &named,
            &kernel_stacks,
            &threads,
            duration_ns,
            self.session.cpu_hz,
        );
        // The frames this window's analysis could not name are its own.
        let loss = Loss {
            frames_unsymbolized: a.unresolved_frames,
            ..next.loss.since(&start.loss)
        };
        self.start = Some(next);
        let s = &self.session;
        Ok(build(Inputs {
            run: RunFacts {
                mode: s.mode,
                command: s.command.clone(),
                target_pid: live.target_pid,
                exit: None,
                end_reason: EndReason::Duration,
                duration_ns,
                start_mono_ns: 0,
                cpus: live.cpus,
                cpu_hz: s.cpu_hz,
                timeline: Timeline::default(),
                sampling: Sampling {
                    stack_samples: tally.count,
                    stack_samples_deferred: 0,
                    policy: String::new(),
                    latency_policy: String::new(),
                    stack_bytes_copied: crate::collect::STACK_BYTES as u64,
                    unwinder: String::new(),
                    jit: vec![],
                    interpreters: Default::default(),
                },
                loss,
                profiler: Profiler {
                    mechanism: String::new(),
                    attach_ns: 0,
                    peak_rss_bytes: 0,
                    kernel: String::new(),
                    kernel_lacks: vec![],
                    window_cpu_ns: 0,
                    programs: vec![],
                    held: Default::default(),
                    started_unix_ns: start.unix_ns,
                },
                // A live window does not read the rest of the host.
                host: Default::default(),
            },
            kernel,
            threads,
            sites: a.sites,
            paths: a.paths,
            cpu_samples: a.cpu_samples,
            spin: a.spin,
            polls: a.polls,
            locks: a.locks,
            waits: a.waits,
            offcpu: a.offcpu,
            wakeups: a.wakeups,
            blockers: a.blockers,
        }))
    }
}
