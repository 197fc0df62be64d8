//! One window of a running session, analysed as a whole run is: the
//! counters' growth over the window (`window::since`), the threads' usage
//! between two snapshots, the samples that arrived in it. The findings are
//! the same rules on the window's figures, so they appear and go away as
//! the program changes.

use std::time::Instant;

use anyhow::Result;

use crate::analyze::{self, aggregate::thread_usage};
use crate::model::{KernelCounters, ThreadCounters};
use crate::report::build::{Inputs, build};
use crate::report::{EndReason, Mode, Profiler, Report, Sampling, Timeline};
use crate::session::Live;
use crate::stacks::jit;
use crate::stacks::kallsyms::Kallsyms;

use super::window;

/// Where the current window began: the counters and threads then.
struct Start {
    counters: KernelCounters,
    threads: Vec<ThreadCounters>,
    at: Instant,
}

/// What every window's report states about the session.
#[derive(Clone, Debug)]
pub struct Session {
    pub mode: Mode,
    pub command: Option<Vec<String>>,
    pub cpu_hz: u64,
}

/// Reads a running session window by window.
pub struct Windows {
    session: Session,
    start: Option<Start>,
}

impl Windows {
    pub fn new(session: Session) -> Windows {
        Windows {
            session,
            start: None,
        }
    }

    /// Whether the first window has begun.
    pub fn started(&self) -> bool {
        self.start.is_some()
    }

    /// Begins the first window now; the samples before it are dropped.
    pub fn begin(&mut self, live: &mut Live<'_, '_>) -> Result<()> {
        // Windows name mostly the same frames, once a second.
        live.unwinding
            .names_cache
            .get_or_insert_with(Default::default);
        let threads = live.collector.snapshot_flushing()?;
        let counters = live.collector.counters()?;
        live.take_window();
        self.start = Some(Start {
            counters,
            threads,
            at: Instant::now(),
        });
        Ok(())
    }

    /// The report of the window that ends now; the next one begins.
    pub fn report(&mut self, live: &mut Live<'_, '_>) -> Result<Report> {
        if self.start.is_none() {
            self.begin(live)?;
        }
        let start = self.start.take().expect("begun above");
        // Snapshot first: it moves the threads' pending off-CPU time into
        // the maps the counters read.
        let threads_now = live.collector.snapshot_flushing()?;
        let counters = live.collector.counters()?;
        let at = Instant::now();
        let tally = live.take_window();
        let kernel = window::since(&counters, &start.counters);
        let (threads, _) = thread_usage(&start.threads, &kernel.exited_threads, &threads_now);
        let duration_ns = at.duration_since(start.at).as_nanos().max(1) as u64;
        let kernel_stacks = match live.kallsyms.try_get() {
            Some(k) => k.name_stacks(&live.collector.kernel_stacks()),
            None => Kallsyms::default().name_stacks(&live.collector.kernel_stacks()),
        };
        let a = analyze::run(
            &kernel,
            &tally,
            &kernel_stacks,
            live.unwinding,
            &threads,
            duration_ns,
            self.session.cpu_hz,
        );
        let loss = crate::session::loss(
            &kernel.loss,
            0,
            live.unwinding,
            a.unresolved_frames,
            0,
            0,
            &jit::Gathered::default(),
        );
        self.start = Some(Start {
            counters,
            threads: threads_now,
            at,
        });
        let s = &self.session;
        Ok(build(Inputs {
            mode: s.mode,
            command: s.command.clone(),
            target_pid: live.target_pid,
            exit: None,
            end_reason: EndReason::Duration,
            duration_ns,
            kernel,
            threads,
            sites: a.sites,
            paths: a.paths,
            timeline: Timeline::default(),
            cpu_samples: a.cpu_samples,
            spin: a.spin,
            polls: a.polls,
            locks: a.locks,
            waits: a.waits,
            offcpu: a.offcpu,
            wakeups: a.wakeups,
            blockers: a.blockers,
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
                window_cpu_ns: 0,
                programs: vec![],
                held: Default::default(),
            },
            cpus: live.cpus,
        }))
    }
}
