//! DWARF unwinding of sampled user stacks, in user space, from the registers
//! and stack bytes the BPF program copied.
//!
//! Why not frame pointers: Debian's libc and most -O2 code keep none, so a
//! frame-pointer walk loses the caller of every libc wrapper. The binaries'
//! own `.eh_frame` tables are always there (C++ exceptions and glibc's
//! cancellation need them), and `framehop` walks them.
//!
//! Samples must be unwound while their process still lives (its mappings are
//! read from /proc), so this runs as events arrive, not at the end.

use std::collections::{HashMap, HashSet};

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{FrameAddress, Module, Unwinder};

use super::elf::{Bytes, ModuleTable};
use super::maps::{self, Mapping};
use crate::collect::events::StackSample;
use crate::model::{FrameLoc, UnwoundStack};

/// Deepest stack kept; deeper ones are cut and marked truncated.
const MAX_FRAMES: usize = 128;

struct Region {
    start: u64,
    end: u64,
    /// Module number and bias (runtime minus stated address).
    module: Option<(usize, u64)>,
    name: Option<String>,
}

struct Process {
    mappings: Vec<Mapping>,
    regions: Vec<Region>,
    unwinder: UnwinderX86_64<Bytes>,
}

#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub struct UnwindStats {
    pub samples: u64,
    /// Samples whose process had no readable mappings (exited too early).
    pub maps_unavailable: u64,
    /// Stacks deeper than the bytes copied (or than MAX_FRAMES).
    pub truncated: u64,
}

#[derive(Default)]
pub struct Unwinding {
    pub modules: ModuleTable,
    procs: HashMap<u32, Process>,
    /// Parent of each forked process that has not exec'd since: its address
    /// space is a copy of the parent's, a fallback when it exits unread.
    forked_from: HashMap<u32, u32>,
    cache: CacheX86_64,
    pub stats: UnwindStats,
}

impl Unwinding {
    fn build(&mut self, mappings: Vec<Mapping>) -> Process {
        let mut unwinder = UnwinderX86_64::new();
        let mut regions = Vec::with_capacity(mappings.len());
        let mut added = HashSet::new();
        for m in mappings.iter().filter(|m| m.executable) {
            let mut module = None;
            if m.is_file() {
                let (id, elf) = self.modules.get(m);
                if let Some(elf) = elf {
                    if let Some(bias) = elf.bias(m) {
                        module = Some((id, bias));
                        // One framehop module per file, spanning all its mappings.
                        if added.insert(id) {
                            let (lo, hi) = mappings
                                .iter()
                                .filter(|o| o.dev == m.dev && o.inode == m.inode && o.path == m.path)
                                .fold((u64::MAX, 0), |(lo, hi), o| (lo.min(o.start), hi.max(o.end)));
                            let name = self.modules.paths[id].clone();
                            unwinder.add_module(Module::new(name, lo..hi, bias, elf.section_info()));
                        }
                    }
                }
            }
            regions.push(Region { start: m.start, end: m.end, module, name: m.path.clone() });
        }
        Process { mappings, regions, unwinder }
    }

    /// Makes sure `pid` has mappings covering `ip`, reading them again if
    /// needed; false when none can be had.
    fn ensure(&mut self, pid: u32, ip: u64) -> bool {
        let covers = |p: &Process| p.regions.iter().any(|r| (r.start..r.end).contains(&ip));
        if self.procs.get(&pid).is_some_and(covers) {
            return true;
        }
        let mappings = match maps::read(pid) {
            Ok(m) => m,
            Err(_) => {
                let parent = self.forked_from.get(&pid).and_then(|pp| self.procs.get(pp));
                match parent {
                    Some(p) if !self.procs.contains_key(&pid) => p.mappings.clone(),
                    _ => return self.procs.contains_key(&pid),
                }
            }
        };
        let p = self.build(mappings);
        self.procs.insert(pid, p);
        true
    }

    /// A new process starts with a copy of its parent's address space.
    pub fn on_fork(&mut self, pid: u32, ppid: u32) {
        self.forked_from.insert(pid, ppid);
    }

    /// A new program image: the old mappings are gone.
    pub fn on_exec(&mut self, pid: u32) {
        self.procs.remove(&pid);
        self.forked_from.remove(&pid);
    }

    pub fn unwind(&mut self, s: &StackSample) -> UnwoundStack {
        self.stats.samples += 1;
        if !self.ensure(s.pid, s.ip) {
            self.stats.maps_unavailable += 1;
        }
        let Some(p) = self.procs.get(&s.pid) else {
            return UnwoundStack { frames: vec![FrameLoc::Unmapped { addr: s.ip, mapping: None }], truncated: true };
        };

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
        let mut iter = p.unwinder.iter_frames(s.ip, regs, &mut self.cache, &mut read_stack);
        let mut frames = Vec::new();
        let mut truncated = false;
        while let Ok(Some(frame)) = iter.next() {
            if frames.len() == MAX_FRAMES {
                truncated = true;
                break;
            }
            frames.push(locate(&p.regions, frame));
        }
        drop(iter);
        truncated |= beyond_copy;
        if truncated {
            self.stats.truncated += 1;
        }
        UnwoundStack { frames, truncated }
    }
}

fn locate(regions: &[Region], frame: FrameAddress) -> FrameLoc {
    let lookup = frame.address_for_lookup();
    match regions.iter().find(|r| (r.start..r.end).contains(&lookup)) {
        Some(Region { module: Some((module, bias)), .. }) => {
            FrameLoc::InModule { module: *module, svma: lookup.wrapping_sub(*bias) }
        }
        Some(r) => FrameLoc::Unmapped { addr: lookup, mapping: r.name.clone() },
        None => FrameLoc::Unmapped { addr: lookup, mapping: None },
    }
}
