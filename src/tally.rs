//! Unwound samples summed by what they stand for, as they arrive: syscall
//! call sites (weighted by calls), lock stacks (by operations and time),
//! off-CPU stacks (by time asleep) and waker stacks (by wake-ups).
//! Stacks stay unsymbolized here; names come once profiling ends.
//!
//! Each distinct stack is kept once (`Stacks`) and the tallies hold its
//! number (issue 21): a stack was cloned into every tally it counted in,
//! and into one key per thread and kernel stack of the on-CPU samples,
//! which is how a long attach grew.

use crate::fixed_hash::HashMap;
use std::collections::BTreeSet;
use std::sync::Arc;

use crate::collect::events::CpuSample;
use crate::model::{FrameLoc, LockKey, UnwoundStack, Waker};
use crate::stacks::unwind::Unwound;

/// Distinct paths kept per syscall: a storm names a few files; a program
/// walking a tree names thousands, which are not all kept.
pub const MAX_PATHS: usize = 64;
/// Where the calls of paths pushed out are counted.
pub const OTHER_PATHS: &str = "(other paths)";

/// Counts `weight` calls on `path`, keeping at most MAX_PATHS paths (and
/// OTHER_PATHS): a new path once full takes the place of the least called
/// (space-saving counting), whose calls go to OTHER_PATHS, so the paths a
/// storm names stay whatever came before them (the loader probes dozens of
/// library directories first).
fn count_path(paths: &mut HashMap<String, u64>, path: &str, weight: u64) {
    if let Some(n) = paths.get_mut(path) {
        *n += weight;
        return;
    }
    let named = paths.len() - usize::from(paths.contains_key(OTHER_PATHS));
    if named >= MAX_PATHS
        && let Some((least, n)) = paths
            .iter()
            .filter(|(p, _)| p.as_str() != OTHER_PATHS)
            .min_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(b.0)))
            .map(|(p, n)| (p.clone(), *n))
    {
        paths.remove(&least);
        *paths.entry(OTHER_PATHS.to_string()).or_default() += n;
    }
    paths.insert(path.to_string(), weight);
}

/// On-CPU keys kept (thread x what the sample saw x user stack): what a
/// 32,768-bucket table holds (hashbrown fills 7/8 of it). A server meets
/// new keys for as long as it is profiled — its rare paths, a sample or two
/// each: memcached's grew by ~20 a second for the 25 minutes measured, and
/// the table by doublings (issue 21). Past it the keys with fewest samples
/// give way (`SampleTally::make_cpu_room`); their samples are still
/// counted, without their stacks (`CpuUnkept`, `loss.cpu_stacks_unkept`).
pub const MAX_CPU_KEYS: usize = 28_672;

/// On-CPU samples whose keys gave way past MAX_CPU_KEYS: counted in the
/// user/kernel split, their stacks not kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CpuUnkept {
    pub user: u64,
    pub kernel: u64,
}

/// A lock's sampled operations from one stack.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct LockTally {
    pub weight: u64,
    /// Sum of weight x time inside the call.
    pub weighted_ns: u128,
    pub samples: u64,
    pub pids: BTreeSet<u32>,
    /// Of `weight`: waits that failed at once (EAGAIN).
    pub futile: u64,
}

/// One sampled sleep's circumstances: who slept, in which call and wait,
/// how the call ended and who ended the sleep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SleepKey {
    pub pid: u32,
    pub tid: u32,
    pub nr: u32,
    pub lock: Option<LockKey>,
    /// The call's return value, positive ones as 1 (a count of bytes or
    /// ready fds says only that something came).
    pub ret: i32,
    pub waker: Option<Waker>,
}

/// Sleep a sample stood for: time, sleeps, samples, and when.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SleepTally {
    pub ns: u64,
    pub count: u64,
    pub samples: u64,
    /// The sleep the samples stood for in time (when each call returned,
    /// CLOCK_MONOTONIC), for the timeline of contended waiting: bounded
    /// however long the run (`spans`).
    pub spans: crate::spans::SpanCells,
}

/// Poll-family calls from one stack: weights, and weight x fds passed and
/// weight x fds ready.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PollTally {
    pub weight: u64,
    pub weighted_fds: u128,
    pub weighted_ready: u128,
    pub samples: u64,
}

/// Where a thread slept: process, thread, syscall, lock waited on.
pub type OffCpuKey = (u32, u32, u32, Option<LockKey>);

/// A distinct stack's number in `Stacks`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct StackId(u32);

/// Every distinct stack seen, once each, numbered in order of arrival.
#[derive(Default)]
pub struct Stacks {
    ids: HashMap<Arc<UnwoundStack>, StackId>,
    all: Vec<Arc<UnwoundStack>>,
}

impl Stacks {
    /// The number of `stack`, kept if it is new.
    pub fn intern(&mut self, stack: UnwoundStack) -> StackId {
        if let Some(id) = self.ids.get(&stack) {
            return *id;
        }
        let id = StackId(self.all.len() as u32);
        let stack = Arc::new(stack);
        self.all.push(stack.clone());
        self.ids.insert(stack, id);
        id
    }

    pub fn get(&self, id: StackId) -> &UnwoundStack {
        &self.all[id.0 as usize]
    }

    pub fn len(&self) -> usize {
        self.all.len()
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }
}

#[derive(Default)]
pub struct SampleTally {
    /// The stacks the keys below number.
    pub stacks: Stacks,
    /// (syscall, stack) -> (calls stood for, samples).
    pub sites: HashMap<(u32, StackId), (u64, u64)>,
    /// (lock, a wait?, stack).
    pub locks: HashMap<(LockKey, bool, StackId), LockTally>,
    /// (where, stack) -> (sleep stood for, samples).
    pub offcpu: HashMap<(OffCpuKey, StackId), (u64, u64)>,
    /// The same sleeps with their outcome and waker, for the wait sites.
    pub sleeps: HashMap<(SleepKey, StackId), SleepTally>,
    /// (waker tid, woken tid, what the waker had run since its own last
    /// sleep as `Waker::ran_log2`, stack) -> (wake-ups stood for, samples).
    pub wakes: HashMap<(u32, u32, u8, StackId), (u64, u64)>,
    /// (pid, syscall, stack) -> poll-family calls stood for.
    pub polls: HashMap<(u32, u32, StackId), PollTally>,
    /// (tid, what the CPU sample saw, user stack) -> samples; at most
    /// MAX_CPU_KEYS.
    pub cpu: HashMap<(u32, CpuSample, StackId), u64>,
    /// Samples of the on-CPU keys that gave way.
    pub cpu_unkept: CpuUnkept,
    /// Per file syscall, the paths its sampled calls named, with the calls
    /// they stand for (at most MAX_PATHS apiece; the rest under OTHER_PATHS).
    pub paths: HashMap<u32, HashMap<String, u64>>,
    /// The machine code around on-CPU samples' instructions, by where the
    /// instruction is (one copy each): from its address minus
    /// `frame::code::CODE_BEFORE`.
    pub code: HashMap<FrameLoc, Vec<u8>>,
    pub count: u64,
    /// When the run started (CLOCK_MONOTONIC ns): where sleeps' cells in
    /// time begin.
    pub start_mono_ns: u64,
}

impl SampleTally {
    pub fn add(&mut self, unwound: Vec<Unwound>) {
        for Unwound { sample: s, stack } in unwound {
            self.count += 1;
            let leaf = stack.frames.first().cloned();
            let stack = self.stacks.intern(stack);
            if let Some(lock) = s.lock {
                let e = self
                    .locks
                    .entry((lock.key, lock.op.is_wait(), stack))
                    .or_default();
                e.weight += s.weight;
                e.weighted_ns += s.weight as u128 * lock.wait_ns as u128;
                e.samples += 1;
                e.pids.insert(s.pid);
                if lock.op.is_wait() && lock.ret == -libc::EAGAIN {
                    e.futile += s.weight;
                }
            }
            if s.off_ns > 0 {
                let key = (s.pid, s.tid, s.nr, s.lock_key);
                let e = self.offcpu.entry((key, stack)).or_default();
                e.0 += s.off_ns;
                e.1 += 1;
                let key = SleepKey {
                    pid: s.pid,
                    tid: s.tid,
                    nr: s.nr,
                    lock: s.lock_key,
                    ret: s.ret.min(1),
                    waker: s.waker,
                };
                let start = self.start_mono_ns;
                let e = self
                    .sleeps
                    .entry((key, stack))
                    .or_insert_with(|| SleepTally {
                        spans: crate::spans::SpanCells::from(start),
                        ..Default::default()
                    });
                e.ns += s.off_ns;
                e.count += s.off_count.max(1);
                e.samples += 1;
                e.spans.add(s.at_ns, s.off_ns);
            }
            if let Some((_, woken_tid, ran_log2)) = s.woken {
                let e = self
                    .wakes
                    .entry((s.tid, woken_tid, ran_log2, stack))
                    .or_default();
                e.0 += s.weight;
                e.1 += 1;
            }
            if let Some((fds, ready)) = s.poll {
                let e = self.polls.entry((s.pid, s.nr, stack)).or_default();
                e.weight += s.weight;
                e.weighted_fds += s.weight as u128 * fds as u128;
                e.weighted_ready += s.weight as u128 * ready as u128;
                e.samples += 1;
            }
            if let Some(cpu) = s.cpu {
                if let (Some(code), Some(at)) = (&s.code, leaf)
                    && !self.code.contains_key(&at)
                {
                    self.code.insert(at, code.clone());
                }
                self.count_cpu((s.tid, cpu, stack));
            }
            if s.call
                && let Some(path) = &s.path
            {
                count_path(self.paths.entry(s.nr).or_default(), path, s.weight);
            }
            if s.call {
                let e = self.sites.entry((s.nr, stack)).or_default();
                e.0 += s.weight;
                e.1 += 1;
            }
        }
    }

    /// One on-CPU sample, within MAX_CPU_KEYS keys.
    fn count_cpu(&mut self, key: (u32, CpuSample, StackId)) {
        if self.cpu.len() >= MAX_CPU_KEYS && !self.cpu.contains_key(&key) {
            self.make_cpu_room();
        }
        *self.cpu.entry(key).or_default() += 1;
    }

    /// Makes room for a quarter of MAX_CPU_KEYS: the keys with fewest
    /// samples give way (ties among the last of them in the table's
    /// order), their samples counted in `cpu_unkept`, and the machine code
    /// copied for their instructions alone goes with them. Once in
    /// MAX_CPU_KEYS / 4 new keys, so the scan's cost is a few ns a key.
    fn make_cpu_room(&mut self) {
        let quarter = MAX_CPU_KEYS / 4;
        let mut counts: Vec<u64> = self.cpu.values().copied().collect();
        if counts.len() <= quarter {
            return;
        }
        let (_, &mut k, _) = counts.select_nth_unstable(quarter - 1);
        let mut ties = quarter - counts.iter().filter(|&&c| c < k).count();
        let unkept = &mut self.cpu_unkept;
        self.cpu.retain(|(_, c, _), n| {
            let go = *n < k || (*n == k && ties > 0);
            if go {
                if *n == k {
                    ties -= 1;
                }
                if c.in_kernel {
                    unkept.kernel += *n;
                } else {
                    unkept.user += *n;
                }
            }
            !go
        });
        let leaves: crate::fixed_hash::HashSet<&FrameLoc> = self
            .cpu
            .keys()
            .filter_map(|(_, _, id)| self.stacks.get(*id).frames.first())
            .collect();
        self.code.retain(|at, _| leaves.contains(at));
    }

    /// Every stack held, for symbolization.
    pub fn stacks(&self) -> impl Iterator<Item = &UnwoundStack> {
        self.stacks.all.iter().map(|s| s.as_ref())
    }

    /// The numbers of every stack kept, in order.
    pub fn stack_ids(&self) -> impl Iterator<Item = StackId> + use<> {
        (0..self.stacks.all.len() as u32).map(StackId)
    }

    /// The stack numbered `id`.
    pub fn stack(&self, id: StackId) -> &UnwoundStack {
        self.stacks.get(id)
    }

    /// What the tallies hold, by kind: distinct stacks and their frames,
    /// each tally's keys, the sleeps' time cells. What a long attach grows
    /// by, for the report to state (`profiler.held`).
    pub fn held(&self) -> std::collections::BTreeMap<String, u64> {
        let frames = self.stacks.all.iter().map(|s| s.frames.len() as u64).sum();
        let cells = self
            .sleeps
            .values()
            .map(|t| t.spans.cells.len() as u64)
            .sum();
        [
            ("stacks", self.stacks.len() as u64),
            ("stack_frames", frames),
            ("syscall_sites", self.sites.len() as u64),
            ("lock_keys", self.locks.len() as u64),
            ("offcpu_keys", self.offcpu.len() as u64),
            ("sleep_keys", self.sleeps.len() as u64),
            ("sleep_time_cells", cells),
            ("wake_keys", self.wakes.len() as u64),
            ("poll_keys", self.polls.len() as u64),
            ("cpu_keys", self.cpu.len() as u64),
            ("code_copies", self.code.len() as u64),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(addrs: &[u64]) -> UnwoundStack {
        UnwoundStack {
            frames: addrs
                .iter()
                .map(|&addr| FrameLoc::Unmapped {
                    addr,
                    mapping: None,
                })
                .collect(),
            truncated: false,
        }
    }

    /// Issue 21: a stack seen again, by any tally, is the same number and
    /// is kept once.
    #[test]
    fn a_stack_is_kept_once_however_often_it_comes() {
        let mut stacks = Stacks::default();
        let a = stacks.intern(stack(&[1, 2, 3]));
        let b = stacks.intern(stack(&[1, 2, 4]));
        assert_ne!(a, b);
        for _ in 0..1000 {
            assert_eq!(stacks.intern(stack(&[1, 2, 3])), a);
        }
        assert_eq!(stacks.len(), 2);
        assert_eq!(stacks.get(b), &stack(&[1, 2, 4]));
    }

    /// Issue 19: in the test suite's environment the loader probed 64
    /// library directories before gawk's million stats of /etc/localtime,
    /// which then all counted as other paths.
    #[test]
    fn a_storms_path_is_kept_however_many_paths_came_before_it() {
        let mut paths = HashMap::default();
        for i in 0..MAX_PATHS + 10 {
            count_path(&mut paths, &format!("/lib/probe{i}"), 1);
        }
        for _ in 0..1000 {
            count_path(&mut paths, "/etc/localtime", 1000);
        }
        assert_eq!(paths["/etc/localtime"], 1_000_000);
        assert!(paths.len() <= MAX_PATHS + 1);
        let total: u64 = paths.values().sum();
        assert_eq!(total, (MAX_PATHS as u64 + 10) + 1_000_000);
    }

    /// Issue 21: a long attach met new on-CPU keys for as long as it ran.
    /// At MAX_CPU_KEYS keys nothing gives way; one more key makes room for
    /// a quarter: the keys with fewest samples go, their samples counted
    /// by mode, and the code copied for their instructions with them.
    #[test]
    fn on_cpu_keys_past_the_cap_give_way_fewest_samples_first_issue_21() {
        let mut t = SampleTally::default();
        let sample = |in_kernel| CpuSample {
            kernel_stack: None,
            in_kernel,
            spinning: false,
            after_cas: false,
        };
        // Key i has i % 4 + 1 samples; odd keys ran in the kernel.
        let mut total = 0;
        for i in 0..MAX_CPU_KEYS as u64 {
            let id = t.stacks.intern(stack(&[0x1000 + i, 1]));
            t.code.insert(
                FrameLoc::Unmapped {
                    addr: 0x1000 + i,
                    mapping: None,
                },
                vec![0x90],
            );
            for _ in 0..i % 4 + 1 {
                t.count_cpu((1, sample(i % 2 == 1), id));
                total += 1;
            }
        }
        assert_eq!(t.cpu.len(), MAX_CPU_KEYS);
        assert_eq!(t.cpu_unkept, CpuUnkept::default());
        assert_eq!(t.code.len(), MAX_CPU_KEYS);

        let new = t.stacks.intern(stack(&[0xdead, 1]));
        t.count_cpu((2, sample(false), new));
        total += 1;
        // A quarter gave way, and the new key came in.
        assert_eq!(t.cpu.len(), MAX_CPU_KEYS - MAX_CPU_KEYS / 4 + 1);
        // Exactly the keys of one sample (i % 4 == 0) went: all user mode.
        assert_eq!(t.cpu.values().filter(|&&n| n == 1).count(), 1);
        assert_eq!(
            t.cpu_unkept,
            CpuUnkept {
                user: MAX_CPU_KEYS as u64 / 4,
                kernel: 0
            }
        );
        let kept: u64 = t.cpu.values().sum();
        assert_eq!(kept + t.cpu_unkept.user + t.cpu_unkept.kernel, total);
        // Code is kept for the kept keys' instructions only (the new key
        // carried none).
        assert_eq!(t.code.len(), MAX_CPU_KEYS - MAX_CPU_KEYS / 4);
        assert!(!t.code.contains_key(&FrameLoc::Unmapped {
            addr: 0x1000,
            mapping: None
        }));
        assert!(t.code.contains_key(&FrameLoc::Unmapped {
            addr: 0x1001,
            mapping: None
        }));
    }
}
