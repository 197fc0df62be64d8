//! `syscall.known-pattern` (issue 38): a standard library call known to
//! make several system calls every time it runs, called so often that
//! those calls together are the program's main traffic with the kernel,
//! though no one of them storms alone. glibc's getaddrinfo, called per
//! request by a Node.js client (dns.lookup on libuv's thread pool), makes
//! about fifteen: a netlink socket's round trip, /etc/hosts read through
//! stdio, stats of resolv.conf and nsswitch.conf; each syscall is a few
//! thousand a second, under `syscall.storm`'s bar, and the finding that
//! fired instead named the event loop as the pool's bottleneck with a
//! generic remedy, while connecting by address spent 15% less CPU a
//! request (tests/real/node-lookup).
//!
//! The signal is the library's own frames on each call site (the
//! runtimes' `patterns`, `crate::runtime`): calls are counted for a
//! pattern only when their stack runs through its functions, never by a
//! program's names. A pattern whose calls storm one syscall on their own,
//! or whose flushes the program waits for, is left to `syscall.storm` or
//! `io.synchronous`, which give the same fix (a live sqlite-commits run
//! once had its commits' writes named here first, ahead of the wait for
//! the disk that is their cost).

use super::common::*;
use super::known::is_pattern_frame;
use crate::report::{Culprit, CulpritKind, Finding, Report, SyscallReport};
use crate::runtime::KnownPattern;
use crate::units::short;

pub const ID: &str = "syscall.known-pattern";
/// The pattern's calls, all its syscalls together (as `syscall.storm`'s
/// bar for one syscall).
pub const MIN_CALLS_PER_S: f64 = 10_000.0;
/// Its calls' share of all the program's syscalls: its main traffic with
/// the kernel.
pub const MIN_CALL_SHARE: f64 = 0.25;
/// System time's share of the target's CPU time (as `syscall.storm`).
pub const MIN_SYSTEM_SHARE: f64 = 0.2;

/// A pattern's calls in a report: how many, their time, and the call site
/// that made most of them.
struct Tally<'a> {
    pattern: &'static KnownPattern,
    calls: f64,
    ns: f64,
    /// Its syscalls by calls, most first.
    syscalls: Vec<(&'a str, f64)>,
    top: Option<(&'a str, &'a [Frame], f64)>,
}

fn tally<'a>(r: &'a Report, pattern: &'static KnownPattern) -> Tally<'a> {
    let mut t = Tally {
        pattern,
        calls: 0.0,
        ns: 0.0,
        syscalls: vec![],
        top: None,
    };
    for s in r
        .syscalls
        .iter()
        .filter(|s| pattern.syscalls.contains(&s.name.as_str()) && small_enough(pattern, s))
    {
        let mut calls = 0.0;
        for c in &s.callsites {
            if c.frames.iter().any(|f| is_pattern_frame(pattern, f)) {
                calls += c.calls as f64;
                // A call site through the program's own managed code before
                // one that is not: a pool's worker makes most of the
                // hand-off's calls, the program's function hands it the
                // tasks.
                let key = (program_method(&c.frames).is_some(), c.calls as f64);
                if t.top
                    .is_none_or(|(_, f, n)| key > (program_method(f).is_some(), n))
                {
                    t.top = Some((&s.name, &c.frames, c.calls as f64));
                }
            }
        }
        if calls > 0.0 {
            t.calls += calls;
            t.ns += s.total_ns as f64 * ratio(calls, s.calls as f64);
            t.syscalls.push((&s.name, calls));
        }
    }
    t.syscalls
        .sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    t
}

/// The program's own managed code on a stack (a JavaScript function of its
/// scripts, a Java method of its classes), innermost first, as people read
/// it: `go (/srv/app.js:5)`.
fn program_method(frames: &[Frame]) -> Option<String> {
    let f = frames
        .iter()
        .find(|f| f.jit_kind() == Some(crate::frame::jit::JitKind::Program))?;
    Some(match f.location().and_then(|l| l.strip_suffix(", js")) {
        Some(at) => format!("{} ({at})", f.function()),
        None => crate::frame::short_function(f.function()),
    })
}

/// Whether a syscall's calls are the pattern's by their size: a pattern of
/// small transfers counts a data syscall only when it asks for no more
/// than the pattern's bytes per call on average.
fn small_enough(pattern: &KnownPattern, s: &SyscallReport) -> bool {
    pattern.max_bytes_per_call.is_none_or(|max| {
        !crate::names::moves_data(&s.name)
            || s.bytes_requested as f64 <= max as f64 * s.calls as f64
    })
}

pub fn check(r: &Report) -> Vec<Finding> {
    let tallies: Vec<Tally> = crate::runtime::all_of(|rt| rt.patterns)
        .map(|p| tally(r, p))
        .filter(|t| t.calls > 0.0)
        .collect();
    if tallies.is_empty() {
        return vec![];
    }
    // The fixes other rules already give: a pattern whose syscalls storm
    // (`syscall.storm`) or whose flushes the program waits for
    // (`io.synchronous`: SQLite's commits) is left to them. Asked only of
    // a report where some pattern's calls were made.
    let given: Vec<String> = super::syscall_storm::check(r)
        .into_iter()
        .chain(super::io_synchronous::check(r))
        .map(|f| f.remedy)
        .collect();
    let system_share = ratio(r.summary.sys_ns as f64, cpu_ns(r));
    let wall_s = wall_ns(r) / 1e9;
    tallies
        .into_iter()
        .filter(|t| !given.iter().any(|g| g.contains(t.pattern.fix)))
        .filter_map(|t| {
            let rate = ratio(t.calls, wall_s);
            let share = ratio(t.calls, r.summary.syscalls as f64);
            let (syscall, frames, _) = t.top?;
            let at = program_method(frames)
                .or_else(|| call_site_past(frames, t.pattern))
                .map(|f| format!(" from {f}"))
                .unwrap_or_default();
            // The calls' time, but no more than the system time in
            // proportion to them: a futex or a read may sleep, and the
            // pattern's cost is the kernel's work, not the waiting (a
            // pool's idle workers wait in its hand-off's futex).
            let ns = t.ns.min(r.summary.sys_ns as f64 * share);
            let which: Vec<String> = t
                .syscalls
                .iter()
                .take(4)
                .map(|(n, c)| format!("{n} {}", short(ratio(*c, wall_s))))
                .collect();
            Draft {
                id: ID,
                title: format!(
                    "{}{at}: {} system calls a second ({}/s)",
                    t.pattern.name,
                    short(rate),
                    which.join(", ")
                ),
                severity: ratio(ns, cpu_ns(r)),
                evidence: vec![
                    at_least("calls_per_s", rate, MIN_CALLS_PER_S),
                    at_least("call_share", share, MIN_CALL_SHARE),
                    at_least("system_share", system_share, MIN_SYSTEM_SHARE),
                ],
                culprit: Culprit {
                    kind: CulpritKind::Syscall,
                    name: syscall.to_string(),
                    frames: frames.to_vec(),
                },
                remedy: t.pattern.fix.to_string(),
                expected_gain: gain(r, t.pattern, ratio(ns, cpu_ns(r))),
            }
            .fire()
        })
        .collect()
}

/// The pattern avoided: the CPU of the samples through the library's
/// functions that make it (and the kernel under them); without samples,
/// the calls' time, at most the system time in proportion to their
/// number (a futex or a read may sleep: a pool's idle workers wait in its
/// hand-off's futex).
fn gain(r: &Report, p: &KnownPattern, without_samples: f64) -> crate::report::ExpectedGain {
    let assumes = format!("were the program to do without {}", p.name);
    super::gain::predict(
        r,
        &super::gain::fixes::pattern(r, p, without_samples, assumes),
    )
}

/// The pattern a `syscall.known-pattern` finding names.
pub fn pattern_of(f: &Finding) -> Option<&'static KnownPattern> {
    (f.id == ID)
        .then(|| crate::runtime::all_of(|r| r.patterns).find(|p| f.title.starts_with(p.name)))
        .flatten()
}

/// The first frame outward past the pattern's own library functions on a
/// call site (innermost first): what called the library. A library
/// function's name ends with the pattern's (`__GI_getaddrinfo`), where a
/// caller's may only contain it (libuv's `uv__getaddrinfo_work`).
fn call_site_past(frames: &[Frame], p: &KnownPattern) -> Option<String> {
    let own = |f: &Frame| {
        let name = crate::frame::short_function(f.function());
        p.frames.iter().any(|k| name.ends_with(k))
    };
    let last = frames.iter().rposition(own)?;
    call_site(&frames[last + 1..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::Rule;
    use crate::findings::tests::{DOWN, UP, base, fired, syscall_report};
    use crate::report::Callsite;

    fn site(frames: &[&str], calls: u64) -> Callsite {
        Callsite {
            frames: frames
                .iter()
                .map(|s| crate::frame::Frame::from(*s))
                .collect(),
            calls,
            calls_estimated: true,
            samples: 10,
        }
    }

    /// A Node.js client resolving its server's name per request: each
    /// lookup's syscalls on libuv's pool, none storming alone, and the
    /// program's own other calls.
    fn lookups(per_s: f64, call_share: f64, system_share: f64) -> Report {
        let mut r = base();
        let each = per_s / 4.0;
        let via = [
            "__check_pf (check_pf.c:328)",
            "__GI_getaddrinfo (getaddrinfo.c:2348)",
            "uv__getaddrinfo_work (getaddrinfo.c:103)",
            "worker (threadpool.c:122)",
        ];
        for name in ["socket", "sendto", "recvmsg", "close"] {
            let mut s = syscall_report(name, each as u64, 5_000.0);
            let mut frames = vec![format!("__GI_{name} (syscall-template.S:120)")];
            frames.extend(via.iter().map(|f| f.to_string()));
            let frames: Vec<&str> = frames.iter().map(String::as_str).collect();
            s.callsites = vec![site(&frames, each as u64)];
            r.syscalls.push(s);
        }
        r.summary.syscalls = (per_s / call_share) as u64;
        r.summary.syscalls_per_s = r.summary.syscalls as f64;
        r.summary.sys_ns = (system_share * 1e9) as u64;
        r.summary.user_ns = 1_000_000_000 - r.summary.sys_ns;
        r
    }

    #[test]
    fn known_pattern_thresholds() {
        let rule: Rule = check;
        let ok = (
            MIN_CALLS_PER_S * UP,
            MIN_CALL_SHARE * UP,
            MIN_SYSTEM_SHARE * UP,
        );
        assert!(fired(rule, &lookups(ok.0, ok.1, ok.2)));
        assert!(!fired(rule, &lookups(MIN_CALLS_PER_S * DOWN, ok.1, ok.2)));
        assert!(!fired(rule, &lookups(ok.0, MIN_CALL_SHARE * DOWN, ok.2)));
        assert!(!fired(rule, &lookups(ok.0, ok.1, MIN_SYSTEM_SHARE * DOWN)));
        let f = &check(&lookups(ok.0, ok.1, ok.2))[0];
        assert!(
            f.title.starts_with(
                "glibc's getaddrinfo resolves the name again on every call from \
                 uv__getaddrinfo_work"
            ),
            "{}",
            f.title
        );
        assert!(f.remedy.contains("keepAlive"), "{}", f.remedy);
    }

    /// The same syscalls from the program's own code are no pattern's.
    #[test]
    fn calls_not_through_the_library_are_not_counted() {
        let mut r = lookups(1e5, 1.0, 0.8);
        for s in &mut r.syscalls {
            s.callsites[0].frames.truncate(1);
            s.callsites[0].frames.push("resolve_peer (app.c:10)".into());
        }
        assert!(check(&r).is_empty());
    }

    /// A Go program logging each request through log.Logger on a file:
    /// one write of `bytes` per line (tests/fixtures/go/logger.go).
    fn go_lines(bytes: u64) -> Report {
        let mut r = base();
        let calls = 200_000;
        let mut s = syscall_report("write", calls, 2_000.0);
        s.bytes_requested = bytes * calls;
        s.callsites = vec![site(
            &[
                "runtime/internal/syscall.Syscall6 (asm_linux_amd64.s:36)",
                "syscall.Syscall (syscall_linux.go:90)",
                "syscall.write (zsyscall_linux_amd64.go:924)",
                "internal/poll.(*FD).Write (fd_unix.go:267)",
                "os.(*File).write (file_posix.go:48) [inlined]",
                "os.(*File).Write (file.go:176)",
                "log.(*Logger).Output (log.go:194)",
                "log.(*Logger).Printf (log.go:206)",
                "main.serve (logger.go:40)",
            ],
            calls,
        )];
        r.syscalls.push(s);
        r.summary.syscalls = calls;
        r.summary.sys_ns = 600_000_000;
        r.summary.user_ns = 400_000_000;
        r
    }

    /// Issue 38: a line's write through Go's os.File is the pattern when
    /// it is small; a bulk copy through the same functions is not.
    #[test]
    fn go_writes_of_lines_are_the_pattern_and_bulk_writes_are_not() {
        let max = crate::runtime::go::MAX_LINE_WRITE_BYTES;
        let f = &check(&go_lines(max))[0];
        assert!(
            f.title
                .starts_with("Go writes every line to its file with a system call of its own from log.(*Logger).Output"),
            "{}",
            f.title
        );
        assert!(f.remedy.contains("bufio.Writer"), "{}", f.remedy);
        assert!(check(&go_lines(max + 1)).is_empty());
    }

    /// libuv's pool handed a stat per task (tests/fixtures/node/stat.js):
    /// most hand-off calls are the workers' sleeps, the program's function
    /// hands the tasks over. The finding names that function, and its gain
    /// is the system time in proportion to the calls, not the sleeps.
    #[test]
    fn a_pools_hand_off_is_named_by_the_programs_caller_and_costs_no_sleep_issue_38() {
        let mut r = base();
        let mut futex = syscall_report("futex", 300_000, 30_000.0);
        futex.callsites = vec![
            site(
                &[
                    "___pthread_cond_wait (pthread_cond_wait.c:618)",
                    "uv_cond_wait (thread.c:793)",
                    "worker (threadpool.c:76)",
                ],
                200_000,
            ),
            site(
                &[
                    "__GI___lll_lock_wake (lowlevellock.c:65)",
                    "uv_mutex_unlock (thread.c:364)",
                    "uv_fs_stat (fs.c:2113)",
                    "node::fs::Stat (node)",
                    "next (/srv/stat.js:22, js)",
                ],
                100_000,
            ),
        ];
        r.syscalls.push(futex);
        r.summary.syscalls = 500_000;
        r.summary.sys_ns = 700_000_000;
        r.summary.user_ns = 300_000_000;
        let f = &check(&r)[0];
        assert!(
            f.title.starts_with(
                "libuv hands each small task to its thread pool and back from next \
                 (/srv/stat.js:22)"
            ),
            "{}",
            f.title
        );
        // 9 s in the calls (the workers' sleeps); 60% of the calls, of 0.7 s
        // of system time.
        assert!(
            (f.expected_gain.time_ns as f64 - 0.42e9).abs() < 1e6,
            "{:?}",
            f.expected_gain
        );
        assert!((f.severity - 0.42).abs() < 1e-6, "{}", f.severity);
    }

    /// The event loop that paces its pool by handing it a lookup per
    /// request is the pattern's symptom: the pattern ranks first.
    #[test]
    fn a_finding_whose_culprit_runs_through_the_pattern_follows_it() {
        let pattern = check(&lookups(1e5, 1.0, 0.8)).remove(0);
        let mut bottleneck = pattern.clone();
        bottleneck.id = "wait.bottleneck".into();
        bottleneck.culprit.frames = vec![
            "uv__work_submit (threadpool.c:274)".into(),
            "uv_getaddrinfo (getaddrinfo.c:206)".into(),
        ];
        let mut other = bottleneck.clone();
        other.culprit.frames = vec!["handle (app.c:3)".into()];
        let mut ranked = vec![bottleneck.clone(), pattern.clone()];
        crate::findings::explained_by_patterns(&mut ranked);
        assert_eq!(ranked[0].id, ID);
        let mut ranked = vec![other, pattern];
        crate::findings::explained_by_patterns(&mut ranked);
        assert_eq!(ranked[1].id, ID);
    }
}
