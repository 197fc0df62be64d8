//! DWARF unwinding of sampled user stacks, in user space, from the registers
//! and stack bytes the BPF program copied.
//!
//! Why not frame pointers: Debian's libc and most -O2 code keep none, so a
//! frame-pointer walk loses the caller of every libc wrapper. The binaries'
//! own `.eh_frame` tables are always there (C++ exceptions and glibc's
//! cancellation need them), and `framehop` walks them.
//!
//! A sample needs its process's memory map. It is read from /proc while the
//! process lives; a process that exits before its samples are handled sends
//! its executable mappings from the exit tracepoint instead, and its samples
//! wait for that (files are then known by device and inode, named from every
//! memory map read so far).

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{FrameAddress, Module, Unwinder};

use super::elf::{Bytes, ModuleTable};
use super::map_change;
use super::maps::{self, Mapping};
use crate::collect::events::{ExitMapping, MapChange, StackSample};
use crate::model::{FrameLoc, UnwoundStack};

/// Deepest stack kept; deeper ones are cut and marked truncated.
const MAX_FRAMES: usize = 128;

/// Processes with a rule cache of their own at once; past it all are
/// dropped and built again as samples come. framehop's cache (509 rules,
/// ~12 KiB) tags each rule with its unwinder, so one cache shared by the
/// processes of a multi-process server was overwritten by each in turn and
/// most lookups parsed DWARF CFI again (issue 21: kerntax's user space took
/// 8.5% of a CPU on PostgreSQL, ~1% on one-process memcached).
const MAX_RULE_CACHES: usize = 256;

/// Exited processes whose memory maps are kept (for naming their lock
/// addresses at the end); older ones are forgotten. A process's unwinder
/// goes at its exit. Each kept ~4 KiB (a small program's maps) to tens of
/// KiB, for as long as kerntax ran: `kerntax run -- sh -c '<4,000 x
/// /bin/true>'` peaked 12.6 MiB above a run of 1,000 (issue 21).
const MAX_EXITED_KEPT: usize = 4_096;

struct Region {
    start: u64,
    end: u64,
    /// Module number and bias (runtime minus stated address).
    module: Option<(usize, u64)>,
    name: Option<String>,
}

struct Process {
    regions: Vec<Region>,
    unwinder: UnwinderX86_64<Bytes>,
}

impl Process {
    fn covers(&self, addr: u64) -> bool {
        self.regions
            .iter()
            .any(|r| (r.start..r.end).contains(&addr))
    }
}

#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub struct UnwindStats {
    /// Samples whose process's memory map could not be had at all.
    pub maps_unavailable: u64,
    /// Stacks deeper than the bytes copied (or than MAX_FRAMES).
    pub truncated: u64,
}

/// A sample after unwinding: its stack and what it stands for.
#[derive(Clone, Debug)]
pub struct Unwound {
    pub sample: StackSample,
    pub stack: UnwoundStack,
}

#[derive(Default)]
pub struct Unwinding {
    pub modules: ModuleTable,
    procs: HashMap<u32, Process>,
    /// Parent of each forked process that has not exec'd since: its address
    /// space is a copy of the parent's, a fallback when it exits unread.
    forked_from: HashMap<u32, u32>,
    /// Path of every file seen mapped, by (device, inode).
    paths: HashMap<(u64, u64), String>,
    /// The latest memory map had of each process, all of it: lock addresses
    /// are named from it once profiling stops.
    mappings: HashMap<u32, Vec<Mapping>>,
    /// Samples of processes whose memory map could not be read, waiting for
    /// their exit mappings.
    pending: HashMap<u32, Vec<StackSample>>,
    /// Commands kerntax forked and that have not exec'd yet: their stacks
    /// are kerntax's own code, not the command's.
    before_exec: HashSet<u32>,
    /// Exited processes, oldest first (`MAX_EXITED_KEPT`).
    exited: std::collections::VecDeque<u32>,
    /// Exited processes forgotten.
    pub exited_forgotten: u64,
    /// Unwind rules by process (`MAX_RULE_CACHES`), dropped at its exit.
    caches: HashMap<u32, CacheX86_64>,
    /// framehop's rule-cache lookups of the caches dropped so far: hits
    /// and all.
    cache_lookups: (u64, u64),
    /// The perf maps naming JIT frames, read once profiling stops.
    pub jit_maps: super::jit::JitMaps,
    /// CPython processes: their frames merged into stacks, and named.
    pub python: crate::interp::python::frames::Pythons,
    /// CRuby processes: the same.
    pub ruby: crate::interp::ruby::frames::Rubies,
    /// Names of frames in files kept from one window of a live view to the
    /// next (None: a run names its stacks once, at its end).
    pub names_cache: Option<super::symbolize::NameCache>,
    /// Processes whose memory map was read again in this batch of samples.
    reread: HashSet<u32>,
    /// The kernel sends changes of executable file mappings in ring order
    /// (`map_change`): a read of /proc then fills in around them.
    pub map_events: bool,
    pub stats: UnwindStats,
}

/// Whether `path` is the file with this (device, inode) as /proc/PID/maps
/// shows them.
fn same_file(path: &str, (dev, inode): (u64, u64)) -> bool {
    std::fs::metadata(path).is_ok_and(|m| maps_dev(m.dev()) == dev && m.ino() == inode)
}

/// A stat(2) device number as /proc/PID/maps shows it.
fn maps_dev(dev: u64) -> u64 {
    (libc::major(dev) as u64) << 32 | libc::minor(dev) as u64
}

impl Unwinding {
    /// Learns the file names in `pid`'s memory map (kerntax's own included:
    /// targets map the same libc and loader) and keeps it if `pid` is a target.
    pub fn learn(&mut self, pid: u32) {
        if let Ok(m) = maps::read(pid) {
            self.learn_paths(&m);
            if pid != std::process::id() {
                self.keep(pid, m);
            }
        }
    }

    /// The path of a file seen mapped somewhere, by device and inode.
    pub fn path_of(&self, dev: u64, inode: u64) -> Option<&str> {
        self.paths.get(&(dev, inode)).map(String::as_str)
    }

    /// Keeps `mappings` as `pid`'s memory map, for unwinding and naming.
    fn keep(&mut self, pid: u32, mappings: Vec<Mapping>) {
        if pid != std::process::id() {
            self.python.learn(pid, &mappings);
            self.ruby.learn(pid, &mappings);
        }
        let p = self.build(&mappings);
        self.procs.insert(pid, p);
        self.mappings.insert(pid, mappings);
    }

    /// The latest memory map of `pid`, read again if it lives and does not
    /// cover `addr`; a forked child that never had its own uses its parent's.
    /// With the changes in ring order only executable file mappings follow
    /// the samples: data mappings (where a lock's variable is) are read
    /// again from a live process at most once a batch, else a map read at
    /// its exec (before ld.so split its data segment for RELRO) named the
    /// lab's `g_namespace_lock` `mutex in ns_get` in every live window.
    pub fn mappings_for(&mut self, pid: u32, addr: u64) -> Option<&[Mapping]> {
        let covers = |m: &Vec<Mapping>| m.iter().any(|x| x.contains(addr));
        let stale = self.tracked(pid) && !self.reread.contains(&pid);
        if (stale || !self.mappings.get(&pid).is_some_and(covers))
            && let Ok(fresh) = maps::read(pid)
        {
            self.reread.insert(pid);
            let merged = self.merged(pid, fresh);
            self.mappings.insert(pid, merged);
        }
        let own = self.mappings.get(&pid).filter(|m| covers(m));
        let parent = self
            .forked_from
            .get(&pid)
            .and_then(|pp| self.mappings.get(pp))
            .filter(|m| covers(m));
        own.or(parent).map(Vec::as_slice)
    }

    /// Whether `pid`'s executable file mappings follow its samples: the
    /// kernel sends their changes and kerntax holds its map.
    fn tracked(&self, pid: u32) -> bool {
        self.map_events && self.procs.contains_key(&pid)
    }

    /// `pid`'s map after a fresh read of /proc (its paths learnt): for a
    /// tracked process the read only fills in around the executable file
    /// mappings the changes keep (it may be ahead of the samples); else it
    /// is the map.
    fn merged(&mut self, pid: u32, fresh: Vec<Mapping>) -> Vec<Mapping> {
        self.learn_paths(&fresh);
        match self.mappings.get(&pid) {
            Some(known) if self.tracked(pid) => map_change::fill_gaps(known, &fresh),
            _ => fresh,
        }
    }

    /// A read of /proc/PID/maps while samples are unwound.
    fn reread(&mut self, pid: u32, fresh: Vec<Mapping>) {
        let merged = self.merged(pid, fresh);
        self.keep(pid, merged);
    }

    /// A change of a live process's executable file mappings, in ring
    /// order with its samples. A process whose map was never read has it
    /// in its first read.
    pub fn on_map_change(&mut self, c: &MapChange) {
        if !self.procs.contains_key(&c.pid) || !self.mappings.contains_key(&c.pid) {
            return;
        }
        // A file not seen mapped before: named by the path the kernel
        // walked, else from the mapping itself while it lasts, else from a
        // read of the whole map; each checked to be that file (the address
        // may hold another one by now).
        for (i, m) in c.maps.iter().enumerate() {
            let key = (m.dev, m.inode);
            if self.paths.contains_key(&key) {
                continue;
            }
            let walked = c.path.clone().filter(|_| i == 0);
            let linked = || {
                let link = format!("/proc/{}/map_files/{:x}-{:x}", c.pid, m.start, m.end);
                std::fs::read_link(link).ok()
            };
            let found = walked.filter(|p| same_file(p, key)).or_else(|| {
                linked()
                    .map(|p| p.to_string_lossy().into_owned())
                    .filter(|p| same_file(p, key))
            });
            if let Some(p) = found {
                self.paths.insert(key, p);
            }
        }
        if c.maps
            .iter()
            .any(|m| !self.paths.contains_key(&(m.dev, m.inode)))
            && let Ok(m) = maps::read(c.pid)
        {
            self.learn_paths(&m);
        }
        let known = self.mappings.get(&c.pid).map_or(&[][..], Vec::as_slice);
        let paths = &self.paths;
        let next = map_change::apply(known, c.start, c.end, &c.maps, |m| {
            paths.get(&(m.dev, m.inode)).cloned()
        });
        self.keep(c.pid, next);
    }

    fn learn_paths(&mut self, mappings: &[Mapping]) {
        for m in mappings.iter().filter(|m| m.is_file()) {
            if let Some(path) = &m.path {
                self.paths
                    .entry((m.dev, m.inode))
                    .or_insert_with(|| path.clone());
            }
        }
    }

    fn build(&mut self, mappings: &[Mapping]) -> Process {
        let mut unwinder = UnwinderX86_64::new();
        let mut regions = Vec::with_capacity(mappings.len());
        let mut added = HashSet::new();
        for m in mappings.iter().filter(|m| m.executable) {
            let mut module = None;
            if m.is_file() || m.path.as_deref() == Some("[vdso]") {
                let (id, elf) = self.modules.get(m);
                if let Some(bias) = elf.as_ref().and_then(|e| e.bias(m)) {
                    module = Some((id, bias));
                    // One framehop module per file, spanning all its mappings.
                    if added.insert(id) {
                        let (lo, hi) = mappings
                            .iter()
                            .filter(|o| o.dev == m.dev && o.inode == m.inode && o.path == m.path)
                            .fold((u64::MAX, 0), |(lo, hi), o| {
                                (lo.min(o.start), hi.max(o.end))
                            });
                        let info = elf
                            .as_ref()
                            .expect("bias implies an ELF file")
                            .section_info();
                        unwinder.add_module(Module::new(
                            self.modules.paths[id].clone(),
                            lo..hi,
                            bias,
                            info,
                        ));
                    }
                }
            }
            regions.push(Region {
                start: m.start,
                end: m.end,
                module,
                name: m.path.clone(),
            });
        }
        Process { regions, unwinder }
    }

    /// The process whose mappings cover `ip` for a sample of `pid`: `pid`
    /// itself, its memory map read again if needed, or, for a forked child
    /// that has exec'd or exited since the sample, the parent it was a copy
    /// of. None when no map can be had (yet).
    fn maps_for(&mut self, pid: u32, ip: u64) -> Option<u32> {
        if self.procs.get(&pid).is_some_and(|p| p.covers(ip)) {
            return Some(pid);
        }
        if let Ok(mappings) = maps::read(pid) {
            self.reread(pid, mappings);
            if self.procs.get(&pid).is_some_and(|p| p.covers(ip)) {
                return Some(pid);
            }
        }
        let parent = *self.forked_from.get(&pid)?;
        self.procs
            .get(&parent)
            .is_some_and(|p| p.covers(ip))
            .then_some(parent)
    }

    /// `pid` is kerntax's child about to exec the command.
    pub fn expect_exec(&mut self, pid: u32) {
        self.before_exec.insert(pid);
    }

    pub fn on_fork(&mut self, pid: u32, ppid: u32) {
        self.forked_from.insert(pid, ppid);
    }

    /// A new program image: the old mappings are gone. Reads the new ones at
    /// once, while the process most likely still lives, to learn its paths.
    pub fn on_exec(&mut self, pid: u32, filename: &str) {
        self.before_exec.remove(&pid);
        self.procs.remove(&pid);
        self.python.forget(pid);
        self.ruby.forget(pid);
        self.forked_from.remove(&pid);
        self.learn(pid);
        // A command run by a relative path: the exec names it relative to
        // the process's working directory, and a mapping's path must be
        // absolute to be opened (issue 19: `kerntax run -- ./prog` named no
        // frame of prog once it had exited).
        let path = if filename.starts_with('/') {
            filename.to_string()
        } else {
            std::fs::canonicalize(std::path::Path::new(&format!("/proc/{pid}/cwd")).join(filename))
                .or_else(|_| std::fs::canonicalize(filename))
                .map_or_else(
                    |_| filename.to_string(),
                    |p| p.to_string_lossy().into_owned(),
                )
        };
        if let Ok(meta) = std::fs::metadata(&path) {
            self.paths
                .entry((maps_dev(meta.dev()), meta.ino()))
                .or_insert(path);
        }
    }

    /// Unwinds a sample into `out`, or keeps it until its process's exit
    /// mappings arrive.
    pub fn push(&mut self, s: StackSample, out: &mut Vec<Unwound>) {
        if self.before_exec.contains(&s.pid) {
            return;
        }
        // A sample with no user stack needs no map (and its registers may
        // be the replaced image's): it must not hold up the later ones.
        if s.no_user_stack {
            out.push(self.unwind(&s, s.pid));
            return;
        }
        // Once one sample waits, later ones wait too: order is kept.
        let owner = if self.pending.contains_key(&s.pid) {
            None
        } else {
            self.maps_for(s.pid, s.ip)
        };
        match owner {
            Some(owner) => out.push(self.unwind(&s, owner)),
            None => self.pending.entry(s.pid).or_default().push(s),
        }
    }

    /// A process exits: its waiting samples are unwound against the
    /// mappings it had, which are also kept for naming its lock addresses.
    pub fn on_exit_maps(&mut self, pid: u32, exit_maps: &[ExitMapping], out: &mut Vec<Unwound>) {
        let mappings = self.sent_mappings(exit_maps);
        match self.pending.remove(&pid) {
            None => {
                self.mappings.insert(pid, mappings);
            }
            Some(waiting) => self.unwind_waiting(pid, mappings, waiting, out),
        }
        self.gone(pid);
    }

    /// A process is about to exec: the samples of its image that wait for
    /// a map (it was replaced before its map was read) are unwound against
    /// the mappings it has until then. Its exec follows.
    pub fn on_exec_maps(&mut self, pid: u32, maps: &[ExitMapping], out: &mut Vec<Unwound>) {
        if let Some(waiting) = self.pending.remove(&pid) {
            let mappings = self.sent_mappings(maps);
            self.unwind_waiting(pid, mappings, waiting, out);
        }
    }

    fn unwind_waiting(
        &mut self,
        pid: u32,
        mappings: Vec<Mapping>,
        waiting: Vec<StackSample>,
        out: &mut Vec<Unwound>,
    ) {
        self.keep(pid, mappings);
        for s in waiting {
            let owner = self.maps_for_gone(&s);
            out.push(self.unwind(&s, owner));
        }
    }

    /// Mappings sent by the kernel, files named from the maps read so far.
    fn sent_mappings(&self, exit_maps: &[ExitMapping]) -> Vec<Mapping> {
        exit_maps
            .iter()
            .map(|m| Mapping {
                start: m.start,
                end: m.end,
                offset: m.offset,
                executable: m.executable,
                dev: m.dev,
                inode: m.inode,
                path: match (m.inode, m.heap) {
                    (0, true) => Some("[heap]".to_string()),
                    (0, false) => None,
                    _ => self.paths.get(&(m.dev, m.inode)).cloned(),
                },
            })
            .collect()
    }

    /// A process has exited and its samples are unwound: its unwinder and
    /// rule cache go, unless a forked child that has not exec'd may still
    /// need them, and its maps stay among the last MAX_EXITED_KEPT.
    fn gone(&mut self, pid: u32) {
        self.drop_cache(pid);
        if !self.forked_from.values().any(|&parent| parent == pid) {
            self.procs.remove(&pid);
        }
        self.forked_from.remove(&pid);
        self.exited.push_back(pid);
        while self.exited.len() > MAX_EXITED_KEPT {
            let Some(old) = self.exited.pop_front() else {
                break;
            };
            // A pid used again by a live process keeps its maps.
            if !self.procs.contains_key(&old) {
                self.mappings.remove(&old);
                self.exited_forgotten += 1;
            }
        }
    }

    /// A process is gone: its rule cache goes (a late sample builds one).
    fn drop_cache(&mut self, pid: u32) {
        if let Some(c) = self.caches.remove(&pid) {
            self.cache_lookups = add_lookups(self.cache_lookups, &c);
        }
    }

    /// framehop's rule-cache lookups so far: (hits, all).
    pub fn rule_cache_lookups(&self) -> (u64, u64) {
        self.caches.values().fold(self.cache_lookups, add_lookups)
    }

    /// For a sample of a process that is gone: its last known mappings, or
    /// its parent's if those cover the sample and not its own.
    fn maps_for_gone(&self, s: &StackSample) -> u32 {
        let own = self.procs.get(&s.pid).is_some_and(|p| p.covers(s.ip));
        match self.forked_from.get(&s.pid) {
            Some(&parent) if !own && self.procs.get(&parent).is_some_and(|p| p.covers(s.ip)) => {
                parent
            }
            _ => s.pid,
        }
    }

    /// Unwinds what is still waiting as well as it can (the stacks of
    /// processes whose memory map was never had are counted as such).
    pub fn flush(&mut self, out: &mut Vec<Unwound>) {
        for (_, waiting) in std::mem::take(&mut self.pending) {
            for s in waiting {
                let owner = self.maps_for_gone(&s);
                out.push(self.unwind(&s, owner));
            }
        }
    }

    /// Unwinds `s` with the mappings of process `owner`.
    fn unwind(&mut self, s: &StackSample, owner: u32) -> Unwound {
        if s.no_user_stack {
            return Unwound {
                sample: s.clone(),
                stack: UnwoundStack {
                    frames: Vec::new(),
                    truncated: false,
                },
            };
        }
        let Some(p) = self.procs.get(&owner).filter(|p| p.covers(s.ip)) else {
            self.stats.maps_unavailable += 1;
            let stack = UnwoundStack {
                frames: vec![FrameLoc::Unmapped {
                    addr: s.ip,
                    mapping: None,
                }],
                truncated: false,
            };
            return Unwound {
                sample: s.without_stack(),
                stack,
            };
        };
        if !self.caches.contains_key(&owner) && self.caches.len() >= MAX_RULE_CACHES {
            for (_, c) in std::mem::take(&mut self.caches) {
                self.cache_lookups = add_lookups(self.cache_lookups, &c);
            }
        }
        let cache = self.caches.entry(owner).or_default();
        let (mut frames, mut truncated) = walk(p, cache, s, owner);
        // A frame in no mapping known: code mapped since the map was read
        // (a library loaded late, a JIT's code cache grown). Read it again,
        // at most once per batch of samples.
        let outside = |frames: &[FrameLoc]| {
            frames
                .iter()
                .any(|f| matches!(f, FrameLoc::Unmapped { mapping: None, .. }))
        };
        if outside(&frames)
            && self.reread.insert(owner)
            && let Ok(mappings) = maps::read(owner)
        {
            self.reread(owner, mappings);
            if let Some(p) = self.procs.get(&owner) {
                let cache = self.caches.entry(owner).or_default();
                (frames, truncated) = walk(p, cache, s, owner);
            }
        }
        if truncated {
            self.stats.truncated += 1;
        }
        // Whether a native frame is in the interpreter's eval function
        // (`range`, as its file `path` states it).
        let paths = &self.modules.paths;
        let in_eval = |f: &FrameLoc, range: &std::ops::Range<u64>, path: &str| match f {
            FrameLoc::InModule { module, svma } => {
                range.contains(svma) && paths.get(*module).is_some_and(|p| p == path)
            }
            _ => false,
        };
        if let Some(py) = &s.python {
            frames = self.python.merge(owner, frames, py, in_eval);
        }
        if let Some(rb) = &s.ruby {
            frames = self.ruby.merge(owner, frames, rb, in_eval);
        }
        let stack = UnwoundStack { frames, truncated };
        Unwound {
            sample: s.without_stack(),
            stack,
        }
    }

    /// A new batch of samples: a process's map may be read again once.
    pub fn new_batch(&mut self) {
        self.reread.clear();
        self.python.new_batch();
        self.ruby.new_batch();
    }
}

/// `(hits, all)` plus a rule cache's lookups.
fn add_lookups((hits, all): (u64, u64), cache: &CacheX86_64) -> (u64, u64) {
    let st = cache.stats();
    (hits + st.hit_count, all + st.total())
}

/// Walks the stack of `s` in process `p` (`owner`): its frames, and whether
/// it was cut short.
fn walk(
    p: &Process,
    cache: &mut CacheX86_64,
    s: &StackSample,
    owner: u32,
) -> (Vec<FrameLoc>, bool) {
    // Set when the unwinder wanted stack beyond the bytes copied: the one
    // way a stack is cut short rather than ended (a trampoline without
    // unwind info, like ld.so's _start or makecontext's, just ends it).
    let mut beyond_copy = false;
    let copied_end = s.sp + s.stack.len() as u64;
    let mut read_stack = |addr: u64| -> Result<u64, ()> {
        let off = addr.checked_sub(s.sp).ok_or(())? as usize;
        match s.stack.get(off..off.checked_add(8).ok_or(())?) {
            Some(bytes) => Ok(u64::from_ne_bytes(bytes.try_into().map_err(|_| ())?)),
            None => {
                beyond_copy |= addr >= copied_end;
                Err(())
            }
        }
    };
    let regs = UnwindRegsX86_64::new(s.ip, s.sp, s.bp);
    let mut iter = p.unwinder.iter_frames(s.ip, regs, cache, &mut read_stack);
    let mut frames = Vec::new();
    let mut truncated = false;
    while let Ok(Some(frame)) = iter.next() {
        if frames.len() == MAX_FRAMES {
            truncated = true;
            break;
        }
        frames.push(locate(&p.regions, owner, frame));
    }
    truncated |= beyond_copy;
    (frames, truncated)
}
fn locate(regions: &[Region], pid: u32, frame: FrameAddress) -> FrameLoc {
    let lookup = frame.address_for_lookup();
    match regions.iter().find(|r| (r.start..r.end).contains(&lookup)) {
        Some(Region {
            module: Some((module, bias)),
            ..
        }) => FrameLoc::InModule {
            module: *module,
            svma: lookup.wrapping_sub(*bias),
        },
        Some(Region { name: None, .. }) => FrameLoc::Jit { pid, addr: lookup },
        Some(r) => FrameLoc::Unmapped {
            addr: lookup,
            mapping: r.name.clone(),
        },
        None => FrameLoc::Unmapped {
            addr: lookup,
            mapping: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 21: every exited process's maps were kept for as long as
    /// kerntax ran. The last MAX_EXITED_KEPT stay (lock addresses are
    /// named from them), the rest are let go and counted; a live process
    /// that reused an old pid keeps its own.
    #[test]
    fn exited_processes_maps_are_bounded_and_counted_issue_21() {
        let mut u = Unwinding::default();
        let mut out = Vec::new();
        let n = MAX_EXITED_KEPT as u32;
        for pid in 1..=n {
            u.on_exit_maps(pid, &[], &mut out);
        }
        assert_eq!((u.mappings.len(), u.exited_forgotten), (MAX_EXITED_KEPT, 0));
        // Pid 2 is used again by a live process.
        u.procs.insert(
            2,
            Process {
                regions: Vec::new(),
                unwinder: UnwinderX86_64::new(),
            },
        );
        for pid in n + 1..=n + 3 {
            u.on_exit_maps(pid, &[], &mut out);
        }
        assert_eq!(u.exited_forgotten, 2);
        assert!(!u.mappings.contains_key(&1) && !u.mappings.contains_key(&3));
        assert!(u.mappings.contains_key(&2) && u.mappings.contains_key(&4));
        assert_eq!(u.mappings.len(), MAX_EXITED_KEPT + 1);
        assert!(out.is_empty());
    }
}
