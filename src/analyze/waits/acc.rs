//! Sampled sleeps gathered by wait site: time, sleeps, outcomes, waiters,
//! lock objects, wrapper chains, priors, and who ended each sleep, scaled
//! to the kernel's exact off-CPU counters so that a site's waiting agrees
//! with the locks' and threads' own totals.
//!
//! Why the residual: samples are taken per CPU by time, so a thread that
//! slept little may have no sample at all on its (syscall, lock); with 100
//! processes queued on one lock, most of them. Their exact time goes to the
//! sites where others were seen waiting on the same (syscall, lock), in
//! proportion, and they count as waiters there.

use crate::fixed_hash::HashMap;
use crate::frame::Frame;
use std::collections::{BTreeMap, BTreeSet};

use super::prior::{WaitPrior, prior_of};
use super::site::{WAIT_WORDS, site_of};
use super::{Inputs, mechanism};
use crate::analyze::locks::classify::{LockKind, kind_of_stack};
use crate::model::{LockKey, OffReason};
use crate::names::syscall_name;

/// A pthread object a futex word belongs to, near enough: its process and
/// its address to 32 bytes (an 8-byte aligned condvar's two wait words,
/// at +0x28 and +0x2c, never straddle such a boundary).
pub type LockObject = (u32, u64);

pub fn object(key: &LockKey) -> LockObject {
    match *key {
        LockKey::Private { pid, addr } => (pid, addr & !0x1f),
        LockKey::Shared { ino, offset, .. } => (ino as u32, offset & !0x1f),
        LockKey::SysV { semid, semnum } => (semid, u64::from(semnum)),
    }
}

/// How a sleep ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Woken,
    TimedOut,
    Interrupted,
}

pub fn outcome(syscall: &str, ret: i32) -> Outcome {
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

pub fn thread_times(inp: &Inputs<'_>, wall: f64) -> HashMap<u32, ThreadTime> {
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
pub struct ReleaseAcc {
    pub wakers: BTreeSet<u32>,
    pub count: f64,
    pub ns: f64,
    pub in_target: bool,
    /// Of `ns`: ended by a thread of another process.
    pub other_process_ns: f64,
    /// (waker tid, woken tid) -> sleeps of this site it ended.
    pub pairs: HashMap<(u32, u32), f64>,
}

/// A sampled sleep of a site that a thread of the target ended.
#[derive(Clone, Debug)]
pub struct WokenSleep {
    /// Its index in `Inputs::sleeps`.
    pub sample: usize,
    pub waker: u32,
    pub woken: u32,
    pub ns: f64,
    pub object: Option<LockObject>,
    pub prior: WaitPrior,
    /// At most what the waker had run since its own last sleep (None: not
    /// known).
    pub waker_ran_ns: Option<u64>,
}

#[derive(Default)]
pub struct SiteAcc {
    /// Other names the same site went by (a method a JIT inlined into its
    /// caller waits under the caller's name too).
    pub aliases: Vec<String>,
    /// The wrappers of the heaviest stack (see `vias`).
    pub via: Vec<String>,
    /// Time by wrapper chain: a site waits through the chain most of its
    /// time went through.
    pub vias: BTreeMap<Vec<String>, f64>,
    pub ns: f64,
    pub count: f64,
    pub timed_out: f64,
    pub woken: f64,
    pub interrupted: f64,
    pub futile: f64,
    pub waiters: BTreeSet<u32>,
    pub pids: BTreeSet<u32>,
    pub syscalls: BTreeMap<String, f64>,
    pub locks: BTreeSet<LockKey>,
    pub stacks: BTreeMap<Vec<Frame>, (f64, u64)>,
    /// mechanism -> what ended these sleeps.
    pub releases: BTreeMap<String, ReleaseAcc>,
    /// The sleeps threads of the target ended.
    pub woken_sleeps: Vec<WokenSleep>,
    /// Sleep ended by threads outside the target or of another of its
    /// processes, per (waker pid, waker tid, woken tid): the peers a wait
    /// is on.
    pub outside_ends: BTreeMap<(u32, u32, u32), f64>,
    /// Threads that slept here on each lock object.
    pub lock_waiters: HashMap<Option<LockObject>, BTreeSet<u32>>,
    /// Lock objects slept on inside a mutex or rwlock's lock call: whoever
    /// wakes a sleeper there is releasing it, so has held it.
    pub held_objects: BTreeSet<LockObject>,
    /// Sleep ended by anyone known (woken), and by threads of the target.
    pub woken_ns: f64,
    /// Time asleep here per (thread, syscall).
    pub by_call: HashMap<(u32, u32), f64>,
    /// Time asleep here per thread.
    pub by_thread: BTreeMap<u32, f64>,
    /// Time asleep per lock word.
    pub by_lock: HashMap<LockKey, f64>,
    /// Time asleep per (syscall, lock): where unsampled threads' waits go.
    pub by_nr_lock: HashMap<(u32, Option<LockKey>), f64>,
    /// Time by what the runtime's frames say the wait is.
    pub priors: BTreeMap<WaitPrior, f64>,
    /// The sleep its samples stand for in time, scaled: (cell start,
    /// CLOCK_MONOTONIC ns; cell width; sleep) (`crate::spans`).
    pub spans: Vec<(u64, u64, f64)>,
}

impl SiteAcc {
    /// The prior most of its time has.
    pub fn prior(&self) -> WaitPrior {
        self.priors
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0)))
            .map_or(WaitPrior::Unknown, |(p, _)| *p)
    }

    /// Takes in another site's sleeps: the same wait under another name.
    pub fn absorb(&mut self, name: String, o: SiteAcc) {
        self.aliases.push(name);
        self.aliases.extend(o.aliases);
        for (k, v) in o.vias {
            *self.vias.entry(k).or_default() += v;
        }
        self.ns += o.ns;
        self.count += o.count;
        self.timed_out += o.timed_out;
        self.woken += o.woken;
        self.interrupted += o.interrupted;
        self.futile += o.futile;
        self.waiters.extend(o.waiters);
        self.pids.extend(o.pids);
        for (k, v) in o.syscalls {
            *self.syscalls.entry(k).or_default() += v;
        }
        self.locks.extend(o.locks);
        for (k, v) in o.stacks {
            let e = self.stacks.entry(k).or_default();
            e.0 += v.0;
            e.1 += v.1;
        }
        for (k, r) in o.releases {
            let e = self.releases.entry(k).or_default();
            e.wakers.extend(r.wakers);
            e.count += r.count;
            e.ns += r.ns;
            e.in_target |= r.in_target;
            e.other_process_ns += r.other_process_ns;
            for (p, n) in r.pairs {
                *e.pairs.entry(p).or_default() += n;
            }
        }
        self.woken_sleeps.extend(o.woken_sleeps);
        for (k, v) in o.outside_ends {
            *self.outside_ends.entry(k).or_default() += v;
        }
        for (k, v) in o.lock_waiters {
            self.lock_waiters.entry(k).or_default().extend(v);
        }
        self.held_objects.extend(o.held_objects);
        self.woken_ns += o.woken_ns;
        for (k, v) in o.by_call {
            *self.by_call.entry(k).or_default() += v;
        }
        for (k, v) in o.by_thread {
            *self.by_thread.entry(k).or_default() += v;
        }
        for (k, v) in o.by_lock {
            *self.by_lock.entry(k).or_default() += v;
        }
        for (k, v) in o.by_nr_lock {
            *self.by_nr_lock.entry(k).or_default() += v;
        }
        for (k, v) in o.priors {
            *self.priors.entry(k).or_default() += v;
        }
        self.spans.extend(o.spans);
    }
}

type CallKey = (u32, u32, Option<LockKey>);

/// Per (tid, nr, lock): exact (ns, count) over sampled (ns, count).
fn scales(inp: &Inputs<'_>) -> HashMap<CallKey, (f64, f64)> {
    let exact = exact_sleeps(inp);
    let mut sampled: HashMap<CallKey, (u64, u64)> = HashMap::default();
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
            let (ens, en, _) = exact.get(&k).copied().unwrap_or((ns, n, 0));
            let f = |e: u64, s: u64| if s == 0 { 1.0 } else { e as f64 / s as f64 };
            (k, (f(ens, ns), f(en, n)))
        })
        .collect()
}

/// Per (tid, nr, lock): the exact sleep (ns, count) and the thread's pid.
fn exact_sleeps(inp: &Inputs<'_>) -> HashMap<CallKey, (u64, u64, u32)> {
    let mut exact: HashMap<CallKey, (u64, u64, u32)> = HashMap::default();
    for c in inp.offcpu {
        if let OffReason::Syscall { nr, lock } = c.reason {
            let e = exact.entry((c.tid, nr, lock)).or_default();
            e.0 += c.ns;
            e.1 += c.count;
            e.2 = c.pid;
        }
    }
    exact
}

/// Where each (tid, waker tid) pair's sleeps were, for the wake stacks.
pub type PairSites = HashMap<(u32, u32), BTreeMap<String, f64>>;

/// A sampled sleep placed in its thread's call tree: its site, its stack
/// and the site's frame on it (None: the stack was cut short), and the
/// sleep it stands for.
#[derive(Clone, Debug)]
pub struct Placed {
    pub site: String,
    pub tid: u32,
    /// Its index in `Inputs::sleeps`, and the site's frame on its stack.
    pub sample: usize,
    pub at: Option<usize>,
    /// Frames between the site's frame and its thread's entry function (the
    /// outermost frame past the C library's and C++ runtime's thread start;
    /// None: cut short, or a VM's thread, whose entry is the VM's).
    pub from_entry: Option<usize>,
    pub ns: f64,
    /// Samples it stands for.
    pub samples: u64,
}

/// Frames between frame `at` and the thread's entry function on `frames`
/// (innermost first), if the stack is whole and not a VM's.
fn from_entry(frames: &[Frame], at: usize, truncated: bool) -> Option<usize> {
    if truncated || frames.iter().any(|f| f.jit_kind().is_some()) {
        return None;
    }
    // The C library's and C++ runtime's frames (named, or unnamed in a
    // stripped libstdc++: `libstdc++.so.6.0.30+0xd44a2`) start threads.
    let runtime = |f: &str| {
        let (name, location, _) = crate::frame::split(f);
        let module = name
            .rsplit_once("+0x")
            .map_or(location.unwrap_or(""), |(m, _)| m);
        crate::frame::is_runtime_library(module)
    };
    let entry = frames.iter().rposition(|f| {
        let name = f.function();
        !crate::runtime::all_of(|r| r.thread_entries).any(|e| *e == name)
            && !crate::runtime::all_of(|r| r.thread_entry_parts).any(|p| f.contains(p))
            && !runtime(f)
    })?;
    entry.checked_sub(at)
}

pub struct Gathered {
    pub sites: BTreeMap<String, SiteAcc>,
    /// Every sampled sleep, placed.
    pub placed: Vec<Placed>,
    pub pair_sites: PairSites,
    /// Per lock word, its sleeping by site.
    pub lock_sites: HashMap<LockKey, BTreeMap<String, f64>>,
}

/// The sampled sleeps and futile waits gathered by site, scaled.
pub fn gather(inp: &Inputs<'_>) -> Gathered {
    let scale = scales(inp);
    let mut sites: BTreeMap<String, SiteAcc> = BTreeMap::new();
    let mut pair_sites: PairSites = HashMap::default();
    let mut lock_sites: HashMap<LockKey, BTreeMap<String, f64>> = HashMap::default();
    let mut placed = vec![];
    for (i, s) in inp.sleeps.iter().enumerate() {
        let (site, via) = site_of(&s.frames, s.runtime, WAIT_WORDS);
        let (fns, fcount) = scale
            .get(&(s.key.tid, s.key.nr, s.key.lock))
            .copied()
            .unwrap_or((1.0, 1.0));
        let ns = s.tally.ns as f64 * fns;
        // The site's frame, or else the first of the program's own.
        let at = s
            .frames
            .iter()
            .skip(s.runtime)
            .position(|f| f.function() == site)
            .map_or(s.runtime, |p| p + s.runtime);
        placed.push(Placed {
            site: site.clone(),
            tid: s.key.tid,
            sample: i,
            at: (!s.truncated && at < s.frames.len()).then_some(at),
            from_entry: from_entry(&s.frames, at, s.truncated),
            ns,
            samples: s.tally.samples,
        });
        let count = s.tally.count as f64 * fcount;
        let name = syscall_name(s.key.nr);
        let prior = prior_of(&name, &s.frames, &site);
        let a = sites.entry(site.clone()).or_default();
        *a.vias.entry(via).or_default() += ns;
        *a.priors.entry(prior).or_default() += ns;
        a.ns += ns;
        a.count += count;
        a.waiters.insert(s.key.tid);
        a.pids.insert(s.key.pid);
        *a.by_call.entry((s.key.tid, s.key.nr)).or_default() += ns;
        *a.by_thread.entry(s.key.tid).or_default() += ns;
        *a.by_nr_lock.entry((s.key.nr, s.key.lock)).or_default() += ns;
        a.spans.extend(
            s.tally
                .spans
                .iter()
                .map(|(at, width, d)| (at, width, d as f64 * fns)),
        );
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
        if !w.kernel && (!w.tracked || w.pid != s.key.pid) {
            *a.outside_ends.entry((w.pid, w.tid, s.key.tid)).or_default() += ns;
        }
        if w.tracked && !w.kernel {
            *r.pairs.entry((w.tid, s.key.tid)).or_default() += count;
            a.woken_sleeps.push(WokenSleep {
                sample: i,
                waker: w.tid,
                woken: s.key.tid,
                ns,
                object: obj,
                prior,
                waker_ran_ns: w.ran_at_most_ns(),
            });
            *pair_sites
                .entry((w.tid, s.key.tid))
                .or_default()
                .entry(site.clone())
                .or_default() += count;
        }
        a.woken_ns += ns;
    }
    add_unsampled(inp, &mut sites);
    add_futile(inp, &mut sites);
    for a in sites.values_mut() {
        a.via = a
            .vias
            .iter()
            .max_by(|x, y| x.1.total_cmp(y.1).then(y.0.cmp(x.0)))
            .map(|(v, _)| v.clone())
            .unwrap_or_default();
    }
    Gathered {
        sites,
        placed,
        pair_sites,
        lock_sites,
    }
}

/// The share of a site's time on one (syscall, lock) from which a thread
/// never sampled on that word is counted as waiting there: a word says
/// where a thread waits only where it is what the site waits on (a VM's
/// heap lock or safepoint word is met briefly at any site).
pub const MIN_UNSAMPLED_WORD_SHARE: f64 = 0.5;

/// Threads whose sleeps on a (syscall, lock) were never sampled: their
/// exact time goes to the sites others were seen waiting at on the same
/// (syscall, lock), in proportion, where that word is most of the site's
/// waiting (MIN_UNSAMPLED_WORD_SHARE).
fn add_unsampled(inp: &Inputs<'_>, sites: &mut BTreeMap<String, SiteAcc>) {
    let sampled: BTreeSet<CallKey> = inp
        .sleeps
        .iter()
        .map(|s| (s.key.tid, s.key.nr, s.key.lock))
        .collect();
    // (syscall, lock) -> (tid, pid, ns, count) of the threads never sampled.
    type Unsampled = Vec<(u32, u32, u64, u64)>;
    let mut by_key: BTreeMap<(u32, Option<LockKey>), Unsampled> = BTreeMap::new();
    for ((tid, nr, lock), (ns, count, pid)) in exact_sleeps(inp) {
        // Only lock waits: a shared word says the wait is the same one.
        if lock.is_some() && !sampled.contains(&(tid, nr, lock)) && ns > 0 {
            by_key
                .entry((nr, lock))
                .or_default()
                .push((tid, pid, ns, count));
        }
    }
    let mains = |a: &SiteAcc, key: &(u32, Option<LockKey>)| {
        a.by_nr_lock
            .get(key)
            .copied()
            .filter(|here| *here >= MIN_UNSAMPLED_WORD_SHARE * a.ns && *here > 0.0)
    };
    for (key, threads) in by_key {
        let total: f64 = sites.values().filter_map(|a| mains(a, &key)).sum();
        if total <= 0.0 {
            continue;
        }
        let name = syscall_name(key.0);
        for a in sites.values_mut() {
            let Some(here) = mains(a, &key) else {
                continue;
            };
            let share = here / total;
            for &(tid, pid, ns, count) in &threads {
                let ns = ns as f64 * share;
                a.ns += ns;
                a.count += count as f64 * share;
                a.waiters.insert(tid);
                a.pids.insert(pid);
                *a.by_call.entry((tid, key.0)).or_default() += ns;
                *a.by_thread.entry(tid).or_default() += ns;
                *a.syscalls.entry(name.clone()).or_default() += ns;
                if let Some(k) = key.1 {
                    *a.by_lock.entry(k).or_default() += ns;
                }
            }
        }
    }
}

/// Futile waits never sleep: they come from the lock samples, scaled to
/// each lock's exact count.
fn add_futile(inp: &Inputs<'_>, sites: &mut BTreeMap<String, SiteAcc>) {
    let mut sampled_futile: HashMap<LockKey, u64> = HashMap::default();
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
}
