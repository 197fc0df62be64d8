//! One profiling session, start to report: checks, BPF, the target, the event
//! loop, and the hand-over to aggregation and report building.
//!
//! Ordering matters: the programs are attached before the target runs (a
//! command is started stopped after its exec), samples are unwound as they
//! arrive (their process may exit any moment), and every exit path drops the
//! BPF links, so nothing stays attached whatever happens.

mod live;
pub(crate) mod own;
mod parts;
mod signals;

use std::collections::HashMap;
use std::ffi::OsString;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;

use crate::analyze::aggregate::thread_usage;
use crate::analyze::timeline::{self, Probe};
use crate::analyze::{self};
use crate::collect::Collector;
use crate::collect::host::HostSnapshot;
use crate::model::{KernelCounters, ThreadCounters};
use crate::preflight;
use crate::recording::samples::Samples;
use crate::recording::{Recording, RunFacts};
use crate::report::{EndReason, HostUsage, Loss, Mode, Profiler, Report, Sampling};
use crate::sched_trace::SchedTrace;
use crate::stacks::jit;
use crate::stacks::kallsyms::{Kallsyms, LazyKallsyms};
use crate::stacks::unwind::Unwinding;
use crate::tally::SampleTally;
use crate::target::{ExitStatus, Target};

pub use live::{Live, Watcher};
use own::{Phases, clocks, monotonic_ns, peak_rss_bytes, self_cpu_ns};
pub(crate) use parts::loss;
use parts::{handle, interpreters, register_pythons};
use signals::{Signals, exited, finish_child, wait_readable};

pub enum What {
    Run(Vec<OsString>),
    Attach(u32),
}

impl What {
    /// The report's mode, and the command as text for `Run`.
    pub fn mode_and_command(&self) -> (Mode, Option<Vec<String>>) {
        match self {
            What::Run(argv) => (
                Mode::Run,
                Some(
                    argv.iter()
                        .map(|a| a.to_string_lossy().into_owned())
                        .collect(),
                ),
            ),
            What::Attach(_) => (Mode::Attach, None),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    pub duration: Option<Duration>,
    /// On-CPU samples per second and CPU; 0 turns CPU sampling off.
    pub cpu_hz: u64,
    /// Where a `run` command's standard output goes (an open fd, kept open
    /// by the caller until the run ends); None: kerntax's own.
    pub target_stdout: Option<std::os::fd::RawFd>,
    /// An fd a `run` command gets as its standard input and error too
    /// (`kerntax top` owns the terminal); None: kerntax's own.
    pub target_quiet: Option<std::os::fd::RawFd>,
    /// Read interpreters' own frames at sample time (CPython, CRuby): on
    /// unless asked not to (`--no-interpreter-frames`), e.g. to compare
    /// its cost.
    pub interpreter_frames: bool,
    /// Stream a record per scheduling event of the target's threads, for
    /// `--perfetto` (off: the BPF programs skip it as dead code).
    pub sched_trace: bool,
    /// Keep only the watcher's windows, not the whole run's samples (an
    /// agent runs for days; its windows are what it reports, so the run's
    /// own tally would only grow). The final report then has the run's
    /// counters but no stacks.
    pub windows_only: bool,
}

/// The default on-CPU sampling rate: off the beat of 100 Hz timers.
pub const DEFAULT_CPU_HZ: u64 = 99;

impl Default for Options {
    fn default() -> Options {
        Options {
            duration: None,
            cpu_hz: DEFAULT_CPU_HZ,
            target_stdout: None,
            target_quiet: None,
            interpreter_frames: true,
            sched_trace: false,
            windows_only: false,
        }
    }
}

pub struct Outcome {
    pub report: Report,
    /// Everything the report was worked out from (`kerntax record`'s file);
    /// its scheduling records with `Options::sched_trace`.
    pub recording: Recording,
    /// Each lock key's name in the report, for `--perfetto`.
    pub lock_names: Vec<(crate::model::LockKey, String)>,
    /// The command's shell-style status for `run`; 0 for `attach`.
    pub exit_code: i32,
}

/// Marks the target tracked and returns its threads' counters now; a
/// command that cannot be tracked is killed, not left stopped.
fn track(collector: &Collector<'_>, target: &Target) -> Result<Vec<ThreadCounters>> {
    collector.track(target.pid).inspect_err(|_| {
        if target.is_child {
            target.signal(libc::SIGKILL);
            while target.try_reap().is_none() {
                wait_readable(&[target.pidfd()], Some(Duration::from_millis(100)));
            }
        }
    })
}

/// The profiled window: how it ended, how long it was, what was sampled.
struct Window {
    end_reason: EndReason,
    /// The command's status, if it was reaped when the window ended.
    reaped: Option<ExitStatus>,
    duration_ns: u64,
    tally: SampleTally,
    /// The target's totals through the window, for the timeline.
    probes: timeline::Probes,
    /// The window's start on CLOCK_MONOTONIC (the clock of BPF's
    /// timestamps), ns.
    start_mono_ns: u64,
    /// `--perfetto`'s records (None without it).
    sched_trace: Option<SchedTrace>,
}

/// How often the timeline probes the target's totals.
pub const TIMELINE_INTERVAL: Duration = Duration::from_millis(100);

fn probe(collector: &Collector<'_>, t0: Instant) -> Result<Probe> {
    Ok(Probe::new(
        t0.elapsed().as_nanos() as u64,
        collector.totals()?,
        &collector.snapshot()?,
    ))
}

/// The window's start: the first probe of the target's totals, taken right
/// after its threads are tracked and before a started command runs, so that
/// the timeline holds every syscall and switch the counters do.
struct Start {
    t0: Instant,
    /// CLOCK_MONOTONIC at t0, ns.
    mono_ns: u64,
    probe: Probe,
}

impl Start {
    fn now(collector: &Collector<'_>) -> Result<Start> {
        let t0 = Instant::now();
        let mono_ns = monotonic_ns();
        Ok(Start {
            t0,
            mono_ns,
            probe: probe(collector, t0)?,
        })
    }
}

/// Streams and unwinds samples until the target exits, the duration ends
/// or a signal arrives, probing the totals for the timeline meanwhile.
///
/// `start` is the window's first probe, taken before the target ran.
#[allow(clippy::too_many_arguments)]
fn watch(
    collector: &mut Collector<'_>,
    target: &Target,
    signals: &mut Signals,
    duration: Option<Duration>,
    unwinding: &mut Unwinding,
    start: Start,
    kallsyms: &mut LazyKallsyms,
    cpus: u32,
    mut watcher: Option<&mut dyn Watcher>,
    tracing: bool,
    windows_only: bool,
) -> Result<Window> {
    let Start {
        t0,
        mono_ns: start_mono_ns,
        probe: first,
    } = start;
    let mut tally = SampleTally {
        start_mono_ns,
        ..Default::default()
    };
    let mut fds = vec![collector.epoll_fd(), target.pidfd(), signals.rx.as_raw_fd()];
    if let Some(w) = &watcher {
        fds.extend(w.fds());
    }
    let mut window = SampleTally {
        start_mono_ns,
        ..Default::default()
    };
    let mut reaped = None;
    let mut probes = timeline::Probes::default();
    probes.push(first);
    let mut sched_trace = tracing.then(|| SchedTrace {
        start_mono_ns,
        ..Default::default()
    });
    let mut next_probe = t0 + TIMELINE_INTERVAL;
    let end_reason = loop {
        let remaining = duration.map(|d| d.saturating_sub(t0.elapsed()));
        let now = Instant::now();
        let mut wait = next_probe.saturating_duration_since(now);
        if let Some(w) = &watcher {
            wait = wait.min(w.next_due().saturating_duration_since(now));
        }
        wait_readable(&fds, Some(remaining.map_or(wait, |r| r.min(wait))));
        let windowed = watcher.is_some().then_some(&mut window);
        let whole = (!windows_only).then_some(&mut tally);
        handle(collector.drain()?, unwinding, whole, windowed);
        if let Some(t) = &mut sched_trace {
            t.add(collector.take_trace());
        }
        register_pythons(collector, unwinding);
        if Instant::now() >= next_probe {
            probes.push(probe(collector, t0)?);
            next_probe += TIMELINE_INTERVAL;
        }
        let end = if signals.take() {
            Some(EndReason::Interrupted)
        } else if exited(target, &mut reaped) {
            Some(EndReason::TargetExited)
        } else if remaining.is_some_and(|r| r.is_zero()) {
            Some(EndReason::Duration)
        } else {
            None
        };
        // A live view reads its windows as the run goes, and is told how
        // the run ended (unless it ended it).
        let end = match watcher.as_deref_mut() {
            Some(w) if end != Some(EndReason::Interrupted) => {
                let mut live = Live {
                    collector,
                    unwinding,
                    window: &mut window,
                    kallsyms,
                    t0,
                    target_pid: target.pid,
                    cpus,
                };
                match end {
                    Some(why) => {
                        w.ended(why, &mut live)?;
                        end
                    }
                    None => (!w.tick(&mut live)?).then_some(EndReason::Interrupted),
                }
            }
            _ => end,
        };
        if let Some(why) = end {
            break why;
        }
    };
    probes.push(probe(collector, t0)?);
    let duration_ns = t0.elapsed().as_nanos() as u64;
    Ok(Window {
        end_reason,
        reaped,
        duration_ns,
        tally,
        probes,
        start_mono_ns,
        sched_trace,
    })
}

/// How the target ended: a command is reaped (after being told to stop if
/// profiling stopped first); an attached process's exit is known from its
/// exit record, if it exited while profiled.
fn exit_status(
    target: &Target,
    signals: &mut Signals,
    window: &Window,
    kernel: &KernelCounters,
) -> Option<ExitStatus> {
    if !target.is_child {
        let leader = kernel.exited_threads.iter().find(|t| t.tid == target.pid);
        return leader.map(|t| ExitStatus::from_wait_status(t.exit_code));
    }
    window.reaped.or_else(|| {
        let (sig, grace) = match window.end_reason {
            EndReason::Duration => (libc::SIGTERM, Duration::ZERO),
            _ => (libc::SIGINT, Duration::from_millis(500)),
        };
        Some(finish_child(target, signals, sig, grace))
    })
}

/// What a command kerntax starts gets in its environment: JVMs keep frame
/// pointers in their JIT code and write its perf map at exit.
fn run_env() -> Vec<(OsString, OsString)> {
    let user = std::env::var("JAVA_TOOL_OPTIONS").ok();
    vec![(
        "JAVA_TOOL_OPTIONS".into(),
        crate::jvm::run_options(user.as_deref()).into(),
    )]
}

pub fn profile(what: What, opts: &Options, started: Instant) -> Result<Outcome> {
    profile_watched(what, opts, started, None)
}

/// `profile`, with a live view woken along the way.
pub fn profile_watched(
    what: What,
    opts: &Options,
    started: Instant,
    watcher: Option<&mut dyn Watcher>,
) -> Result<Outcome> {
    let mut phases = Phases {
        on: std::env::var_os("KERNTAX_DEBUG").is_some(),
        last: started,
    };
    let started_at = SystemTime::now();
    preflight::check()?;
    let mut signals = Signals::new()?;
    phases.mark("preflight");
    let mut storage = MaybeUninit::uninit();
    let mut collector = Collector::load(&mut storage, opts.cpu_hz, opts.sched_trace)
        .map_err(preflight::explain_load_failure)?;
    phases.mark("loading and attaching the BPF programs");

    let (mode, command) = what.mode_and_command();
    let mut target = match &what {
        What::Run(argv) => {
            Target::spawn_stopped(argv, opts.target_stdout, opts.target_quiet, &run_env())?
        }
        What::Attach(pid) => Target::attach(*pid)?,
    };
    // File names of the loader and libc from our own map; of an attached
    // program from its map, of a started one at its exec.
    let mut unwinding = Unwinding::default();
    unwinding.python.disabled = !opts.interpreter_frames;
    unwinding.ruby.disabled = !opts.interpreter_frames;
    unwinding.learn(std::process::id());
    if target.is_child {
        unwinding.expect_exec(target.pid);
    } else {
        unwinding.learn(target.pid);
    }
    let cpus = cpus_of(target.pid);
    phases.mark("starting the target, reading its maps");
    let baseline = track(&collector, &target)?;
    unwinding.map_events = collector.map_events_on();
    unwinding.image_maps = collector.image_maps_sent();
    register_pythons(&collector, &mut unwinding);
    // An attached target's processes: a running server registered its fds
    // with epoll before now.
    let attached_pids = (!target.is_child).then(|| {
        let mut pids: Vec<u32> = baseline.iter().map(|t| t.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        collector.seed_epoll_sizes(&pids);
        pids
    });
    let host_start = HostSnapshot::now();
    let start = Start::now(&collector)?;
    // A command runs from here; if its exec fails, it has been reaped.
    target.release()?;
    let attach_ns = started.elapsed().as_nanos() as u64;
    // An attached JVM's perf map as profiling starts: it may be gone, or
    // have freed code, by the end.
    let early_maps = attached_pids.map(|pids| jit::ask_early(pids, started_at));
    phases.mark("start-up until the target runs");
    // Only CPU samples carry kernel stacks.
    let mut kallsyms = LazyKallsyms::new(if opts.cpu_hz > 0 {
        Kallsyms::load_in_background()
    } else {
        std::thread::spawn(Kallsyms::default)
    });
    // A live view shows what it watches itself.
    if !target.is_child && watcher.is_none() {
        eprintln!(
            "kerntax: profiling pid {} and its threads and children; Ctrl-C to stop",
            target.pid
        );
    }

    let cpu_at_start_ns = self_cpu_ns();
    let mut window = watch(
        &mut collector,
        &target,
        &mut signals,
        opts.duration,
        &mut unwinding,
        start,
        &mut kallsyms,
        cpus,
        watcher,
        opts.sched_trace,
        opts.windows_only,
    )?;
    let host_end = HostSnapshot::now();
    phases.mark("profiling");
    // The report names its stacks afresh (a live view's cache of names
    // would leave its unresolved frames uncounted).
    unwinding.names_cache = None;
    let mut last_events = collector.stop()?;
    if let Some(t) = &mut window.sched_trace {
        t.add(collector.take_trace());
        t.end_mono_ns = monotonic_ns();
    }
    // The live threads' final counters at once: their switches go on after
    // the programs are detached, and the sleeps they stand for are no
    // longer counted, so unwinding the ring's last samples first (tens of
    // ms on a busy machine) made their sleeps fall short of their switches.
    let live = collector.snapshot()?;
    last_events.extend(collector.detach_exit()?);
    handle(last_events, &mut unwinding, Some(&mut window.tally), None);
    let window_cpu_ns = self_cpu_ns().saturating_sub(cpu_at_start_ns);
    let programs = collector.program_costs();
    let mut rest = Vec::new();
    unwinding.flush(&mut rest);
    window.tally.add(rest);
    let kernel = collector.counters()?;
    let held = window.tally.held();
    let undecodable = *collector.undecodable_events.borrow();
    let sampling_policy = collector.sampling_policy();
    let kernel_stacks = collector.kernel_stacks();
    let kernel_lacks = collector.features.gaps();
    drop(collector);
    if phases.on {
        let (hits, all) = unwinding.rule_cache_lookups();
        eprintln!("kerntax: debug: unwind rule cache: {hits} hits of {all} lookups");
    }
    phases.mark("reading counters, unwinding the rest");
    let comms: HashMap<u32, String> = live
        .iter()
        .chain(&kernel.exited_threads)
        .filter(|t| t.tid == t.pid)
        .map(|t| (t.pid, t.comm.clone()))
        .collect();
    let mut jit = jit::gather(
        window.tally.stacks(),
        mode == Mode::Run,
        started_at,
        early_maps.and_then(|h| h.join().ok()).unwrap_or_default(),
        |pid| comms.get(&pid).cloned().unwrap_or_default(),
    );
    unwinding.jit_maps = std::mem::take(&mut jit.maps);
    phases.mark("asking JITs for their perf maps");

    let exit = exit_status(&target, &mut signals, &window, &kernel);
    let (threads, threads_unaccounted) = thread_usage(&baseline, &kernel.exited_threads, &live);
    let named = crate::stacks::name::name(&mut unwinding, &kernel, &window.tally);
    let kernel_stacks = kallsyms.get().name_stacks(&kernel_stacks);
    let loss = Loss {
        cpu_stacks_unkept: window.tally.cpu_unkept.user + window.tally.cpu_unkept.kernel,
        trace_records_unkept: window.sched_trace.as_ref().map_or(0, |t| t.unkept),
        ..loss(
            &kernel.loss,
            undecodable,
            &unwinding,
            named.unresolved_frames + kernel_stacks.unresolved,
            threads_unaccounted,
            programs.iter().map(|p| p.recursion_misses).sum(),
            &jit,
        )
    };
    phases.mark("symbolizing");
    // The rest of the host: everything but the target's processes and
    // kerntax's own.
    let mine: Vec<u32> = threads
        .iter()
        .map(|t| t.pid)
        .chain([std::process::id()])
        .collect();
    let host = match (&host_start, &host_end) {
        (Some(a), Some(b)) => crate::collect::host::usage(a, b, window.duration_ns, &mine),
        _ => HostUsage::default(),
    };
    let stack_samples_deferred = kernel.syscalls.iter().map(|s| s.samples_deferred).sum();
    let recording = Recording {
        format: crate::recording::FORMAT.into(),
        version: crate::recording::VERSION,
        kerntax_version: env!("CARGO_PKG_VERSION").into(),
        run: RunFacts {
            mode,
            command,
            target_pid: target.pid,
            exit,
            end_reason: window.end_reason,
            duration_ns: window.duration_ns,
            start_mono_ns: window.start_mono_ns,
            cpus,
            cpu_hz: opts.cpu_hz,
            timeline: window.probes.timeline(TIMELINE_INTERVAL.as_nanos() as u64),
            sampling: Sampling {
                stack_samples: window.tally.count,
                stack_samples_deferred,
                policy: sampling_policy,
                latency_policy: crate::collect::Collector::latency_policy(),
                stack_bytes_copied: crate::collect::STACK_BYTES as u64,
                unwinder: "DWARF CFI (.eh_frame) in user space, frame pointers as fallback".into(),
                jit: jit.processes,
                interpreters: interpreters(&unwinding),
            },
            loss,
            profiler: Profiler {
                mechanism: "BTF raw tracepoints sys_enter/sys_exit, per-CPU counters".into(),
                attach_ns,
                peak_rss_bytes: peak_rss_bytes(),
                kernel: preflight::kernel_release(),
                kernel_lacks,
                window_cpu_ns,
                programs,
                held,
                started_unix_ns: own::unix_ns(started_at),
            },
            host,
        },
        kernel,
        threads,
        samples: Samples::of(window.tally),
        named,
        kernel_stacks,
        sched_trace: window.sched_trace.map(|t| SchedTrace {
            kernel_release: preflight::kernel_release(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            ..clocks(t)
        }),
    };
    let analysed = analyze::recorded::report(&recording);
    let exit_code = match (mode, analysed.report.exit_status) {
        (Mode::Run, Some(code)) => code,
        _ => 0,
    };
    Ok(Outcome {
        report: analysed.report,
        lock_names: analysed.lock_names,
        recording,
        exit_code,
    })
}

/// The CPUs a process may run on (its affinity), or all online CPUs if
/// that cannot be read.
fn cpus_of(pid: u32) -> u32 {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the call fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let got = unsafe {
        libc::sched_getaffinity(pid as libc::pid_t, std::mem::size_of_val(&set), &mut set)
    };
    if got == 0 {
        // SAFETY: the set was filled above.
        let n = unsafe { libc::CPU_COUNT(&set) };
        if n > 0 {
            return n as u32;
        }
    }
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}
