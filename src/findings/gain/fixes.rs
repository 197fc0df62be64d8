//! What each kind of fix removes, as the rules' remedies describe it: a
//! lock's waits and its machinery's CPU; a call's library path; a spin
//! loop's CPU; a thread's waits for what paces it; the host's other work.

use std::collections::HashMap;

use super::{Fix, Samples, Through, lock_machinery};
use crate::frame::Frame;
use crate::report::{ExpectedGain, OffCpuReason, Report};
use crate::runtime::KnownPattern;

/// The off-CPU reasons a wait on a lock of the program's can fall under:
/// a futex or semaphore, a condition variable used as a lock (a GIL), a
/// latch or a signal waited for in poll or a read.
pub const LOCK_WAIT_REASONS: &[OffCpuReason] = &[
    OffCpuReason::Lock,
    OffCpuReason::WaitingForWork,
    OffCpuReason::IoMultiplexing,
    OffCpuReason::BlockingSyscall,
    OffCpuReason::Other,
];

/// `wait_ns` of waiting spread over the threads `tids` (all the program's
/// when empty) in proportion to their time in `reasons`, each at most that.
pub fn spread(r: &Report, tids: &[u32], wait_ns: f64, reasons: &[OffCpuReason]) -> Vec<(u32, f64)> {
    let time: HashMap<u32, f64> = r
        .offcpu
        .iter()
        .filter(|t| tids.is_empty() || tids.contains(&t.tid))
        .map(|t| {
            let ns = t
                .reasons
                .iter()
                .filter(|x| reasons.contains(&x.reason))
                .map(|x| x.ns as f64)
                .sum::<f64>();
            (t.tid, ns)
        })
        .filter(|(_, ns)| *ns > 0.0)
        .collect();
    let total: f64 = time.values().sum();
    if total <= 0.0 {
        return vec![];
    }
    let mut out: Vec<(u32, f64)> = time
        .into_iter()
        .map(|(tid, ns)| (tid, (wait_ns * ns / total).min(ns)))
        .collect();
    out.sort_by_key(|x| x.0);
    out
}

/// A lock taken out of the threads' way (sharded, made shared for
/// readers, or gone): its waits, and its share (`weight`) of the CPU the
/// program spent in lock machinery.
pub fn lock(r: &Report, tids: &[u32], wait_ns: f64, weight: f64, assumes: String) -> Fix {
    let t = Samples::of(r).through_frames(lock_machinery);
    Fix {
        waits: spread(r, tids, wait_ns, LOCK_WAIT_REASONS),
        wait_reasons: LOCK_WAIT_REASONS.to_vec(),
        cpu_share: t.share * weight.clamp(0.0, 1.0),
        cpu_samples: t.samples,
        cpu_where: t.threads,
        cpu_threads: tids.to_vec(),
        assumes,
        ..Fix::default()
    }
}

/// The gain of a contended lock `l` taken out of the threads' way: its
/// blocked time, and its share of the program's lock-machinery CPU.
pub fn of_lock(r: &Report, l: &crate::report::LockReport, assumes: String) -> ExpectedGain {
    super::predict(r, &whole_lock(r, l, assumes))
}

/// A contended lock `l` out of the threads' way: its blocked time, and its
/// share of the program's lock-machinery CPU.
fn whole_lock(r: &Report, l: &crate::report::LockReport, assumes: String) -> Fix {
    let weight =
        super::super::common::ratio(l.cpu_ns as f64, super::super::common::all_lock_cpu_ns(r));
    lock(r, &[], l.blocked_ns as f64, weight, assumes)
}

/// The gain of a churning lock `l`'s collisions gone, with the least its
/// remedy gives: a lock that spins briefly before it sleeps (or hands over
/// in user space) ends the futex calls and the CPU they cost, and keeps
/// the collisions' waits (the critical sections stay serial).
pub fn of_churn(r: &Report, l: &crate::report::LockReport, assumes: String) -> ExpectedGain {
    let mut fix = whole_lock(r, l, assumes);
    fix.at_least = Some(Box::new(Fix {
        waits: vec![],
        at_least: None,
        ..fix.clone()
    }));
    super::predict(r, &fix)
}

/// The gain of a wait site's waits gone (what its `waiters` queue for
/// split or held briefly): `wait_ns` of the program's `all_wait_ns`.
pub fn of_site(
    r: &Report,
    waiters: &[u32],
    wait_ns: f64,
    all_wait_ns: f64,
    assumes: String,
) -> ExpectedGain {
    let weight = super::super::common::ratio(wait_ns, all_wait_ns);
    super::predict(r, &lock(r, waiters, wait_ns, weight, assumes))
}

/// Calls made far less often (batched, cached, or not made): the CPU of
/// the samples through their path, from the program's function that makes
/// them down through its library's wrappers and the kernel (entered from a
/// wrapper or the caller: the entry and exit's own cost is the call's), and
/// the caller's own samples. Each call is
/// its syscall's name and its call site's stack (innermost first).
pub fn calls(r: &Report, calls: &[(&str, &[Frame])], without_samples: f64, assumes: String) -> Fix {
    let through = calls_path(calls);
    let t = Samples::of(r).through_threads(through);
    Fix {
        without_samples,
        ..cpu(t, assumes)
    }
}

/// Whether a folded stack is on one of `calls`' paths or runs through a
/// library's known pattern.
pub fn calls_or_pattern<'a>(
    calls: &'a [(&'a str, &'a [Frame])],
    p: &'a KnownPattern,
) -> impl Fn(&[Frame]) -> bool + 'a {
    let (through, on) = (calls_path(calls), on_pattern(p));
    move |stack: &[Frame]| through(stack) || on(stack)
}

/// Whether a folded stack (outermost first) is on one of `calls`' paths.
pub fn calls_path<'a>(calls: &'a [(&'a str, &'a [Frame])]) -> impl Fn(&[Frame]) -> bool + 'a {
    let paths: Vec<(String, Vec<&str>, Option<&str>)> = calls
        .iter()
        .map(|(name, frames)| {
            let caller = super::super::common::caller(frames);
            let wrappers = frames
                .iter()
                .map(|f| f.function())
                .take_while(|f| Some(*f) != caller)
                .collect();
            (format!("sys_{name}"), wrappers, caller)
        })
        .collect();
    // A folded stack is outermost first: its kernel part, if any, is
    // entered from the user frame just before it.
    move |stack: &[Frame]| {
        let entry = stack.iter().position(|f| f.as_str().ends_with(" [k]"));
        let from = entry
            .and_then(|i| i.checked_sub(1))
            .map(|i| stack[i].function());
        paths.iter().any(|(kernel, wrappers, caller)| {
            let has_caller = caller.is_none_or(|c| stack.iter().any(|f| f.function() == c));
            let in_call = stack.iter().any(|f| {
                f.as_str()
                    .strip_suffix(" [k]")
                    .is_some_and(|k| k.ends_with(kernel.as_str()))
                    || wrappers.contains(&f.function())
            }) || from.is_some_and(|f| Some(f) == *caller || wrappers.contains(&f));
            // The caller's own work around each call (filling and scanning
            // poll's array of fds, a byte loop's bookkeeping) goes with it.
            let own = stack.last().map(|f| f.function()) == *caller && caller.is_some();
            (has_caller && in_call) || own
        })
    }
}

/// A library's known pattern avoided (its fix takes the library's path
/// away, the user side of it too): the CPU of the samples through the
/// pattern's functions and the kernel under them.
pub fn pattern(r: &Report, p: &KnownPattern, without_samples: f64, assumes: String) -> Fix {
    let t = Samples::of(r).through_threads(on_pattern(p));
    Fix {
        without_samples,
        ..cpu(t, assumes)
    }
}

/// The most of a thread's other CPU a storm's calls are taken to cost it
/// beyond their own (`with_aftermath`): an assumption, that the code
/// around the calls runs at least half as fast as it would without them.
pub const AFTERMATH_MAX_SHARE: f64 = 0.5;

/// A fix that takes system calls away, with its range's high end at what
/// they cost the code around them too: each entry into the kernel leaves
/// the caller's caches, branch predictors and TLB colder, and the user code
/// after a call runs slower for a while (FlexSC, OSDI'10, measured the
/// instructions per cycle user code loses after a call to be of the order
/// of the call's own cost). So the high end counts the fix's kernel
/// samples once more, taken from the same threads' other samples, at most
/// AFTERMATH_MAX_SHARE of them; gawk's `strftime` storm measured 80%
/// against 59-75% without it. `matches` is the fix's path, as its CPU was
/// read.
pub fn with_aftermath(r: &Report, fix: Fix, matches: impl Fn(&[Frame]) -> bool) -> Fix {
    let most = cpu_with_aftermath(r, matches, String::new());
    if most.cpu_samples <= fix.cpu_samples {
        return fix;
    }
    let most = Fix {
        cpu_share: most.cpu_share,
        cpu_samples: most.cpu_samples,
        cpu_where: most.cpu_where,
        ..fix.clone()
    };
    Fix {
        at_most: Some(Box::new(most)),
        ..fix
    }
}

/// The CPU of the samples on `matches`' path with what that path's kernel
/// work costs the code around it, as `with_aftermath`'s high end counts it
/// (for a fix that is itself a range's high end).
pub fn cpu_with_aftermath(r: &Report, matches: impl Fn(&[Frame]) -> bool, assumes: String) -> Fix {
    cpu(
        Samples::of(r).through_with_aftermath(matches, AFTERMATH_MAX_SHARE),
        assumes,
    )
}

/// Whether a folded stack runs through a library's known pattern.
pub fn on_pattern(p: &KnownPattern) -> impl Fn(&[Frame]) -> bool + '_ {
    move |stack: &[Frame]| {
        stack
            .iter()
            .any(|f| super::super::known::is_pattern_frame(p, f))
    }
}

/// Code that stops running (a spin loop that sleeps instead, a library's
/// pattern avoided): the CPU of its samples, taken from the threads they
/// were on.
pub fn cpu(t: Through, assumes: String) -> Fix {
    Fix {
        cpu_share: t.share,
        cpu_samples: t.samples,
        cpu_where: t.threads,
        assumes,
        ..Fix::default()
    }
}

/// Waits of `tids` in `reasons` that the fix takes away (a flush batched,
/// the source that paced a thread made fast), `wait_ns` of them.
pub fn waits(
    r: &Report,
    tids: &[u32],
    wait_ns: f64,
    reasons: &[OffCpuReason],
    assumes: String,
) -> Fix {
    Fix {
        waits: spread(r, tids, wait_ns, reasons),
        wait_reasons: reasons.to_vec(),
        assumes,
        ..Fix::default()
    }
}

/// The program alone on its CPUs.
pub fn alone(assumes: String) -> Fix {
    Fix {
        frees_background: true,
        assumes,
        ..Fix::default()
    }
}
