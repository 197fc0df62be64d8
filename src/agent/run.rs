//! Runs `kerntax agent`: a session whose watcher cuts a window every
//! interval, analyses it as `kerntax top` does, and queues its profile for
//! the backend with the fleet's labels. Profiling never waits on the
//! network (`queue`); each window's findings and push state go to stderr,
//! or stdout as JSON lines.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use super::backend::Backend;
use super::labels::{self, Origin};
use super::queue::{Policy, PushStats, Pusher};
use crate::render::pprof;
use crate::report::{EndReason, Mode, Report};
use crate::session::own::{self_cpu_ns, self_status_kib};
use crate::session::{Live, Watcher, What};
use crate::top::live::{Session, Windows};

/// The shortest interval: a push a second is already more than any
/// established agent makes (5 to 15 s).
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// How long queued profiles may still be sent at exit.
pub const EXIT_GRACE: Duration = Duration::from_secs(5);

/// What `kerntax agent` was asked.
pub struct AgentOptions {
    pub what: What,
    pub backend: Backend,
    pub interval: Duration,
    pub service_name: Option<String>,
    pub labels: Vec<(String, String)>,
    pub duration: Option<Duration>,
    pub json: bool,
    pub cpu_hz: u64,
    pub interpreter_frames: bool,
}

/// One window's line (stderr as text, or stdout as JSON).
#[derive(Serialize)]
struct WindowLine<'a> {
    window: u64,
    at_s: f64,
    window_s: f64,
    time_unix_ns: u64,
    target_pid: u32,
    findings: Vec<FindingLine<'a>>,
    /// Samples in the pushed profile (0: nothing happened, nothing pushed).
    samples: usize,
    /// The pushed profile's total per sample type (the report's figures).
    profile_totals: std::collections::BTreeMap<&'static str, i64>,
    stacks_merged: u64,
    profile_bytes: usize,
    labels: &'a [(String, String)],
    lost: u64,
    /// kerntax's own CPU over the window, ms per second.
    agent_cpu_ms_per_s: f64,
    agent_rss_kib: u64,
    /// BPF map entries deleted so far for being idle over a window.
    evicted: &'a crate::collect::evict::Evicted,
    push: &'a PushStats,
    #[serde(skip_serializing_if = "Option::is_none")]
    ended: Option<&'a str>,
}

#[derive(Serialize)]
struct FindingLine<'a> {
    id: &'a str,
    title: &'a str,
    culprit: &'a str,
}

struct Agent {
    windows: Windows,
    interval: Duration,
    next: Instant,
    started: Instant,
    backend: Backend,
    pusher: Pusher,
    service_name: Option<String>,
    user_labels: Vec<(String, String)>,
    hostname: String,
    kernel: String,
    json: bool,
    count: u64,
    cpu_ns_at: u64,
    at: Instant,
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

impl Agent {
    fn origin(&self, r: &Report) -> Origin {
        let comm = r
            .processes
            .iter()
            .find(|p| p.pid == r.target_pid)
            .map(|p| p.comm.clone())
            .or_else(|| {
                std::fs::read_to_string(format!("/proc/{}/comm", r.target_pid))
                    .ok()
                    .map(|c| c.trim().to_string())
            })
            .unwrap_or_default();
        let service_name = self
            .service_name
            .clone()
            .unwrap_or_else(|| labels::default_service(r.command.as_deref(), &comm));
        Origin {
            service_name,
            hostname: self.hostname.clone(),
            pid: r.target_pid,
            comm,
            kernel: self.kernel.clone(),
        }
    }

    /// Reads the window ending now, queues its profile and says so.
    fn window(&mut self, live: &mut Live<'_, '_>, ended: Option<&str>) -> Result<()> {
        let r = self.windows.report(live)?;
        self.count += 1;
        let findings: Vec<String> = r.findings.iter().map(|f| f.id.clone()).collect();
        let labels = labels::series(&self.origin(&r), &self.user_labels, &findings);
        // The findings ride along in the profile too, as comments.
        let comments: Vec<String> = r
            .findings
            .iter()
            .map(|f| format!("kerntax finding {}: {} ({})", f.id, f.title, f.culprit.name))
            .collect();
        let (raw, trimmed) = pprof::limits::encode_within(&r, pprof::Limits::PUSH, &comments);
        // A window where nothing happened has nothing to push.
        let has_stacks = trimmed.samples > 0;
        if has_stacks {
            let gz = pprof::gzip(&raw);
            self.pusher.push(self.backend.request(&labels, &gz));
        }
        let now = Instant::now();
        let cpu = self_cpu_ns();
        let wall = now.duration_since(self.at).as_secs_f64().max(1e-9);
        let cpu_ms_per_s = cpu.saturating_sub(self.cpu_ns_at) as f64 / 1e6 / wall;
        (self.cpu_ns_at, self.at) = (cpu, now);
        let push = self.pusher.stats();
        let line = WindowLine {
            window: self.count,
            at_s: self.started.elapsed().as_secs_f64(),
            window_s: r.duration_ns as f64 / 1e9,
            time_unix_ns: r.profiler.started_unix_ns,
            target_pid: r.target_pid,
            findings: r
                .findings
                .iter()
                .map(|f| FindingLine {
                    id: &f.id,
                    title: &f.title,
                    culprit: &f.culprit.name,
                })
                .collect(),
            samples: trimmed.samples,
            profile_totals: pprof::SAMPLE_TYPES
                .iter()
                .zip(trimmed.totals)
                .map(|((name, _), v)| (*name, v))
                .collect(),
            stacks_merged: trimmed.stacks_merged,
            profile_bytes: if has_stacks { trimmed.bytes } else { 0 },
            labels: &labels,
            lost: r.loss.total(),
            agent_cpu_ms_per_s: cpu_ms_per_s,
            agent_rss_kib: self_status_kib("VmRSS"),
            evicted: &self.windows.evicted,
            push: &push,
            ended,
        };
        self.say(&line)
    }

    fn say(&self, l: &WindowLine<'_>) -> Result<()> {
        if self.json {
            let mut out = std::io::stdout().lock();
            let text = serde_json::to_string(l).expect("plain structs serialize");
            return writeln!(out, "{text}")
                .and_then(|_| out.flush())
                .context("writing to standard output");
        }
        eprintln!("{}", text_line(l, self.backend.kind.name()));
        Ok(())
    }
}

/// `kerntax agent: window 3 (10.0 s): 212 samples, 38 KiB queued for parca
/// (pushed 2, dropped 0); findings: lock.contended (ns_lock)`
fn text_line(l: &WindowLine<'_>, backend: &str) -> String {
    let what = if l.samples == 0 {
        "nothing happened, nothing pushed".to_string()
    } else {
        format!(
            "{} samples, {} KiB queued for {backend}",
            l.samples,
            l.profile_bytes.div_ceil(1024)
        )
    };
    let p = l.push;
    let mut s = format!(
        "kerntax agent: window {} ({:.1} s): {what} (pushed {}, dropped {}",
        l.window,
        l.window_s,
        p.pushed,
        p.dropped()
    );
    if p.retries > 0 {
        s += &format!(", retries {}", p.retries);
    }
    s += ")";
    if !l.findings.is_empty() {
        let f: Vec<String> = l
            .findings
            .iter()
            .map(|f| format!("{} ({})", f.id, f.culprit))
            .collect();
        s += &format!("; findings: {}", f.join(", "));
    }
    if let Some(e) = l.ended {
        s += &format!("; {e}");
    }
    s
}

impl Watcher for Agent {
    fn fds(&self) -> Vec<i32> {
        vec![]
    }

    fn next_due(&self) -> Instant {
        self.next
    }

    fn tick(&mut self, live: &mut Live<'_, '_>) -> Result<bool> {
        let now = Instant::now();
        if !self.windows.started() {
            self.windows.begin(live)?;
            (self.next, self.at, self.cpu_ns_at) = (now + self.interval, now, self_cpu_ns());
            eprintln!(
                "kerntax agent: profiling pid {} and its threads and children; a profile every {} s \
                 to {} ({}); Ctrl-C to stop",
                live.target_pid,
                self.interval.as_secs_f64(),
                self.backend.endpoint,
                self.backend.kind.name()
            );
            return Ok(true);
        }
        if now >= self.next {
            self.next += self.interval;
            if self.next < now {
                self.next = now + self.interval;
            }
            self.window(live, None)?;
        }
        Ok(true)
    }

    fn ended(&mut self, why: EndReason, live: &mut Live<'_, '_>) -> Result<()> {
        if !self.windows.started() {
            return Ok(());
        }
        let words = match why {
            EndReason::TargetExited => "the target exited",
            EndReason::Duration => "the duration is over",
            EndReason::Interrupted => "interrupted",
        };
        self.window(live, Some(words))
    }
}

/// Runs the agent to its end; 0 unless no profile could be pushed.
pub fn agent(opts: AgentOptions, started: Instant) -> Result<i32> {
    if opts.interval < MIN_INTERVAL {
        return Err(crate::error::Exit::new(
            2,
            format!(
                "an interval shorter than {} s is not supported (--interval)",
                MIN_INTERVAL.as_secs()
            ),
        )
        .into());
    }
    let (mode, command) = opts.what.mode_and_command();
    let transport = Box::new(super::http::Http::new());
    let pusher = Pusher::start(
        transport,
        Policy::DEFAULT,
        Box::new(|line| eprintln!("kerntax agent: {line}")),
    );
    let now = Instant::now();
    let mut agent = Agent {
        windows: Windows::new(Session {
            mode,
            command,
            cpu_hz: opts.cpu_hz,
            evict_idle: true,
        }),
        interval: opts.interval,
        next: now,
        started: now,
        backend: opts.backend.clone(),
        pusher,
        service_name: opts.service_name,
        user_labels: opts.labels,
        hostname: hostname(),
        kernel: crate::preflight::kernel_release(),
        json: opts.json,
        count: 0,
        cpu_ns_at: 0,
        at: now,
    };
    let session = crate::session::Options {
        duration: opts.duration,
        cpu_hz: opts.cpu_hz,
        target_stdout: None,
        target_quiet: None,
        interpreter_frames: opts.interpreter_frames,
        sched_trace: false,
        windows_only: true,
    };
    let outcome = crate::session::profile_watched(opts.what, &session, started, Some(&mut agent));
    let windows = agent.count;
    let stats = agent.pusher.finish(EXIT_GRACE);
    // A session that never began (a bad pid, a command that cannot run)
    // ends in its one error line.
    if agent.windows.started() {
        eprintln!("kerntax agent: {}", summary(windows, &stats));
    }
    let outcome = outcome?;
    if stats.pushed == 0 && stats.dropped() > 0 {
        let why = stats.last_error.as_deref().unwrap_or("no answer");
        return Err(crate::error::Exit::new(
            1,
            format!("no profile reached {}: {why}", opts.backend.endpoint),
        )
        .into());
    }
    Ok(match mode {
        Mode::Run => outcome.exit_code,
        Mode::Attach => 0,
    })
}

fn summary(windows: u64, s: &PushStats) -> String {
    format!(
        "{windows} windows; {} profiles pushed ({} KiB), {} retries; dropped {} \
         (queue full {}, failed every attempt {}, refused {}, at exit {})",
        s.pushed,
        s.bytes_pushed.div_ceil(1024),
        s.retries,
        s.dropped(),
        s.dropped_queue_full,
        s.dropped_after_retries,
        s.rejected,
        s.dropped_at_exit
    )
}
