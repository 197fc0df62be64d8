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
//!
//! `known` keeps the maps, `walk` walks a stack against them; this module
//! follows the processes (fork, exec, exit) and orders their samples.

mod known;
mod walk;

use std::collections::{HashMap, HashSet};

use framehop::x86_64::CacheX86_64;

use crate::collect::events::{ExitMapping, StackSample};
use crate::model::UnwoundStack;
use crate::stacks::elf::ModuleTable;
use crate::stacks::maps::Mapping;
use known::file_key;
use walk::Process;

/// Exited processes whose memory maps are kept (for naming their lock
/// addresses at the end); older ones are forgotten. A process's unwinder
/// goes at its exit. Each kept ~4 KiB (a small program's maps) to tens of
/// KiB, for as long as kerntax ran: `kerntax run -- sh -c '<4,000 x
/// /bin/true>'` peaked 12.6 MiB above a run of 1,000 (issue 21).
const MAX_EXITED_KEPT: usize = 4_096;

#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub struct UnwindStats {
    /// Samples whose process's memory map could not be had at all.
    pub maps_unavailable: u64,
    /// Stacks deeper than the bytes copied (or than MAX_FRAMES).
    pub truncated: u64,
    /// Frames refused where their process's mapping changes were lost
    /// (`StackSample::maps_lost`).
    pub frames_in_lost_maps: u64,
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
    /// Samples no map covered, waiting for the mappings of their image
    /// (`maps_for`): their process gone, or exec'd since.
    pending: HashMap<u32, Vec<StackSample>>,
    /// The program each process runs, by (device, inode): as its exec
    /// named it, its parent's if forked, its executable's when first read.
    /// A map from /proc that does not map it is of a later image.
    images: HashMap<u32, (u64, u64)>,
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
    /// HotSpot JVMs: their interpreted frames named.
    pub java: crate::interp::hotspot::Jvms,
    /// V8 processes (node): their JavaScript frames named.
    pub js: crate::interp::v8::V8s,
    /// Names of frames in files kept from one window of a live view to the
    /// next (None: a run names its stacks once, at its end).
    pub names_cache: Option<super::symbolize::NameCache>,
    /// Processes whose memory map was read again in this batch of samples.
    reread: HashSet<u32>,
    /// The kernel sends changes of executable file mappings in ring order
    /// (`map_change`): a read of /proc then fills in around them.
    pub map_events: bool,
    /// The kernel sends a process's mappings as its image ends (at exec,
    /// 6.10+; at exit, 6.17+): a sample of an image replaced before its
    /// map was read waits for them.
    pub image_maps: bool,
    pub stats: UnwindStats,
}

impl Unwinding {
    /// `pid` is kerntax's child about to exec the command.
    pub fn expect_exec(&mut self, pid: u32) {
        self.before_exec.insert(pid);
    }

    pub fn on_fork(&mut self, pid: u32, ppid: u32) {
        self.forked_from.insert(pid, ppid);
        if let Some(&image) = self.images.get(&ppid) {
            self.images.insert(pid, image);
        }
    }

    /// A new program image: the old mappings are gone. Reads the new ones at
    /// once, while the process most likely still lives, to learn its paths;
    /// where it is gone already and the kernel sends map changes, its map
    /// starts empty and they fill it in (`follow`).
    pub fn on_exec(&mut self, pid: u32, filename: &str) {
        self.before_exec.remove(&pid);
        self.procs.remove(&pid);
        for r in self.readers_mut() {
            r.forget(pid);
        }
        self.forked_from.remove(&pid);
        // The program before the exec is not the one it runs now: learnt
        // from /proc/PID/exe, then from the name the exec gave, if found.
        self.images.remove(&pid);
        self.learn(pid);
        self.follow(pid);
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
        if let Some(image) = file_key(&path) {
            self.images.insert(pid, image);
            self.paths.entry(image).or_insert(path);
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
            self.maps_for(&s)
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

    /// A process has exited and its samples are unwound: its unwinder and
    /// rule cache go, unless a forked child that has not exec'd may still
    /// need them, and its maps stay among the last MAX_EXITED_KEPT.
    fn gone(&mut self, pid: u32) {
        self.drop_cache(pid);
        self.images.remove(&pid);
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

    /// A new batch of samples: a process's map may be read again once.
    pub fn new_batch(&mut self) {
        self.reread.clear();
        for r in self.readers_mut() {
            r.new_batch();
        }
    }

    /// Every runtime's frame reader: the one list a new runtime's reader
    /// joins (with its field above).
    pub fn readers(&self) -> [&dyn crate::interp::Reader; 4] {
        [&self.python, &self.ruby, &self.java, &self.js]
    }

    pub fn readers_mut(&mut self) -> [&mut dyn crate::interp::Reader; 4] {
        [
            &mut self.python,
            &mut self.ruby,
            &mut self.java,
            &mut self.js,
        ]
    }

    /// The readers that name frames of the native stack.
    fn namers_mut(&mut self) -> [&mut dyn crate::interp::FrameNamer; 2] {
        [&mut self.java, &mut self.js]
    }
}

#[cfg(test)]
mod tests;
