//! Runs `kerntax top`: a profiling session with a watcher that reads a
//! window every `delay` and shows it — full screen on a terminal, plain
//! frames or JSON lines otherwise — and, when it ends, the report of the
//! whole run in the files asked for.
//!
//! Leaving by key, signal or panic restores the terminal (a guard, and
//! ratatui's panic hook), and the session drops its BPF links on every
//! path, so nothing stays attached.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use crossterm::event::{self, Event as TermEvent, KeyCode, KeyEventKind, KeyModifiers};

use super::live::{Session, Windows};
use super::plain;
use super::snapshot::{self, Snapshot};
use super::view::{Key, View};
use crate::report::{EndReason, Report};
use crate::session::{Live, Watcher};

/// The shortest window: each one is analysed and symbolized afresh.
pub const MIN_DELAY: Duration = Duration::from_millis(100);

/// What both ways of showing share: the windows and their pacing.
struct Pace {
    windows: Windows,
    delay: Duration,
    next: Instant,
    started: Instant,
    frames: u64,
    max_frames: Option<u64>,
}

impl Pace {
    /// The window ending now, if one is due (the first call begins the
    /// first window).
    fn due(&mut self, live: &mut Live<'_, '_>) -> Result<Option<Snapshot>> {
        let now = Instant::now();
        if !self.windows.started() {
            self.windows.begin(live)?;
            self.next = now + self.delay;
            return Ok(None);
        }
        if now < self.next {
            return Ok(None);
        }
        self.next += self.delay;
        if self.next < now {
            // Behind (a slow window): the next one is a full delay away.
            self.next = now + self.delay;
        }
        self.window(live).map(Some)
    }

    fn window(&mut self, live: &mut Live<'_, '_>) -> Result<Snapshot> {
        let report: Report = self.windows.report(live)?;
        self.frames += 1;
        Ok(snapshot::of(&report, self.started.elapsed().as_secs_f64()))
    }

    fn done(&self) -> bool {
        self.max_frames.is_some_and(|n| self.frames >= n)
    }
}

fn ended_words(why: EndReason) -> String {
    match why {
        EndReason::TargetExited => "the target exited".into(),
        EndReason::Duration => "the duration is over".into(),
        EndReason::Interrupted => "interrupted".into(),
    }
}

/// Plain frames or JSON lines on stdout, one per window.
struct Batch {
    pace: Pace,
    view: View,
    json: bool,
}

impl Batch {
    fn print(&self, snap: &Snapshot) -> Result<()> {
        let text = if self.json {
            plain::json_line(snap)
        } else {
            plain::frame(snap, &self.view)
        };
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .context("writing to standard output")
    }
}

impl Watcher for Batch {
    fn fds(&self) -> Vec<i32> {
        vec![]
    }

    fn next_due(&self) -> Instant {
        self.pace.next
    }

    fn tick(&mut self, live: &mut Live<'_, '_>) -> Result<bool> {
        if let Some(snap) = self.pace.due(live)? {
            self.print(&snap)?;
        }
        Ok(!self.pace.done())
    }

    fn ended(&mut self, why: EndReason, live: &mut Live<'_, '_>) -> Result<()> {
        if !self.pace.windows.started() || self.pace.done() {
            return Ok(());
        }
        let mut snap = self.pace.window(live)?;
        snap.ended = Some(ended_words(why));
        self.print(&snap)
    }
}

/// Restores the terminal however the view is left.
struct TermGuard;

impl Drop for TermGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// The full-screen view.
struct Screen {
    pace: Pace,
    view: View,
    /// The window on screen (`waiting()` until the first one ends).
    shown: Snapshot,
    term: ratatui::DefaultTerminal,
    /// Input wakes the loop through this fd (stdin when it is the
    /// terminal); else the keys are read on a short tick.
    input_fd: Option<i32>,
    /// SIGTERM while waiting for a key at the end.
    stop: Arc<AtomicBool>,
}

/// Keys read on a tick when the input cannot wake the loop.
const KEY_TICK: Duration = Duration::from_millis(100);

fn key_of(ev: TermEvent) -> Option<Key> {
    let TermEvent::Key(k) = ev else { return None };
    if k.kind != KeyEventKind::Press {
        return None;
    }
    Some(match k.code {
        KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => Key::CtrlC,
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        _ => return None,
    })
}

impl Screen {
    fn draw(&mut self) -> Result<()> {
        let (snap, view) = (&self.shown, &self.view);
        self.term
            .draw(|f| super::screen::draw(f, snap, view))
            .context("drawing the screen")?;
        Ok(())
    }

    /// Applies the keys waiting; true if any was read (or the screen was
    /// resized).
    fn keys(&mut self, wait: Duration) -> Result<bool> {
        let mut any = false;
        let mut wait = wait;
        while event::poll(wait).context("reading the terminal")? {
            wait = Duration::ZERO;
            let ev = event::read().context("reading the terminal")?;
            any = true;
            if let Some(k) = key_of(ev) {
                self.view.key(k, &self.shown);
                self.view.clamp(&self.shown);
            }
        }
        Ok(any)
    }
}

/// What shows before the first window ends.
fn waiting() -> Snapshot {
    Snapshot {
        at_s: 0.0,
        window_s: 0.0,
        target: "reading the first window...".into(),
        cpus: 0,
        cpus_used: 0.0,
        syscalls_per_s: 0.0,
        voluntary_switches_per_s: 0.0,
        involuntary_switches_per_s: 0.0,
        findings: vec![],
        threads: vec![],
        processes: vec![],
        lost: 0,
        ended: None,
    }
}

impl Watcher for Screen {
    fn fds(&self) -> Vec<i32> {
        self.input_fd.into_iter().collect()
    }

    fn next_due(&self) -> Instant {
        match self.input_fd {
            Some(_) => self.pace.next,
            None => self.pace.next.min(Instant::now() + KEY_TICK),
        }
    }

    fn tick(&mut self, live: &mut Live<'_, '_>) -> Result<bool> {
        let mut redraw = self.keys(Duration::ZERO)?;
        if let Some(snap) = self.pace.due(live)? {
            // Paused, the screen keeps its window (the first one shows).
            if !self.view.paused || self.pace.frames == 1 {
                self.view.clamp(&snap);
                self.shown = snap;
            }
            redraw = true;
        }
        if self.view.quit {
            return Ok(false);
        }
        if redraw {
            self.draw()?;
        }
        Ok(!self.pace.done())
    }

    fn ended(&mut self, why: EndReason, live: &mut Live<'_, '_>) -> Result<()> {
        if self.view.quit || self.pace.done() {
            return Ok(());
        }
        if self.pace.windows.started() {
            self.shown = self.pace.window(live)?;
        }
        self.shown.ended = Some(ended_words(why));
        // The last screen stays until the user leaves it.
        self.draw()?;
        while !self.view.quit && !self.stop.load(Ordering::Relaxed) {
            if self.keys(Duration::from_millis(250))? {
                self.draw()?;
            }
        }
        Ok(())
    }
}

/// What `kerntax top` was asked.
pub struct TopOptions {
    pub what: crate::session::What,
    pub delay: Duration,
    pub iterations: Option<u64>,
    /// JSON lines instead of frames (never the full screen).
    pub json: bool,
    pub cpu_hz: u64,
    pub interpreter_frames: bool,
    pub outputs: crate::render::Outputs,
    /// Where to write the whole run's recording at the end.
    pub record: Option<std::path::PathBuf>,
}

/// Runs the view to its end; the status is 0 unless something failed.
pub fn top(opts: TopOptions, started: Instant) -> Result<i32> {
    if opts.delay < MIN_DELAY {
        return Err(crate::error::Exit::new(
            2,
            format!(
                "a window shorter than {} s is not supported (-d)",
                MIN_DELAY.as_secs_f64()
            ),
        )
        .into());
    }
    let (mode, command) = opts.what.mode_and_command();
    let pace = Pace {
        windows: Windows::new(Session {
            mode,
            command,
            cpu_hz: opts.cpu_hz,
            evict_idle: false,
        }),
        delay: opts.delay,
        next: Instant::now(),
        started: Instant::now(),
        frames: 0,
        max_frames: opts.iterations,
    };
    let screen = !opts.json && std::io::IsTerminal::is_terminal(&std::io::stdout());
    // A started command's output would write over the screen or mix with
    // the frames: it goes to /dev/null (and its input comes from there
    // when the terminal is the view's).
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .context("opening /dev/null")?;
    let mut session = crate::session::Options {
        duration: None,
        cpu_hz: opts.cpu_hz,
        target_stdout: Some(null.as_raw_fd()),
        target_quiet: screen.then_some(null.as_raw_fd()),
        interpreter_frames: opts.interpreter_frames,
        sched_trace: false,
        windows_only: false,
    };
    let outcome = if screen {
        let stop = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(libc::SIGTERM, stop.clone())
            .context("installing signal handlers")?;
        let term = ratatui::try_init().context("setting up the terminal")?;
        let _guard = TermGuard;
        let stdin = std::io::stdin();
        let mut w = Screen {
            pace,
            view: View::default(),
            shown: waiting(),
            term,
            input_fd: std::io::IsTerminal::is_terminal(&stdin).then_some(stdin.as_raw_fd()),
            stop,
        };
        w.draw()?;
        crate::session::profile_watched(opts.what, &session, started, Some(&mut w))?
    } else {
        let mut w = Batch {
            pace,
            view: View::default(),
            json: opts.json,
        };
        session.target_quiet = None;
        crate::session::profile_watched(opts.what, &session, started, Some(&mut w))?
    };
    drop(null);
    let written = opts.outputs.write(&outcome.report);
    if let Some(path) = &opts.record {
        crate::recording::file::write(path, &outcome.recording)?;
    }
    written?;
    Ok(0)
}
