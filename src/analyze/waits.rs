//! Wait sites: every blocking wait of the target attributed to the place in
//! the program's own code where it waits, over all its threads and
//! processes, and classified from what the run shows rather than from the
//! primitive used.
//!
//! Why by code and not by futex word: a lock whose words are one per waiter
//! (a semaphore per process, a per-thread parker, a latch woken by a
//! signal) spreads over as many words as it has waiters, and a global
//! interpreter lock built from a mutex and a condition variable over two;
//! the code that waits is the same for all of them.
//!
//! Why by evidence: a condition variable can be a lock (threads with work
//! queue on it and hand it to each other) and a mutex can park an idle pool.
//! What tells them apart is who ends the waits (the waiters themselves,
//! taking turns; another thread of the target; another process; the
//! kernel), how the waits end (woken, timed out and retried, futile), and
//! whether the waiters have work between waits.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::aggregate::ThreadUsage;
use super::locks::classify::{LockKind, kind_of_stack};
use crate::model::{LockKey, OffCpuCounters, OffReason, Waker};
use crate::names::syscall_name;
use crate::report::{CountedStack, Release, TimedStack, WaitClass, WaitSite};
use crate::stacks::frame::{function, is_jit, jit_kind, short_function, words};
use crate::stacks::jit::JitKind;
use crate::tally::{SleepKey, SleepTally};

/// Stacks kept per site and per release.
const MAX_STACKS: usize = 8;
/// Sites kept in the report (most time first).
const MAX_SITES: usize = 200;
/// Own frames looked at for the site, past the runtime's.
const MAX_WRAPPERS: usize = 6;

/// Words of a function name that make it a wait or lock wrapper of the
/// program's own (`PGSemaphoreLock`, `Mutex::Lock`, `WaitLatch`,
/// `LWLockAcquire`): the site is the function that called it.
pub const WAIT_WORDS: &[&str] = &[
    "wait",
    "waits",
    "timedwait",
    "lock",
    "trylock",
    "locked",
    "mutex",
    "latch",
    "sem",
    "semaphore",
    "futex",
    "park",
    "cond",
    "condvar",
    "acquire",
    "await",
    "parker",
];
/// Words that make a language platform's method (`java.`, `jdk.`...) a
/// blocking helper beside `WAIT_WORDS`: `ForkJoinPool.managedBlock`, a
/// condition node's `block`. Whether the JIT inlined one or left it a
/// frame of its own must not move an idle pool's site. Only for the
/// platform's methods: in a program's own code "block" is as often data
/// (`compress_block`).
pub const PLATFORM_WAIT_WORDS: &[&str] = &["block", "blocker"];
/// The same on the release side (`Mutex::Unlock`, `SetLatch`, `sem_post`).
pub const WAKE_WORDS: &[&str] = &[
    "wake",
    "wakeup",
    "unlock",
    "post",
    "signal",
    "notify",
    "broadcast",
    "unpark",
    "latch",
    "sem",
    "semaphore",
    "futex",
    "mutex",
    "cond",
    "condvar",
    "kill",
];

/// Class thresholds, each documented where it is used.
/// Waits that returned at once, as a share of all waits here, above which
/// the site is a contended lock word.
pub const MIN_FUTILE_SHARE: f64 = 0.2;
/// ... and their rate, so a few races make no contention.
pub const MIN_FUTILE_PER_S: f64 = 100.0;
/// Share of the woken waiting ended by the waiters themselves: taking turns.
pub const MIN_TURNS_SHARE: f64 = 0.5;
/// Share of sleeps that time out, above which waits that retry are polls
/// for something (a lock handed over with a timed wait, as a GIL does).
pub const MIN_TIMEOUT_SHARE: f64 = 0.5;
/// The waiters' CPU time over their time in the run, above which they have
/// work between waits.
pub const MIN_BUSY_SHARE: f64 = 0.05;
/// Share of the woken waiting one kind of waker ended (exits, other
/// processes and the kernel, producers in the target) that decides the
/// class when no sign of contention does.
pub const MIN_RELEASE_SHARE: f64 = 0.5;
/// The waiters' time running or runnable over their time between waits at
/// a site, above which they have work in hand when they come to wait (the
/// followers of an idle pool's leader spend that time in its wait for
/// work).
pub const MIN_BUSY_BETWEEN_SHARE: f64 = 0.25;
/// Share of a lock's sleeping at contended sites from which the lock is
/// contention.
pub const MIN_CONTENDED_SHARE_OF_LOCK: f64 = 0.25;
/// Sleeps per waiter at or under which a site only parks threads once
/// (start-up, teardown, a join).
pub const MAX_PARKED_WAITS: f64 = 2.0;
/// ... provided they sleep there at least this share of the run.
pub const MIN_PARKED_SHARE: f64 = 0.2;

/// A pthread object a futex word belongs to, near enough: its process and
/// its address to 32 bytes (an 8-byte aligned condvar's two wait words,
/// at +0x28 and +0x2c, never straddle such a boundary).
type LockObject = (u32, u64);

fn object(key: &LockKey) -> LockObject {
    match *key {
        LockKey::Private { pid, addr } => (pid, addr & !0x1f),
        LockKey::Shared { ino, offset, .. } => (ino as u32, offset & !0x1f),
        LockKey::SysV { semid, semnum } => (semid, u64::from(semnum)),
    }
}

/// A sampled sleep and where it was.
#[derive(Clone, Debug)]
pub struct SleepSample {
    pub key: SleepKey,
    pub frames: Vec<String>,
    /// Leading strings of `frames` in runtime libraries.
    pub runtime: usize,
    pub tally: SleepTally,
}

/// Sampled wait calls on a lock from one stack (futile ones included).
#[derive(Clone, Debug)]
pub struct LockWaitSample {
    pub key: LockKey,
    pub frames: Vec<String>,
    pub runtime: usize,
    /// Waits that returned at once (EAGAIN) the samples stand for.
    pub futile: u64,
}

/// A sampled wake-up: the waker's stack.
#[derive(Clone, Debug)]
pub struct WakeSample {
    pub waker_tid: u32,
    pub woken_tid: u32,
    pub frames: Vec<String>,
    pub runtime: usize,
    pub weight: u64,
}

pub struct Inputs<'a> {
    pub sleeps: &'a [SleepSample],
    pub lock_waits: &'a [LockWaitSample],
    pub wakes: &'a [WakeSample],
    /// Exact off-CPU counters (to scale the samples to).
    pub offcpu: &'a [OffCpuCounters],
    /// Exact futile waits per lock.
    pub futile: &'a HashMap<LockKey, u64>,
    pub threads: &'a [ThreadUsage],
    /// Thread names, also of wakers outside the target.
    pub comms: &'a HashMap<u32, String>,
    pub duration_ns: u64,
}

/// Between a VM stub's name and the method it called, in the name of a
/// site in the VM's code (`Interpreter calling java.lang.Object.wait`).
pub const VM_CALLING: &str = " calling ";

/// The site a stack waits at: (function, wrappers innermost first), from
/// the first own frame past the runtime's; wrappers are own frames whose
/// name has one of `wrapper_words`.
pub fn site_of(frames: &[String], runtime: usize, wrapper_words: &[&str]) -> (String, Vec<String>) {
    let own: Vec<&str> = frames.iter().skip(runtime).map(String::as_str).collect();
    if own.is_empty() {
        // All runtime: name it by the outermost runtime frame.
        let name = frames.last().map_or("[no stack]", |f| function(f));
        return (name.to_string(), vec![]);
    }
    let is_wrapper = |f: &str| words(f).iter().any(|w| wrapper_words.contains(&w.as_str()));
    let mut via: Vec<String> = vec![];
    let mut looked = 0;
    // A language runtime's code (its native library, its platform's JIT
    // methods, its stubs) passed on the way: threads of a VM pass through
    // it to reach the program's methods, and its own threads never do.
    let mut in_runtime = false;
    // JIT code met: the runtime's native frames beyond it are the VM's
    // entry into Java (a thread's start), no place to name a wait by.
    let mut past_jit = false;
    let mut platform: Option<(String, usize)> = None;
    let mut last_platform: Option<(String, usize)> = None;
    let mut first_stub: Option<(String, usize)> = None;
    // Methods of the program's met, all of them wrappers (a lock manager's
    // layers): the outermost looked at is the site, before any platform
    // frame.
    let mut program_wrappers = 0;
    for f in own {
        let name = function(f);
        let jit = is_jit(f);
        match jit_kind(f) {
            Some(JitKind::Stub) => {
                in_runtime = true;
                past_jit = true;
                first_stub.get_or_insert((name.to_string(), via.len()));
                continue;
            }
            Some(JitKind::Platform) => {
                in_runtime = true;
                past_jit |= jit;
                let blocker = words(name)
                    .iter()
                    .any(|w| PLATFORM_WAIT_WORDS.contains(&w.as_str()));
                if (jit || !past_jit) && platform.is_none() && !is_wrapper(name) && !blocker {
                    platform = Some((name.to_string(), via.len()));
                }
                if jit || !past_jit {
                    last_platform = Some((name.to_string(), via.len()));
                }
                via.push(name.to_string());
                continue;
            }
            Some(JitKind::Program) => in_runtime = true,
            None if in_runtime => {
                // Out of the runtime into other native code (the C library's
                // thread start) without meeting a method of the program's:
                // the thread runs the runtime's own code (a pool's worker
                // loop, a GC thread), or methods the JIT did not name.
                break;
            }
            None => {}
        }
        if looked == MAX_WRAPPERS {
            break;
        }
        looked += 1;
        if !is_wrapper(name) {
            return (name.to_string(), via);
        }
        if jit_kind(f) == Some(JitKind::Program) {
            program_wrappers = via.len() + 1;
        }
        via.push(name.to_string());
    }
    if program_wrappers > 0 {
        via.truncate(program_wrappers);
    } else if let Some((site, at)) = platform {
        via.truncate(at);
        return (site, via);
    } else if let Some((stub, at)) = first_stub {
        // VM code running methods it does not name (the interpreter): the
        // platform method it called tells its waits apart, so that an idle
        // thread's Object.wait and a worker's lock, both interpreted before
        // the JIT compiled them, are not one site.
        via.truncate(at);
        let site = match via.last() {
            Some(called) => format!("{stub}{VM_CALLING}{called}"),
            None => stub,
        };
        return (site, via);
    } else if let Some((site, at)) = last_platform {
        via.truncate(at);
        return (site, via);
    }
    // Nothing but wrappers: the outermost seen is the site (an overload
    // calling itself is not its own wrapper).
    let site = via.pop().unwrap_or_default();
    via.retain(|v| *v != site);
    (site, via)
}

/// How a sleep ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Woken,
    TimedOut,
    Interrupted,
}

fn outcome(syscall: &str, ret: i32) -> Outcome {
    match (syscall, ret) {
        (_, r) if r == -libc::ETIMEDOUT => Outcome::TimedOut,
        // EINTR, and the kernel's restart codes (ERESTARTSYS..ERESTART_RESTARTBLOCK).
        (_, r) if r == -libc::EINTR || (-516..=-512).contains(&r) => Outcome::Interrupted,
        (
            "poll" | "ppoll" | "select" | "pselect6" | "epoll_wait" | "epoll_pwait"
            | "epoll_pwait2",
            0,
        ) => Outcome::TimedOut,
        ("rt_sigtimedwait", r) if r == -libc::EAGAIN => Outcome::TimedOut,
        ("nanosleep" | "clock_nanosleep", 0) => Outcome::TimedOut,
        _ => Outcome::Woken,
    }
}

/// How a waker woke (its syscall), as the wake-up graph says it.
pub fn mechanism(w: &Waker, comm: &str) -> String {
    if w.kernel && w.nr.is_none() {
        return "kernel (timer, interrupt or kernel thread)".into();
    }
    super::sched::mechanism_of(w.nr, w.kernel, w.tracked, comm)
}

/// How busy a site's waiters are.
#[derive(Clone, Copy, Debug, Default)]
struct Busy {
    /// Their CPU over the run.
    run_share: f64,
    /// Running or runnable over their time between waits at the site.
    between_share: f64,
}

/// A thread's time in the run, as the exact counters tell it.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadTime {
    pub cpu_ns: f64,
    /// Runnable, not running.
    pub runqueue_ns: f64,
    /// CPU plus every sleep seen (a sleep under way when profiling began
    /// is not), at most the run.
    pub seen_ns: f64,
}

fn thread_times(inp: &Inputs<'_>, wall: f64) -> HashMap<u32, ThreadTime> {
    let mut out: HashMap<u32, ThreadTime> = inp
        .threads
        .iter()
        .map(|t| {
            let cpu_ns = (t.user_ns + t.sys_ns) as f64;
            let time = ThreadTime {
                cpu_ns,
                runqueue_ns: 0.0,
                seen_ns: cpu_ns,
            };
            (t.tid, time)
        })
        .collect();
    for c in inp.offcpu {
        if let Some(t) = out.get_mut(&c.tid) {
            t.seen_ns += c.ns as f64;
            if c.reason == OffReason::RunQueue {
                t.runqueue_ns += c.ns as f64;
            }
        }
    }
    for t in out.values_mut() {
        t.seen_ns = t.seen_ns.min(wall);
    }
    out
}

#[derive(Default)]
struct ReleaseAcc {
    wakers: BTreeSet<u32>,
    count: f64,
    ns: f64,
    in_target: bool,
    /// Of `ns`: ended by a thread of another process.
    other_process_ns: f64,
    /// (waker tid, woken tid) -> sleeps of this site it ended.
    pairs: HashMap<(u32, u32), f64>,
}

#[derive(Default)]
struct SiteAcc {
    /// The wrappers of the heaviest stack (see `vias`).
    via: Vec<String>,
    /// Time by wrapper chain: a site waits through the chain most of its
    /// time went through.
    vias: BTreeMap<Vec<String>, f64>,
    ns: f64,
    count: f64,
    timed_out: f64,
    woken: f64,
    interrupted: f64,
    futile: f64,
    waiters: BTreeSet<u32>,
    pids: BTreeSet<u32>,
    syscalls: BTreeMap<String, f64>,
    locks: BTreeSet<LockKey>,
    stacks: BTreeMap<Vec<String>, (f64, u64)>,
    /// mechanism -> what ended these sleeps.
    releases: BTreeMap<String, ReleaseAcc>,
    /// (waker tid, lock object slept on) -> woken time, for the turns share.
    woken_by: HashMap<(u32, Option<LockObject>), f64>,
    /// Threads that slept here on each lock object.
    lock_waiters: HashMap<Option<LockObject>, BTreeSet<u32>>,
    /// Lock objects slept on inside a mutex or rwlock's lock call: whoever
    /// wakes a sleeper there is releasing it, so has held it.
    held_objects: BTreeSet<LockObject>,
    woken_ns: f64,
    /// Time asleep here per (thread, syscall).
    by_call: HashMap<(u32, u32), f64>,
    /// Time asleep per lock word.
    by_lock: HashMap<LockKey, f64>,
    /// (when a sampled call returned, CLOCK_MONOTONIC ns; the sleep it
    /// stands for, scaled).
    spans: Vec<(u64, f64)>,
}

/// Per (tid, nr, lock): exact (ns, count) over sampled (ns, count).
fn scales(inp: &Inputs<'_>) -> HashMap<(u32, u32, Option<LockKey>), (f64, f64)> {
    let mut exact: HashMap<(u32, u32, Option<LockKey>), (u64, u64)> = HashMap::new();
    for c in inp.offcpu {
        if let OffReason::Syscall { nr, lock } = c.reason {
            let e = exact.entry((c.tid, nr, lock)).or_default();
            e.0 += c.ns;
            e.1 += c.count;
        }
    }
    let mut sampled: HashMap<(u32, u32, Option<LockKey>), (u64, u64)> = HashMap::new();
    for s in inp.sleeps {
        let e = sampled
            .entry((s.key.tid, s.key.nr, s.key.lock))
            .or_default();
        e.0 += s.tally.ns;
        e.1 += s.tally.count;
    }
    sampled
        .into_iter()
        .map(|(k, (ns, n))| {
            let (ens, en) = exact.get(&k).copied().unwrap_or((ns, n));
            let f = |e: u64, s: u64| if s == 0 { 1.0 } else { e as f64 / s as f64 };
            (k, (f(ens, ns), f(en, n)))
        })
        .collect()
}

/// What the wait-site analysis hands on besides the sites.
#[derive(Default)]
pub struct Waits {
    pub sites: Vec<WaitSite>,
    /// Per site (same order), its lock words, most time first.
    pub site_locks: Vec<Vec<LockKey>>,
    /// The class each lock word's waits got (the site holding most of them).
    pub lock_class: HashMap<LockKey, WaitClass>,
    /// Per (thread, syscall), time asleep at contended sites: a latch's
    /// epoll_wait or a pipe's read that is a lock wait.
    pub contended_calls: HashMap<(u32, u32), u64>,
    /// The contended sites' functions.
    pub contended_sites: BTreeSet<String>,
    /// The contended sites' sleeps in time: (when each ended, CLOCK_MONOTONIC
    /// ns; its length, ns), scaled to the exact counters.
    pub contended_spans: Vec<(u64, f64)>,
}

/// The wait sites, most at stake first.
pub fn build(inp: &Inputs<'_>) -> Waits {
    let scale = scales(inp);
    let mut sites: BTreeMap<String, SiteAcc> = BTreeMap::new();
    // Where each (tid, waker tid) pair's sleeps were, for the wake stacks.
    let mut pair_sites: HashMap<(u32, u32), BTreeMap<String, f64>> = HashMap::new();
    let mut lock_sites: HashMap<LockKey, BTreeMap<String, f64>> = HashMap::new();
    for s in inp.sleeps {
        let (site, via) = site_of(&s.frames, s.runtime, WAIT_WORDS);
        let (fns, fcount) = scale
            .get(&(s.key.tid, s.key.nr, s.key.lock))
            .copied()
            .unwrap_or((1.0, 1.0));
        let ns = s.tally.ns as f64 * fns;
        let count = s.tally.count as f64 * fcount;
        let name = syscall_name(s.key.nr);
        let a = sites.entry(site.clone()).or_default();
        *a.vias.entry(via).or_default() += ns;
        a.ns += ns;
        a.count += count;
        a.waiters.insert(s.key.tid);
        a.pids.insert(s.key.pid);
        *a.by_call.entry((s.key.tid, s.key.nr)).or_default() += ns;
        a.spans
            .extend(s.tally.spans.iter().map(|&(at, d)| (at, d as f64 * fns)));
        let obj = s.key.lock.as_ref().map(object);
        a.lock_waiters.entry(obj).or_default().insert(s.key.tid);
        if let Some(o) = obj
            && !a.held_objects.contains(&o)
            && kind_of_stack(&s.frames).is_some_and(LockKind::is_held)
        {
            a.held_objects.insert(o);
        }
        *a.syscalls.entry(name.clone()).or_default() += ns;
        if let Some(k) = s.key.lock {
            a.locks.insert(k);
            *a.by_lock.entry(k).or_default() += ns;
            *lock_sites
                .entry(k)
                .or_default()
                .entry(site.clone())
                .or_default() += ns;
        }
        let st = a.stacks.entry(s.frames.clone()).or_default();
        st.0 += ns;
        st.1 += s.tally.samples;
        match outcome(&name, s.key.ret) {
            Outcome::TimedOut => a.timed_out += count,
            Outcome::Interrupted => a.interrupted += count,
            Outcome::Woken => a.woken += count,
        }
        let Some(w) = s.key.waker else { continue };
        let comm = inp.comms.get(&w.tid).map_or("", String::as_str);
        let r = a.releases.entry(mechanism(&w, comm)).or_default();
        r.wakers.insert(w.tid);
        r.count += count;
        r.ns += ns;
        r.in_target |= w.tracked;
        if w.pid != s.key.pid {
            r.other_process_ns += ns;
        }
        if w.tracked && !w.kernel {
            *r.pairs.entry((w.tid, s.key.tid)).or_default() += count;
            *a.woken_by.entry((w.tid, obj)).or_default() += ns;
            *pair_sites
                .entry((w.tid, s.key.tid))
                .or_default()
                .entry(site.clone())
                .or_default() += count;
        }
        a.woken_ns += ns;
    }
    // Futile waits never sleep: they come from the lock samples, scaled to
    // each lock's exact count.
    let mut sampled_futile: HashMap<LockKey, u64> = HashMap::new();
    for l in inp.lock_waits {
        *sampled_futile.entry(l.key).or_default() += l.futile;
    }
    for l in inp.lock_waits.iter().filter(|l| l.futile > 0) {
        let (site, via) = site_of(&l.frames, l.runtime, WAIT_WORDS);
        let exact = inp.futile.get(&l.key).copied().unwrap_or(0) as f64;
        let f = exact / sampled_futile[&l.key].max(1) as f64;
        let a = sites.entry(site).or_default();
        // Futile calls weigh as one microsecond each in choosing the chain.
        *a.vias.entry(via).or_default() += l.futile as f64 * f * 1e3;
        a.futile += l.futile as f64 * f;
        a.locks.insert(l.key);
    }
    for a in sites.values_mut() {
        a.via = a
            .vias
            .iter()
            .max_by(|x, y| x.1.total_cmp(y.1).then(y.0.cmp(x.0)))
            .map(|(v, _)| v.clone())
            .unwrap_or_default();
    }
    let wall = inp.duration_ns.max(1) as f64;
    let usage = thread_times(inp, wall);
    let mut contended_calls: HashMap<(u32, u32), u64> = HashMap::new();
    let mut contended_sites = BTreeSet::new();
    let mut contended_spans = Vec::new();
    let mut out: Vec<(WaitSite, Vec<LockKey>)> = sites
        .into_iter()
        .map(|(function, mut a)| {
            let by_call = a.by_call.clone();
            let spans = std::mem::take(&mut a.spans);
            let mut keys: Vec<(LockKey, f64)> = a.by_lock.iter().map(|(k, v)| (*k, *v)).collect();
            keys.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
            let keys: Vec<LockKey> = keys.into_iter().map(|k| k.0).collect();
            let site = site_report(function, a, inp, &usage, &pair_sites, wall);
            if site.class == WaitClass::Contention {
                for (call, ns) in by_call {
                    *contended_calls.entry(call).or_default() += ns.round() as u64;
                }
                contended_sites.insert(site.function.clone());
                contended_spans.extend(spans);
            }
            (site, keys)
        })
        .collect();
    out.sort_by(|(a, _), (b, _)| {
        (b.class == WaitClass::Contention)
            .cmp(&(a.class == WaitClass::Contention))
            .then(b.wait_ns.cmp(&a.wait_ns))
            .then(b.futile.cmp(&a.futile))
            .then(a.function.cmp(&b.function))
    });
    let class_of: HashMap<&str, WaitClass> = out
        .iter()
        .map(|(s, _)| (s.function.as_str(), s.class))
        .collect();
    // A lock waited on at several sites is contention if contended sites
    // hold a fair share of its waiting (a GIL's mutex is taken inside the
    // condvar wait and around it); else it is what its main site is.
    let lock_class = lock_sites
        .into_iter()
        .filter_map(|(k, by)| {
            let total: f64 = by.values().sum();
            let contended: f64 = by
                .iter()
                .filter(|(site, _)| class_of.get(site.as_str()) == Some(&WaitClass::Contention))
                .map(|(_, ns)| ns)
                .sum();
            if total > 0.0 && contended / total >= MIN_CONTENDED_SHARE_OF_LOCK {
                return Some((k, WaitClass::Contention));
            }
            let top = by.iter().max_by(|a, b| a.1.total_cmp(b.1))?;
            Some((k, *class_of.get(top.0.as_str())?))
        })
        .collect();
    out.truncate(MAX_SITES);
    let (sites, site_locks) = out.into_iter().unzip();
    Waits {
        sites,
        site_locks,
        lock_class,
        contended_calls,
        contended_sites,
        contended_spans,
    }
}

/// Whether the site's waiters sleep on lock objects of their own: at least
/// two objects, each slept on by one thread only.
fn per_waiter_objects(a: &SiteAcc) -> bool {
    // Time asleep per object, and on the objects of one waiter only.
    let mut by_object: HashMap<LockObject, f64> = HashMap::new();
    for (k, ns) in &a.by_lock {
        *by_object.entry(object(k)).or_default() += ns;
    }
    let alone = |o: &LockObject| a.lock_waiters.get(&Some(*o)).is_some_and(|t| t.len() == 1);
    let total: f64 = by_object.values().sum();
    let own: f64 = by_object
        .iter()
        .filter(|(o, _)| alone(o))
        .map(|(_, ns)| ns)
        .sum();
    by_object.keys().filter(|o| alone(o)).count() >= 2
        && total > 0.0
        && own / total >= MIN_PER_WAITER_SHARE
}

/// Share of a site's time asleep on lock objects that spent on objects of
/// one waiter each, from which its waiters sleep on objects of their own.
/// Not all of it: CI saw a JVM's workers, parked each on its own parker,
/// also block a little at a safepoint on one word they all share.
const MIN_PER_WAITER_SHARE: f64 = 0.9;

/// Distinct wakers (among the waiters) per woken waiter, on average, above
/// which the waiters hand over to one another in no fixed order.
const MIN_WAKERS_PER_WAITER: f64 = 2.0;

/// Whether the waiters woke one another in no fixed order: each woken
/// waiter was woken by several of the others (a lock handed to whoever is
/// next), not by one fixed neighbour (a pipeline's stages).
fn mixed_wakes(a: &SiteAcc) -> bool {
    let mut wakers: HashMap<u32, BTreeSet<u32>> = HashMap::new();
    for r in a.releases.values() {
        for &(waker, woken) in r.pairs.keys() {
            if waker != woken && a.waiters.contains(&waker) && a.waiters.contains(&woken) {
                wakers.entry(woken).or_default().insert(waker);
            }
        }
    }
    a.waiters.len() >= 3
        && !wakers.is_empty()
        && wakers.values().map(|w| w.len() as f64).sum::<f64>() / wakers.len() as f64
            >= MIN_WAKERS_PER_WAITER
}

fn site_report(
    function: String,
    a: SiteAcc,
    inp: &Inputs<'_>,
    usage: &HashMap<u32, ThreadTime>,
    pair_sites: &HashMap<(u32, u32), BTreeMap<String, f64>>,
    wall: f64,
) -> WaitSite {
    // The waiters' CPU over the run.
    let mut busy = ThreadTime::default();
    for t in a.waiters.iter().filter_map(|tid| usage.get(tid)) {
        busy.cpu_ns += t.cpu_ns;
        busy.runqueue_ns += t.runqueue_ns;
        busy.seen_ns += t.seen_ns;
    }
    let waiter_cpu_share = busy.cpu_ns / (wall * a.waiters.len().max(1) as f64);
    // ... and what they do between waits here: run, or want to (a lock's
    // waiters have work in hand; the followers of an idle pool's leader
    // spend the time between in the leader's wait for work).
    let between_ns = busy.seen_ns - a.ns;
    let busy_between = if between_ns > 0.0 {
        ((busy.cpu_ns + busy.runqueue_ns) / between_ns).min(1.0)
    } else {
        0.0
    };
    // Turns: the waker slept here itself, on the same lock object (a
    // pipeline's stages may wait in one function for different conditions
    // and wake each other without contending), or it released a mutex the
    // sleeper waited to take (a holder that never had to wait: in a short
    // run, one of four threads on a mutex may never sleep on it, and it
    // ended half the waiting).
    // Where each waiter sleeps on an object of its own (a per-thread parker
    // or semaphore), the object cannot tell a lock from a pipeline: there
    // the wakes among the waiters decide: a lock's holder wakes whichever
    // waiter is next, so waiters are woken by several of the others.
    let shuffled = per_waiter_objects(&a) && mixed_wakes(&a);
    let turns_ns: f64 = a
        .woken_by
        .iter()
        .filter(|((w, obj), _)| {
            a.lock_waiters.get(obj).is_some_and(|t| t.contains(w))
                || (shuffled && a.waiters.contains(w))
                || obj.is_some_and(|o| a.held_objects.contains(&o))
        })
        .map(|(_, ns)| ns)
        .sum();
    let turns_share = if a.woken_ns > 0.0 {
        turns_ns / a.woken_ns
    } else {
        0.0
    };
    let busy = Busy {
        run_share: waiter_cpu_share,
        between_share: busy_between,
    };
    let (class, evidence) = classify(&a, busy, turns_share, wall);
    let mut releases: Vec<Release> = a
        .releases
        .into_iter()
        .map(|(mechanism, r)| {
            let from_waiters = r.in_target && r.mostly_wait_here(&a.waiters);
            let stacks = release_stacks(&r, &function, inp, pair_sites);
            let site = stacks
                .first()
                .map(|s| site_of(&s.frames, 0, WAKE_WORDS).0)
                .filter(|s| !s.is_empty());
            Release {
                mechanism,
                site,
                from_waiters,
                in_target: r.in_target,
                wakers: r.wakers.len() as u32,
                count: r.count.round() as u64,
                wait_ns: r.ns.round() as u64,
                stacks,
            }
        })
        .collect();
    releases.sort_by(|a, b| {
        b.wait_ns
            .cmp(&a.wait_ns)
            .then(a.mechanism.cmp(&b.mechanism))
    });
    let stacks: Vec<TimedStack> = top_stacks(a.stacks)
        .into_iter()
        .map(|(frames, ns, samples)| TimedStack {
            frames,
            ns,
            samples,
            estimated: true,
        })
        .collect();
    WaitSite {
        function,
        via: a.via,
        class,
        evidence,
        waits: a.count.round() as u64,
        futile: a.futile.round() as u64,
        timed_out: a.timed_out.round() as u64,
        woken: a.woken.round() as u64,
        interrupted: a.interrupted.round() as u64,
        wait_ns: a.ns.round() as u64,
        waiting_threads: a.ns / wall,
        waiters: a.waiters.len() as u32,
        waiter_tids: a.waiters.iter().copied().collect(),
        locks: vec![],
        processes: a.pids.len() as u32,
        waiter_cpu_share,
        waiter_between_busy_share: busy_between,
        syscalls: a
            .syscalls
            .into_iter()
            .map(|(k, v)| (k, v.round() as u64))
            .collect(),
        lock_words: a.locks.len() as u32,
        turns_share,
        releases,
        stacks,
        estimated: true,
    }
}

/// The wakers' stacks that ended this site's sleeps: each (waker, woken)
/// pair's sampled stacks, in the share of that pair's sleeps that were here.
fn release_stacks(
    r: &ReleaseAcc,
    site: &str,
    inp: &Inputs<'_>,
    pair_sites: &HashMap<(u32, u32), BTreeMap<String, f64>>,
) -> Vec<CountedStack> {
    let mut by: BTreeMap<Vec<String>, (f64, u64)> = BTreeMap::new();
    for w in inp.wakes {
        let pair = (w.waker_tid, w.woken_tid);
        if !r.pairs.contains_key(&pair) {
            continue;
        }
        let Some(all) = pair_sites.get(&pair) else {
            continue;
        };
        let total: f64 = all.values().sum();
        let here = all.get(site).copied().unwrap_or(0.0);
        if total <= 0.0 || here <= 0.0 {
            continue;
        }
        let own: Vec<String> = w.frames.iter().skip(w.runtime).cloned().collect();
        let frames = if own.is_empty() {
            w.frames.clone()
        } else {
            own
        };
        let e = by.entry(frames).or_default();
        e.0 += w.weight as f64 * here / total;
        e.1 += 1;
    }
    top_stacks(by)
        .into_iter()
        .map(|(frames, count, samples)| CountedStack {
            frames,
            count,
            samples,
            estimated: true,
        })
        .collect()
}

/// Stacks with the (time or count) they stand for and their samples: the
/// MAX_STACKS weightiest, rounded, most first.
fn top_stacks(by: BTreeMap<Vec<String>, (f64, u64)>) -> Vec<(Vec<String>, u64, u64)> {
    let mut out: Vec<(Vec<String>, u64, u64)> = by
        .into_iter()
        .map(|(frames, (value, samples))| (frames, value.round() as u64, samples))
        .collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out.truncate(MAX_STACKS);
    out
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// The class of a site and the evidence that decided it, in the order the
/// tests run: the first that holds wins.
fn classify(a: &SiteAcc, b: Busy, turns: f64, wall: f64) -> (WaitClass, Vec<String>) {
    let waits = a.count.max(1.0);
    let waiters = a.waiters.len().max(1) as f64;
    let per_waiter = a.count / waiters;
    let busy = b.run_share;
    let busy_ev = format!("the waiters run {} of the run", pct(busy));
    let all_sleep = a
        .syscalls
        .keys()
        .all(|s| matches!(s.as_str(), "nanosleep" | "clock_nanosleep" | "pause"));
    if all_sleep && !a.syscalls.is_empty() && a.futile == 0.0 {
        return (
            WaitClass::Timer,
            vec!["the threads sleep here on purpose (nanosleep, pause)".into()],
        );
    }
    let futile_share = a.futile / (a.futile + a.count).max(1.0);
    let futile_rate = a.futile * 1e9 / wall;
    if futile_share >= MIN_FUTILE_SHARE && futile_rate >= MIN_FUTILE_PER_S {
        return (
            WaitClass::Contention,
            vec![format!(
                "{} of the waits returned at once ({:.0}/s): the lock word changed under them, \
                 so several threads were taking it",
                pct(futile_share),
                futile_rate
            )],
        );
    }
    // Turns with work in hand: a lock's holder may wait for something else
    // while it holds the lock (a peer's reply inside a transaction), so
    // its waiters can run little of the run and still be queued for it;
    // what they do between their waits here tells.
    if turns >= MIN_TURNS_SHARE
        && (busy >= MIN_BUSY_SHARE || b.between_share >= MIN_BUSY_BETWEEN_SHARE)
        && a.waiters.len() >= 2
    {
        return (
            WaitClass::Contention,
            vec![
                format!(
                    "{} of the woken waiting was ended by threads that wait here too: they take turns",
                    pct(turns)
                ),
                format!(
                    "the waiters run {} of the run, and run or wait for a CPU {} of their time between waits here",
                    pct(busy),
                    pct(b.between_share)
                ),
            ],
        );
    }
    let timeout_share = a.timed_out / waits;
    if timeout_share >= MIN_TIMEOUT_SHARE
        && busy >= MIN_BUSY_SHARE
        && per_waiter > MAX_PARKED_WAITS
        && a.waiters.len() >= 2
    {
        return (
            WaitClass::Contention,
            vec![
                format!(
                    "{} of the waits time out and the threads wait again ({:.0} waits each)",
                    pct(timeout_share),
                    per_waiter
                ),
                busy_ev,
            ],
        );
    }
    if per_waiter <= MAX_PARKED_WAITS && a.ns / (wall * waiters) >= MIN_PARKED_SHARE {
        return (
            WaitClass::StartupTeardown,
            vec![format!(
                "each thread waited here {:.1} times, {} of the run: parked until the start or the end",
                per_waiter,
                pct(a.ns / (wall * waiters))
            )],
        );
    }
    // Who ended the rest: other processes and the kernel are I/O and peers;
    // threads of the target that did not take turns here hand out work.
    let mut by_exit = 0.0;
    let mut outside = 0.0;
    let mut in_target = 0.0;
    for (mechanism, r) in &a.releases {
        if mechanism == "exit" {
            // A thread's exit ends a join; a child process's, a parent's wait.
            by_exit += r.ns - r.other_process_ns;
            outside += r.other_process_ns;
        } else if !r.in_target {
            outside += r.ns;
        } else {
            in_target += r.ns;
        }
    }
    let woken = a.woken_ns;
    let producer = (in_target - turns * woken).max(0.0);
    let share = |ns: f64| if woken > 0.0 { ns / woken } else { 0.0 };
    let io_syscall = a.syscalls.keys().any(|s| {
        !matches!(
            s.as_str(),
            "futex" | "futex_waitv" | "semop" | "semtimedop" | "nanosleep" | "clock_nanosleep"
        )
    });
    if share(by_exit) >= MIN_RELEASE_SHARE {
        return (
            WaitClass::StartupTeardown,
            vec!["most waits here ended when a thread exited (joins)".into()],
        );
    }
    if share(outside) >= MIN_RELEASE_SHARE {
        return (
            WaitClass::IoOrPeer,
            vec![format!(
                "{} of the woken waiting was ended by other processes or the kernel (I/O, clients, children, timers)",
                pct(share(outside))
            )],
        );
    }
    if share(producer) >= MIN_RELEASE_SHARE {
        return (
            WaitClass::WaitingForWork,
            vec![
                format!(
                    "{} of the woken waiting was ended by threads that do not take turns here: they hand out work",
                    pct(share(producer))
                ),
                busy_ev,
            ],
        );
    }
    if io_syscall && woken == 0.0 {
        return (
            WaitClass::IoOrPeer,
            vec!["the waits are in I/O calls and nothing in the target ended them".into()],
        );
    }
    if busy < MIN_BUSY_SHARE {
        return (
            WaitClass::WaitingForWork,
            vec![format!("{busy_ev}: they idle")],
        );
    }
    (
        WaitClass::WaitingForWork,
        vec![
            "no sign of contention: no futile waits, no turns taken, no timed-out retries".into(),
            busy_ev,
        ],
    )
}

impl ReleaseAcc {
    /// Whether wakers that wait at the site themselves ended most of these
    /// sleeps (MIN_RELEASE_SHARE of them): one stray wake-up from a thread
    /// starting up (CI, a JVM's: 1 of 28,077) does not make a lock's
    /// hand-overs someone else's.
    fn mostly_wait_here(&self, waiters: &BTreeSet<u32>) -> bool {
        let total: f64 = self.pairs.values().sum();
        let here: f64 = self
            .pairs
            .iter()
            .filter(|((waker, _), _)| waiters.contains(waker))
            .map(|(_, n)| n)
            .sum();
        total > 0.0 && here / total >= MIN_RELEASE_SHARE
    }
}

/// A site's name as people read it: its short function, and the wrapper it
/// calls to wait (`LRUCacheShard::Lookup via port::Mutex::Lock`, `ProcSleep
/// via WaitLatch`).
pub fn display(site: &WaitSite) -> String {
    let f = short_function(&site.function);
    match site.via.last() {
        Some(v) => format!("{f} via {}", short_function(v)),
        None => f,
    }
}

#[cfg(test)]
mod tests;
