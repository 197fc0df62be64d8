//! `syscall.storm` (Ruby 1.8): one syscall made at a very high rate for
//! little work each time, so entering and leaving the kernel becomes the
//! program's main cost. Calls that move data, wait, or take locks are left
//! to the rules that understand them (their rate is the work, or the wait);
//! what remains is bookkeeping — signal masks, time, ids, file status,
//! memory mapping — that can usually be made once, cached, or avoided.
//!
//! Calls that move data count too when each asks for only a few bytes
//! (`dd bs=1`, unbuffered output) and the threads make them back to back,
//! busy: the buffer, not the data, sets the rate. (A server reading small
//! requests into a big buffer moves what arrives: its rate is its
//! clients'.)
//!
//! A storm whose call site runs through a standard library's function known
//! to issue the call every time (`known.rs`: glibc's time zone check with
//! TZ unset, ucontext's signal mask) gets that library's specific fix, and
//! a file syscall's storm names the file its calls name.

use super::common::*;
use crate::report::{Culprit, CulpritKind, Finding, Report, SyscallReport};
use crate::units::short;

pub const ID: &str = "syscall.storm";
pub const MIN_CALLS_PER_S: f64 = 10_000.0;
/// The syscall's share of all syscalls made.
pub const MIN_CALL_SHARE: f64 = 0.5;
/// System time's share of the target's CPU time.
pub const MIN_SYSTEM_SHARE: f64 = 0.2;
/// Mean time per call: cheap calls, made too often.
pub const MAX_MEAN_NS: f64 = 20_000.0;
/// A data call asking for at most this many bytes on average moves too
/// little for its cost (a syscall costs as much as copying a few kilobytes).
pub const MAX_BYTES_PER_CALL: f64 = 64.0;
/// Calls of one syscall as a share of all calls, for data calls (reads and
/// writes come in pairs, so each is at most half).
pub const MIN_DATA_CALL_SHARE: f64 = 0.3;
/// For data calls: the CPU time of the threads that make the calls over
/// their wall time.
pub const MIN_BUSY_SHARE: f64 = 0.5;
/// A thread makes the calls with at least this share of the run's.
pub const MIN_CALLER_SHARE: f64 = 0.01;

/// CPU time of the threads that make the calls over their time in the
/// run. A parent that only waits for them (the shell of `sh -c 'dd ...'`)
/// is none of them, however long its start-up took: counted by its CPU
/// time, a shell's start-up (1% of a short run, more under emulation)
/// halved the busy share of dd's one thread.
fn busy_share(r: &Report) -> f64 {
    let wall = wall_ns(r);
    let counted = r.threads.iter().any(|t| t.syscalls > 0);
    let callers: Vec<f64> = r
        .threads
        .iter()
        .filter(|t| {
            if counted {
                t.syscalls as f64 >= r.summary.syscalls as f64 * MIN_CALLER_SHARE
            } else {
                // In reports without threads' syscall counts (older than
                // `kerntax top`): the threads on a CPU (common's ACTIVE_SHARE).
                (t.user_ns + t.sys_ns) as f64 >= wall * ACTIVE_SHARE
            }
        })
        .map(|t| (t.user_ns + t.sys_ns) as f64)
        .collect();
    ratio(callers.iter().sum(), wall * callers.len() as f64)
}

/// Calls whose rate is work or waiting, judged by other rules.
const NOT_BOOKKEEPING: &[&str] = &[
    "read",
    "write",
    "readv",
    "writev",
    "pread64",
    "pwrite64",
    "preadv",
    "pwritev",
    "preadv2",
    "pwritev2",
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "sendmmsg",
    "recvmmsg",
    "splice",
    "tee",
    "vmsplice",
    "sendfile",
    "copy_file_range",
    "io_uring_enter",
    "io_submit",
    "io_getevents",
    "futex",
    "futex_waitv",
    "semop",
    "semtimedop",
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "sched_yield",
    "nanosleep",
    "clock_nanosleep",
    "wait4",
    "waitid",
    "accept",
    "accept4",
    "connect",
    "msgsnd",
    "msgrcv",
    "mq_timedsend",
    "mq_timedreceive",
    "fsync",
    "fdatasync",
    "sync_file_range",
];

/// Share of a storm's sampled calls that name one path, from which the
/// title names it.
pub const MIN_PATH_SHARE: f64 = 0.5;

/// The one path most of a file syscall's calls name, if one does.
fn main_path(s: &SyscallReport) -> Option<&str> {
    let top = s.paths.first()?;
    let named: u64 = s.paths.iter().map(|p| p.calls).sum();
    (top.path != crate::tally::OTHER_PATHS
        && ratio(top.calls as f64, named as f64) >= MIN_PATH_SHARE)
        .then_some(top.path.as_str())
}

pub fn check(r: &Report) -> Vec<Finding> {
    let system_share = ratio(r.summary.sys_ns as f64, cpu_ns(r));
    r.syscalls
        .iter()
        .filter(|s| !NOT_BOOKKEEPING.contains(&s.name.as_str()) || tiny_transfers(s))
        .filter_map(|s| {
            let data = crate::names::moves_data(&s.name);
            let call_share = ratio(s.calls as f64, r.summary.syscalls as f64);
            let rate = ratio(s.calls as f64, wall_ns(r) / 1e9);
            let site = s.callsites.first();
            let known = site.and_then(|c| super::known::known(&s.name, &c.frames));
            let at = site
                .and_then(|c| call_site(&c.frames))
                .map(|f| format!(" from {f}"))
                .unwrap_or_default();
            let on = main_path(s).map(|p| format!(" on {p}")).unwrap_or_default();
            let system_ns = calls_system_ns(r, s.calls);
            let mut evidence = vec![
                at_least("calls_per_s", rate, MIN_CALLS_PER_S),
                at_least(
                    "call_share",
                    call_share,
                    if data {
                        MIN_DATA_CALL_SHARE
                    } else {
                        MIN_CALL_SHARE
                    },
                ),
            ];
            let mut title = format!(
                "{} is called {} times a second{at}{on}",
                s.name,
                short(rate)
            );
            if let Some(k) = known {
                title = format!("{title}: {}", k.name);
            }
            if data {
                let per_call = ratio(s.bytes_requested as f64, s.calls as f64);
                evidence.push(at_most(
                    "requested_bytes_per_call",
                    per_call,
                    MAX_BYTES_PER_CALL,
                ));
                evidence.push(at_least("busy_share", busy_share(r), MIN_BUSY_SHARE));
                title = format!(
                    "{} asks for {per_call:.1} bytes per call, {} times a second{at}",
                    s.name,
                    short(rate)
                );
            }
            Draft {
                id: ID,
                title,
                severity: ratio(system_ns, cpu_ns(r)),
                evidence: evidence
                    .into_iter()
                    .chain([
                        at_least("system_share", system_share, MIN_SYSTEM_SHARE),
                        at_most(
                            "mean_ns",
                            ratio(s.total_ns as f64, s.calls as f64),
                            MAX_MEAN_NS,
                        ),
                    ])
                    .collect(),
                culprit: Culprit {
                    kind: CulpritKind::Syscall,
                    name: s.name.clone(),
                    frames: site.map(|c| c.frames.clone()).unwrap_or_default(),
                },
                remedy: match known {
                    Some(k) => k.fix.to_string(),
                    None => remedy(s),
                },
                expected_gain: gain(r, s, data, known),
            }
            .fire()
        })
        .collect()
}

/// The storm's calls made far fewer: for a data call, the buffer made
/// bigger, which takes its tiny siblings (`dd bs=1`'s reads and writes)
/// with it; for bookkeeping, the calls made once.
fn gain(
    r: &Report,
    s: &SyscallReport,
    data: bool,
    known: Option<&crate::runtime::KnownPattern>,
) -> crate::report::ExpectedGain {
    // A library's known pattern: its fix takes the library's path away
    // (ucontext's switches replaced), the user side of it too.
    if let Some(k) = known {
        let without = ratio(calls_system_ns(r, s.calls), cpu_ns(r));
        let assumes = format!("with the library's path taken away ({})", k.name);
        let fix = super::gain::fixes::pattern(r, k, without, assumes);
        let fix = super::gain::fixes::with_aftermath(r, fix, super::gain::fixes::on_pattern(k));
        return super::gain::predict(r, &fix);
    }
    let siblings: Vec<&SyscallReport> = r
        .syscalls
        .iter()
        .filter(|o| {
            o.name == s.name || (data && crate::names::moves_data(&o.name) && tiny_transfers(o))
        })
        .collect();
    let calls: Vec<(&str, &[Frame])> = siblings
        .iter()
        .filter_map(|o| {
            o.callsites
                .first()
                .map(|c| (o.name.as_str(), c.frames.as_slice()))
        })
        .collect();
    let assumes = if data {
        format!(
            "were {} given buffers of a few kilobytes (one call per block, not per byte)",
            siblings
                .iter()
                .map(|o| o.name.as_str())
                .collect::<Vec<_>>()
                .join(" and ")
        )
    } else {
        format!(
            "were {} made once (or cached) instead of on every pass",
            s.name
        )
    };
    // Without CPU samples: the system time in proportion to their calls.
    let n: u64 = siblings.iter().map(|o| o.calls).sum();
    let without = ratio(calls_system_ns(r, n), cpu_ns(r));
    let fix = super::gain::fixes::calls(r, &calls, without, assumes);
    let fix = super::gain::fixes::with_aftermath(r, fix, super::gain::fixes::calls_path(&calls));
    super::gain::predict(r, &fix)
}

/// A data call that moves few bytes per call.
fn tiny_transfers(s: &SyscallReport) -> bool {
    s.bytes_requested > 0 && ratio(s.bytes_requested as f64, s.calls as f64) <= MAX_BYTES_PER_CALL
}

fn remedy(s: &SyscallReport) -> String {
    match s.name.as_str() {
        "rt_sigprocmask" => "Blocking and unblocking signals around each operation \
             costs a syscall each time. Block them once for the thread (or the whole section), \
             or use a flag checked by the signal handler instead."
            .into(),
        "clock_gettime" | "gettimeofday" | "time" => "Reading the clock should not enter \
             the kernel (the vDSO answers it): check the clock source (tsc, not hpet or \
             xen), or read the time once per batch."
            .into(),
        name if crate::names::moves_data(name) => format!(
            "Each {name} moves only a few bytes, so the program pays a kernel entry per byte or \
             two. Move data in large blocks: a bigger buffer (dd bs=64K, setvbuf, a \
             BufWriter/BufReader), or gather small writes into one (writev, batching)."
        ),
        "mmap" | "munmap" | "brk" | "madvise" | "mprotect" => "Memory is mapped and \
             unmapped over and over: keep and reuse buffers, or tune the allocator so it stops \
             returning memory to the kernel (e.g. M_TRIM_THRESHOLD, M_MMAP_THRESHOLD)."
            .into(),
        _ => format!(
            "The program enters the kernel for {} far more often than the answer can change. \
             Make the call once and keep its result, batch the work behind it, or find the \
             library call that issues it on every iteration (the call site above).",
            s.name
        ),
    }
}
