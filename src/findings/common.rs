//! What the rules share: evidence with thresholds, the gate that fires a
//! finding only when all of it holds, and the figures several rules read.

use std::collections::{BTreeMap, BTreeSet};

use crate::report::{
    Bound, Culprit, CulpritKind, Evidence, ExpectedGain, Finding, LockReport, Release, Report,
    WaitClass, WaitSite,
};

/// `value` must be at least `threshold`.
pub fn at_least(metric: &str, value: f64, threshold: f64) -> Evidence {
    Evidence {
        metric: metric.into(),
        value,
        threshold,
        bound: Bound::Min,
    }
}

/// `value` must be at most `threshold`.
pub fn at_most(metric: &str, value: f64, threshold: f64) -> Evidence {
    Evidence {
        metric: metric.into(),
        value,
        threshold,
        bound: Bound::Max,
    }
}

/// A finding in the making: it becomes one only if all its evidence holds.
pub struct Draft {
    pub id: &'static str,
    pub title: String,
    pub severity: f64,
    pub evidence: Vec<Evidence>,
    pub culprit: Culprit,
    pub remedy: String,
    pub expected_gain: ExpectedGain,
}

impl Draft {
    pub fn fire(self) -> Option<Finding> {
        let remedy = match java_remedy(self.id, &self.culprit.frames) {
            Some(java) => format!("{} {java}", self.remedy),
            None => self.remedy,
        };
        self.evidence.iter().all(Evidence::holds).then(|| Finding {
            id: self.id.into(),
            title: self.title,
            severity: clamp01(self.severity),
            evidence: self.evidence,
            culprit: self.culprit,
            remedy,
            expected_gain: self.expected_gain,
        })
    }
}

/// What the remedy means in Java, for a culprit whose stack is in a Java
/// program's JIT-compiled methods.
fn java_remedy(id: &str, frames: &[Frame]) -> Option<&'static str> {
    let java = frames
        .iter()
        .any(|f| f.jit_kind() == Some(crate::frame::jit::JitKind::Program) && f.is_jit());
    if !java {
        return None;
    }
    Some(match id {
        "spin.waste" => {
            "In Java: a compareAndSet loop with more spinning threads than CPUs burns the \
             holder's CPU; call Thread.onSpinWait() in the loop, give up after a bounded number \
             of tries and park (LockSupport.parkNanos), or use a lock that spins briefly and \
             then parks (ReentrantLock, synchronized)."
        }
        "lock.exclusive-hot" => {
            "In Java: a ReentrantReadWriteLock or a StampedLock with optimistic reads, or an \
             immutable snapshot published through a volatile field that readers take without \
             a lock."
        }
        id if id.starts_with("lock.") => {
            "In Java: keep the critical section (the synchronized block or the code between \
             lock() and unlock()) short and move work out of it; stripe the lock or the data \
             (a ConcurrentHashMap, one lock per shard), use java.util.concurrent's lock-free \
             structures (atomics, LongAdder, ConcurrentLinkedQueue), batch the work done per \
             acquisition, or run fewer threads against it."
        }
        _ => return None,
    })
}

pub fn clamp01(x: f64) -> f64 {
    if x.is_finite() {
        x.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// part / whole, 0 when there is no whole.
pub fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 { part / whole } else { 0.0 }
}

pub fn wall_ns(r: &Report) -> f64 {
    r.duration_ns as f64
}

pub fn cpu_ns(r: &Report) -> f64 {
    (r.summary.user_ns + r.summary.sys_ns) as f64
}

/// CPUs left idle with `threads` threads that could run: of the CPUs the
/// target may use (all, when a report does not say), or the threads if
/// fewer, those it did not use.
pub fn idle_cpus(r: &Report, threads: f64) -> f64 {
    let cpus = if r.summary.cpus > 0 {
        f64::from(r.summary.cpus)
    } else {
        f64::INFINITY
    };
    cpus.min(threads) - r.summary.cpus_used
}

/// The system time in proportion to `calls` of the run's syscalls: what
/// they cost, where nothing measured them one by one.
pub fn calls_system_ns(r: &Report, calls: u64) -> f64 {
    r.summary.sys_ns as f64 * ratio(calls as f64, r.summary.syscalls as f64)
}

/// CPU time inside the calls on every contended lock: what a lock's share
/// of the CPU spent in lock machinery is weighed against.
pub fn all_lock_cpu_ns(r: &Report) -> f64 {
    r.locks
        .iter()
        .filter(|l| l.contention)
        .map(|l| l.cpu_ns as f64)
        .sum()
}

/// The runtime's churn remedy for a lock word that is part of a
/// well-known interpreter lock (a GIL's mutex or condition variable).
pub fn churn_remedy(l: &LockReport) -> Option<&'static str> {
    l.runtime_lock
        .as_deref()
        .and_then(crate::analyze::runtime_locks::by_name)
        .and_then(|rl| rl.churn_remedy)
}

pub fn lock_culprit(l: &LockReport) -> Culprit {
    Culprit {
        kind: CulpritKind::Lock,
        name: l.display_name(),
        frames: l
            .waiter_stacks
            .first()
            .map(|s| s.frames.clone())
            .unwrap_or_default(),
    }
}

/// Share of the waiting threads' time spent in `l`'s calls.
pub fn waiting_share(r: &Report, l: &LockReport) -> f64 {
    ratio(l.wait_ns as f64, wall_ns(r) * f64::from(l.threads.max(1)))
}

pub use crate::frame::Frame;

/// The first frame of a stack (innermost first) that is the program's own
/// code rather than libc's or libpthread's lock machinery: where the lock
/// is taken from.
pub fn caller(frames: &[Frame]) -> Option<&str> {
    frames.iter().map(|f| f.function()).find(|f| !is_runtime(f))
}

/// The program's code a call was made from, as people read it: the
/// caller past the C library's entries; when that is an interpreter's
/// unnamed C (`python3.11+0x471391`, CPython's static `os_getppid_impl`),
/// the interpreted frame that called it with its line (`poll_parent
/// (storm.py:4)`), else the unnamed function with its nearest named
/// callers.
pub fn call_site(frames: &[Frame]) -> Option<String> {
    let f = caller(frames)?;
    if !crate::analyze::runtime_locks::unnamed(f) {
        return Some(f.to_string());
    }
    let at = frames.iter().position(|x| x.function() == f)?;
    if let Some(own) = frames[at..].iter().find(|x| x.is_interpreted()) {
        return Some(own.to_string());
    }
    Some(crate::analyze::waits::with_callers(f, frames))
}

/// Interpreted frames shown for where an interpreter's threads queue or
/// take its lock back.
const INTERPRETED_CALLERS: usize = 2;

/// The innermost interpreted frames of a stack (innermost first), as
/// `work (gil_work.py:16) ← Thread.run (threading.py:975)`; None when it
/// has none.
pub fn interpreted_callers(frames: &[Frame]) -> Option<String> {
    let named: Vec<&str> = frames
        .iter()
        .filter(|f| f.is_interpreted())
        .take(INTERPRETED_CALLERS)
        .map(Frame::as_str)
        .collect();
    (!named.is_empty()).then(|| named.join(" ← "))
}

/// A thread counts as one that works when it is on a CPU for at least this
/// share of the run: a parent shell waiting for its child is not a worker.
pub const ACTIVE_SHARE: f64 = 0.01;

/// The target's threads that were on a CPU for ACTIVE_SHARE of the run.
pub fn busy_threads(r: &Report) -> usize {
    r.threads
        .iter()
        .filter(|t| (t.user_ns + t.sys_ns) as f64 >= wall_ns(r) * ACTIVE_SHARE)
        .count()
}

/// Whether `function` is a runtime's wrapper of a system call
/// (`runtime::Runtime::call_wrappers`).
fn is_runtime(function: &str) -> bool {
    let f = function.trim_start_matches('_');
    crate::runtime::all_of(|r| r.call_wrappers).any(|p| f.starts_with(p))
}

/// A contended thing as the lock rules judge it: the wait sites classed
/// contention, gathered by the runtime's well-known lock they are (a GIL's
/// take and drop sites, its condvar and mutex), else by the lock they wait
/// on when they share one (the callers of one global lock are one unit),
/// else by the wait wrapper they go through (per-waiter semaphores behind
/// one lock function), else alone.
pub struct Unit<'a> {
    /// The lock's display name, or the site's.
    pub name: String,
    /// The runtime's well-known lock it is, if it is one.
    pub runtime: Option<&'static crate::analyze::runtime_locks::RuntimeLock>,
    pub sites: Vec<&'a WaitSite>,
    pub wait_ns: f64,
    pub waiters: BTreeSet<u32>,
    pub processes: u32,
}

impl Unit<'_> {
    /// Share of its waiters' time spent waiting here.
    pub fn waiting_share(&self, r: &Report) -> f64 {
        ratio(self.wait_ns, wall_ns(r) * self.waiters.len().max(1) as f64)
    }

    /// The biggest site's top stack.
    pub fn frames(&self) -> Vec<Frame> {
        self.sites
            .first()
            .and_then(|s| s.stacks.first())
            .map(|s| s.frames.clone())
            .unwrap_or_default()
    }

    /// The release that ended most of its waiting, from the target if
    /// any did (a timer only ends the timed waits of a lock handed over by
    /// its holder).
    pub fn top_release(&self) -> Option<&Release> {
        let all = || self.sites.iter().flat_map(|s| &s.releases);
        all()
            .filter(|r| r.in_target)
            .max_by_key(|r| r.wait_ns)
            .or_else(|| all().max_by_key(|r| r.wait_ns))
    }

    /// Waiters in several processes woken by a signal or a write to a
    /// latch: a lock of the program's own, handed over across processes.
    pub fn cross_process_handoff(&self) -> Option<&Release> {
        let top = self.top_release()?;
        let latch = top.mechanism == "signal" || top.mechanism.starts_with("write");
        (self.processes >= 2 && top.in_target && latch).then_some(top)
    }

    /// The distinct functions that wait on it (short names).
    pub fn callers(&self) -> Vec<String> {
        let mut out: Vec<String> = vec![];
        for s in &self.sites {
            let f = crate::frame::short_function(&s.function);
            if !out.contains(&f) {
                out.push(f);
            }
        }
        out
    }
}

/// Workers per CPU, beyond which fewer workers is a remedy of its own for a
/// lock that serves one holder at a time: more threads than CPUs can serve
/// only queue longer.
pub const MAX_WORKERS_PER_CPU: f64 = 1.0;

/// "Run fewer workers" with what it would cut the queue to, when more
/// threads or processes contend for a lock than the CPUs can serve: sized
/// to the CPUs, at most CPUs - 1 of them could wait at once instead of
/// `queued`.
pub fn fewer_workers(r: &Report, waiters: usize, processes: u32, queued: f64) -> Option<String> {
    let cpus = f64::from(r.summary.cpus.max(1));
    if (waiters as f64) <= cpus * MAX_WORKERS_PER_CPU {
        return None;
    }
    let who = if processes > 1 {
        "processes"
    } else {
        "threads"
    };
    let at_most = (cpus - 1.0).max(0.0);
    Some(format!(
        "Run fewer workers: {waiters} {who} contend for a lock that serves one at a time on \
         {cpus:.0} CPUs, and {queued:.1} of them wait for it at any time. Sized to the CPUs \
         ({cpus:.0}), at most {at_most:.0} could wait at once, and each would get through \
         sooner: more workers than CPUs add only queueing. "
    ))
}

/// The contended units of a report, most waiting first.
pub fn contention_units(r: &Report) -> Vec<Unit<'_>> {
    let mut units: BTreeMap<String, Unit<'_>> = BTreeMap::new();
    for s in r.waits.iter().filter(|s| s.class == WaitClass::Contention) {
        let runtime = s
            .runtime_lock
            .as_deref()
            .and_then(crate::analyze::runtime_locks::by_name);
        let name = match (runtime, s.locks.first(), unit_wrapper(s)) {
            (Some(rl), _, _) => rl.name.to_string(),
            (None, Some(lock), _) if s.lock_words <= 2 => lock.clone(),
            (None, _, Some(w)) => format!("wait:{w}"),
            _ => crate::analyze::waits::display(s),
        };
        let u = units.entry(name.clone()).or_insert_with(|| Unit {
            name,
            runtime,
            sites: vec![],
            wait_ns: 0.0,
            waiters: BTreeSet::new(),
            processes: 0,
        });
        u.sites.push(s);
        u.wait_ns += s.wait_ns as f64;
        u.waiters.extend(&s.waiter_tids);
        u.processes = u.processes.max(s.processes);
    }
    let mut out: Vec<Unit<'_>> = units.into_values().collect();
    for u in &mut out {
        // Biggest first, but a site named by a VM's code (its interpreter,
        // which runs methods it does not name) after the ones named by
        // methods: the same waits from interpreted code before the JIT
        // compiled them must not name the unit.
        u.sites
            .sort_by_key(|s| (named_by_vm_code(s), std::cmp::Reverse(s.wait_ns)));
        // A unit gathered by wrapper is named by its first site.
        if u.name.starts_with("wait:") {
            u.name = crate::analyze::waits::display(u.sites[0]);
        }
    }
    out.sort_by(|a, b| b.wait_ns.total_cmp(&a.wait_ns).then(a.name.cmp(&b.name)));
    out
}

/// The wrapper a site's waits go through that says which lock they are
/// for, gathering sites into one unit: the outermost one that is not the
/// Java platform's (RocketMQ's `PutMessageReentrantLock.lock`, Zabbix's
/// `__zbx_rwlock_wrlock`), else the runtime's primitive they all reach
/// (`Parker::park`). A platform class in between (`AbstractQueuedSynchronizer.acquire`)
/// is every j.u.c. lock's: two program wrappers around it are two locks
/// (issue 19: netty's PoolArena lock, 2 threads, had joined RocketMQ's put
/// lock through their common `Parker::park`).
pub fn unit_wrapper(s: &WaitSite) -> Option<&str> {
    use crate::frame::jit::{JitKind, kind};
    s.via
        .iter()
        .rev()
        .find(|w| kind(w) != JitKind::Platform)
        .map(String::as_str)
}

/// Whether a site is named by a VM's own code (an interpreter frame, a
/// stub) rather than by a method or a function.
fn named_by_vm_code(s: &WaitSite) -> bool {
    use crate::frame::jit::JitKind;
    let stub = s
        .function
        .split(crate::analyze::waits::VM_CALLING)
        .next()
        .unwrap_or_default();
    s.stacks
        .first()
        .and_then(|st| st.frames.iter().find(|f| f.function() == stub))
        .is_some_and(|f| f.jit_kind() == Some(JitKind::Stub))
}

/// Time waited at all contended sites.
pub fn contended_site_wait_ns(r: &Report) -> f64 {
    r.waits
        .iter()
        .filter(|s| s.class == WaitClass::Contention)
        .map(|s| s.wait_ns as f64)
        .sum()
}
