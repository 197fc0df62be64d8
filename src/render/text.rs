//! The terminal report. Reads only the `Report`.

use std::fmt::Write;

use crate::frame::short_frame;
use crate::report::{EndReason, Mode, Report, SyscallReport};

/// How many syscalls the table shows.
const TOP_SYSCALLS: usize = 15;
/// Call sites are shown for syscalls with at least this share of all
/// syscall time; the rest is in the JSON report.
const MIN_SYSCALL_SHARE_PERCENT: f64 = 5.0;
/// At most this many call sites per syscall, and beyond the first only
/// those with at least this share of its calls.
const SITES_SHOWN: usize = 3;
const MIN_SITE_SHARE_PERCENT: f64 = 10.0;
/// Frames shown per call site.
const SITE_FRAMES: usize = 8;
const BAR_WIDTH: usize = 40;

pub use crate::units::{count, duration, rate, short};

/// The user/system split as a bar: `=` user time, `#` system time (the red
/// part of htop's CPU bar), scaled to the CPU time used per wall second.
fn cpu_bar(r: &Report, color: bool) -> String {
    let s = &r.summary;
    let wall = r.duration_ns.max(1) as f64;
    // One bar width is one CPU fully busy; more than one CPU saturates it.
    let scale = |ns: u64| ((ns as f64 / wall) * BAR_WIDTH as f64).round() as usize;
    let user = scale(s.user_ns).min(BAR_WIDTH);
    let sys = scale(s.sys_ns).min(BAR_WIDTH - user);
    let idle = BAR_WIDTH - user - sys;
    let (u, y, e) = ("=".repeat(user), "#".repeat(sys), " ".repeat(idle));
    if color {
        format!("[\x1b[32m{u}\x1b[31m{y}\x1b[0m{e}]")
    } else {
        format!("[{u}{y}{e}]")
    }
}

fn header(r: &Report, out: &mut String, color: bool) {
    let target = match (&r.mode, &r.command) {
        (Mode::Run, Some(argv)) => format!("run: {}", argv.join(" ")),
        _ => format!("attach: pid {}", r.target_pid),
    };
    let status = match (r.exit_status, &r.exit_signal) {
        (Some(code), Some(sig)) => Some(format!("killed by {sig}, exit status {code}")),
        (Some(code), None) => Some(format!("exit status {code}")),
        (None, _) => None,
    };
    let why = match r.end_reason {
        EndReason::TargetExited => None,
        EndReason::Duration => Some("duration reached"),
        EndReason::Interrupted => Some("interrupted"),
    };
    let end = match (why, status) {
        (Some(w), Some(s)) => format!("{w}; {s}"),
        (Some(w), None) => w.to_string(),
        (None, Some(s)) => s,
        (None, None) => "target exited".to_string(),
    };
    let s = &r.summary;
    let _ = writeln!(out, "kerntax {target}  (pid {}, {end})", r.target_pid);
    let _ = writeln!(
        out,
        "wall {}   CPU {} user = {} ({:.0}%)  sys # {} ({:.0}%)",
        duration(r.duration_ns),
        cpu_bar(r, color),
        duration(s.user_ns),
        s.user_percent,
        duration(s.sys_ns),
        s.sys_percent
    );
    let _ = writeln!(
        out,
        "context switches {} voluntary + {} involuntary   syscalls {} ({} calls, {} errors)",
        rate(s.voluntary_switches_per_s),
        rate(s.involuntary_switches_per_s),
        rate(s.syscalls_per_s),
        count(s.syscalls),
        count(s.syscall_errors)
    );
    let threads: usize = r.threads.len();
    let _ = writeln!(out, "processes {}, threads {}", r.processes.len(), threads);
    let others = r.others_cpus();
    if others >= HOST_LINE_MIN_CPUS {
        let named: Vec<String> = r
            .host
            .others
            .iter()
            .take(HOST_LINE_PROCESSES)
            .map(|p| format!("{} {} {:.2}", p.comm, p.pid, p.cpus))
            .collect();
        let _ = writeln!(
            out,
            "other processes used {others:.1} CPUs meanwhile ({:.1} of the host's busy): {}",
            r.host.busy_cpus,
            named.join(", ")
        );
    }
    if r.host.steal_cpus >= HOST_LINE_MIN_CPUS {
        let _ = writeln!(
            out,
            "the hypervisor ran others on {:.1} of this VM's CPUs meanwhile (steal time)",
            r.host.steal_cpus
        );
    }
}

/// The rest of the host is worth a line when it kept this many CPUs busy.
const HOST_LINE_MIN_CPUS: f64 = 0.25;
/// Other processes named on it.
const HOST_LINE_PROCESSES: usize = 4;

/// A stack, innermost first, one frame a line, `label` before the first.
pub(crate) fn stack(out: &mut String, label: &str, frames: &[crate::frame::Frame]) {
    for (i, frame) in frames.iter().take(SITE_FRAMES).enumerate() {
        let lead = if i == 0 { label } else { "" };
        let _ = writeln!(out, "    {lead:<16} {}", short_frame(frame));
    }
    if frames.len() > SITE_FRAMES {
        let _ = writeln!(
            out,
            "    {:<16} ... {} more frames in the JSON report",
            "",
            frames.len() - SITE_FRAMES
        );
    }
}

/// `~42%` of `total`: the share a stack stands for.
pub(crate) fn share(part: u64, total: u64, estimated: bool) -> String {
    let approx = if estimated { "~" } else { "" };
    format!("{approx}{:.0}%", part as f64 * 100.0 / total.max(1) as f64)
}

/// Call sites of one syscall, each a stack innermost first.
fn call_sites(sc: &SyscallReport, out: &mut String) {
    for site in sc.callsites.iter().take(SITES_SHOWN) {
        let pct = site.calls as f64 * 100.0 / sc.calls.max(1) as f64;
        if pct < MIN_SITE_SHARE_PERCENT && !std::ptr::eq(site, &sc.callsites[0]) {
            break;
        }
        let label = format!(
            "{} of calls",
            share(site.calls, sc.calls, site.calls_estimated)
        );
        stack(out, &label, &site.frames);
    }
}

fn syscalls(r: &Report, out: &mut String) {
    if r.syscalls.is_empty() {
        let _ = writeln!(out, "\nno system calls observed");
        return;
    }
    let _ = writeln!(
        out,
        "\n{:<22} {:>12} {:>9} {:>11} {:>11} {:>10}",
        "SYSCALL", "CALLS", "ERRORS", "TOTAL", "MAX", "AVG"
    );
    let all_ns: u64 = r.syscalls.iter().map(|s| s.total_ns).sum();
    let mut estimated = false;
    for sc in r.syscalls.iter().take(TOP_SYSCALLS) {
        let returned = sc.calls.saturating_sub(sc.unfinished).max(1);
        let mut errs = count(sc.errors);
        if let Some((name, _)) = sc.errnos.iter().max_by_key(|(_, c)| **c) {
            errs = format!("{errs} {name}");
        }
        // Issue 21: a storm's latency is scaled from the calls timed.
        let mark = match sc.timed_calls {
            Some(t) if t < sc.calls.saturating_sub(sc.unfinished) => {
                estimated = true;
                "~"
            }
            _ => "",
        };
        let _ = writeln!(
            out,
            "{:<22} {:>12} {:>9} {:>11} {:>11} {:>10}",
            sc.name,
            count(sc.calls),
            errs,
            format!("{mark}{}", duration(sc.total_ns)),
            duration(sc.max_ns),
            format!("{mark}{}", duration(sc.total_ns / returned))
        );
        if sc.total_ns as f64 >= all_ns as f64 * MIN_SYSCALL_SHARE_PERCENT / 100.0 {
            call_sites(sc, out);
        }
    }
    if r.syscalls.len() > TOP_SYSCALLS {
        let _ = writeln!(
            out,
            "... {} more syscalls in the JSON report",
            r.syscalls.len() - TOP_SYSCALLS
        );
    }
    if estimated {
        let _ = writeln!(
            out,
            "~ estimated from the calls timed (a random subset of a storm; MAX is theirs); calls and errors are exact"
        );
    }
}

/// Interpreters named in the footer; the rest are in the JSON.
const INTERPRETERS_SHOWN: usize = 3;

/// The interpreters whose own frames were read (or could not be: an
/// unsupported version says so here once), and how many samples carry them.
fn interpreters(r: &Report, out: &mut String) {
    let i = &r.sampling.interpreters;
    if i.seen.is_empty() {
        return;
    }
    let mut seen: Vec<String> = i.seen.iter().take(INTERPRETERS_SHOWN).cloned().collect();
    if i.seen.len() > INTERPRETERS_SHOWN {
        seen.push(format!(
            "{} more in the JSON report",
            i.seen.len() - INTERPRETERS_SHOWN
        ));
    }
    let read = if i.samples == 0 {
        String::new()
    } else {
        format!(
            "; their frames read in {} samples ({} frames, {} unreadable)",
            count(i.samples),
            count(i.frames),
            count(i.frames_unreadable)
        )
    };
    let _ = writeln!(out, "interpreters: {}{read}", seen.join(", "));
}

fn footer(r: &Report, out: &mut String) {
    let deferred = match r.sampling.stack_samples_deferred {
        0 => String::new(),
        n => format!(
            "; {} put off while kerntax caught up, their weight carried by the next",
            count(n)
        ),
    };
    let _ = writeln!(
        out,
        "\nstacks: {} samples ({}){deferred}; attached in {}",
        count(r.sampling.stack_samples),
        r.sampling.policy,
        duration(r.profiler.attach_ns)
    );
    interpreters(r, out);
    let lost = r.loss.nonzero();
    if lost.is_empty() {
        let _ = writeln!(out, "loss: none");
    } else {
        let list: Vec<String> = lost
            .iter()
            .map(|(k, v)| format!("{k} {}", count(*v)))
            .collect();
        let _ = writeln!(out, "loss: {}", list.join(", "));
    }
    kernel_lacks(r, out);
}

/// What this kernel lacks that costs the user something, once
/// (collect/features.rs; the JSON report lists every facility missing).
fn kernel_lacks(r: &Report, out: &mut String) {
    let costly: Vec<_> = r
        .profiler
        .kernel_lacks
        .iter()
        .filter(|g| !g.costs.is_empty())
        .collect();
    if costly.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "kernel {} lacks what newer kernels give kerntax:",
        r.profiler.kernel
    );
    for g in costly {
        let _ = writeln!(out, "  {} (Linux {}+): {}", g.what, g.since, g.costs);
    }
}

pub fn render(r: &Report, color: bool) -> String {
    let mut out = String::new();
    header(r, &mut out, color);
    super::findings_text::findings(r, &mut out);
    super::waits_text::waits(r, &mut out);
    super::locks_text::locks(r, &mut out);
    super::sched_text::offcpu(r, &mut out);
    super::sched_text::wakeups(r, &mut out);
    super::sched_text::polls(r, &mut out);
    super::sched_text::cpu(r, &mut out);
    super::sched_text::timeline(r, &mut out);
    syscalls(r, &mut out);
    footer(r, &mut out);
    out
}

/// The width of the terminal on `fd`, if it is one.
pub fn terminal_width(fd: &impl std::os::fd::AsRawFd) -> Option<usize> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into `ws`, which outlives the call.
    let ok = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}

/// `text` with every line longer than `width` columns cut to it, ending in
/// `…` (a long frame would wrap over several lines of a terminal; the JSON
/// report keeps it whole). Colour escapes take no columns and are kept.
pub fn fit(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let mut columns = 0;
        let mut cut = None;
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            if c == '\x1b' {
                // An escape sequence: through its final letter.
                for (_, e) in chars.by_ref() {
                    if e.is_ascii_alphabetic() {
                        break;
                    }
                }
                continue;
            }
            columns += 1;
            if columns == width && cut.is_none() {
                cut = Some(i);
            }
        }
        match cut {
            Some(at) if columns > width => {
                out.push_str(&body[..at]);
                out.push('…');
                if body.contains('\x1b') {
                    out.push_str("\x1b[0m");
                }
            }
            _ => out.push_str(body),
        }
        out.push_str(nl);
    }
    out
}

/// `text` fitted to the terminal on `fd`; unchanged when it is no terminal.
pub fn for_terminal(text: String, fd: &impl std::os::fd::AsRawFd) -> String {
    match terminal_width(fd) {
        Some(w) => fit(&text, w),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::build::{build, tests::sample_inputs};

    #[test]
    fn golden_report() {
        let text = render(&build(sample_inputs()), false);
        crate::render::assert_golden("report.txt", &text);
    }

    /// Issue 35: what an older kernel costs is said once, at the end; a
    /// facility whose absence costs nothing visible is left to the JSON.
    #[test]
    fn a_kernels_costly_gaps_are_said_once() {
        let mut r = build(sample_inputs());
        r.profiler.kernel = "5.10.0-46-amd64".into();
        r.profiler.kernel_lacks = crate::collect::features::KernelFeatures::all()
            .without("task_storage,find_vma")
            .unwrap()
            .gaps();
        let text = render(&r, false);
        assert_eq!(
            text.matches("lacks what newer kernels give").count(),
            1,
            "{text}"
        );
        assert!(
            text.contains("kernel 5.10.0-46-amd64 lacks what newer kernels give kerntax:\n  BPF task storage (Linux 5.11+): at most 32,768 threads"),
            "{text}"
        );
        assert!(!text.contains("bpf_find_vma"), "{text}");
        assert!(!render(&build(sample_inputs()), false).contains("lacks what"));
    }

    /// A VM's stolen CPUs get a line of their own from HOST_LINE_MIN_CPUS.
    #[test]
    fn a_vms_steal_is_said_from_a_quarter_cpu() {
        let mut r = build(sample_inputs());
        r.host.measured = true;
        let line = "of this VM's CPUs meanwhile (steal time)";
        r.host.steal_cpus = HOST_LINE_MIN_CPUS - 0.01;
        assert!(!render(&r, false).contains(line));
        r.host.steal_cpus = HOST_LINE_MIN_CPUS + 0.01;
        assert!(render(&r, false).contains(&format!("others on 0.3 {line}")));
    }

    #[test]
    fn color_marks_user_green_and_system_red() {
        let text = render(&build(sample_inputs()), true);
        assert!(text.contains("\x1b[32m") && text.contains("\x1b[31m"));
    }

    /// Issue 13: lines wider than the terminal are cut with `…`; colour
    /// escapes take no columns.
    #[test]
    fn long_lines_are_cut_at_the_terminal_width() {
        let text = "short\nabcdefghij\n\x1b[32mabcdefghij\x1b[0m\nébcdéfghij";
        assert_eq!(
            fit(text, 8),
            "short\nabcdefg…\n\x1b[32mabcdefg…\x1b[0m\nébcdéfg…"
        );
        assert_eq!(fit("abcdefgh\n", 8), "abcdefgh\n");
        let report = render(&build(sample_inputs()), false);
        let fitted = fit(&report, 60);
        assert!(fitted.lines().all(|l| l.chars().count() <= 60));
        assert!(fitted.contains('…') && fitted.lines().count() == report.lines().count());
    }

    #[test]
    fn units_and_separators() {
        assert_eq!(duration(850), "850 ns");
        assert_eq!(duration(12_340), "12.3 us");
        assert_eq!(duration(45_100_000), "45.1 ms");
        assert_eq!(duration(2_500_000_000), "2.500 s");
        assert_eq!(count(0), "0");
        assert_eq!(count(1234), "1,234");
        assert_eq!(count(2_000_001), "2,000,001");
        assert_eq!(rate(4_850_000.0), "4.85 M/s");
        assert_eq!(rate(2400.0), "2.4 k/s");
        assert_eq!(rate(7.25), "7.2/s");
    }
}
