//! The walk of one sampled stack with framehop, against the regions of the
//! process whose map covers it, and the rule caches that keep it cheap.

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{FrameAddress, Unwinder};

use super::{Unwinding, Unwound};
use crate::collect::events::StackSample;
use crate::model::{FrameLoc, UnwoundStack};
use crate::stacks::elf::Bytes;
use crate::stacks::maps;

/// Deepest stack kept; deeper ones are cut and marked truncated.
const MAX_FRAMES: usize = 128;

/// Processes with a rule cache of their own at once; past it all are
/// dropped and built again as samples come. framehop's cache (509 rules,
/// ~12 KiB) tags each rule with its unwinder, so one cache shared by the
/// processes of a multi-process server was overwritten by each in turn and
/// most lookups parsed DWARF CFI again (issue 21: kerntax's user space took
/// 8.5% of a CPU on PostgreSQL, ~1% on one-process memcached).
const MAX_RULE_CACHES: usize = 256;

pub(super) struct Region {
    pub(super) start: u64,
    pub(super) end: u64,
    /// Module number and bias (runtime minus stated address).
    pub(super) module: Option<(usize, u64)>,
    pub(super) name: Option<String>,
}

pub(super) struct Process {
    pub(super) regions: Vec<Region>,
    pub(super) unwinder: UnwinderX86_64<Bytes>,
}

impl Process {
    pub(super) fn covers(&self, addr: u64) -> bool {
        self.regions
            .iter()
            .any(|r| (r.start..r.end).contains(&addr))
    }
}

impl Unwinding {
    /// A process is gone: its rule cache goes (a late sample builds one).
    pub(super) fn drop_cache(&mut self, pid: u32) {
        if let Some(c) = self.caches.remove(&pid) {
            self.cache_lookups = add_lookups(self.cache_lookups, &c);
        }
    }

    /// framehop's rule-cache lookups so far: (hits, all).
    pub fn rule_cache_lookups(&self) -> (u64, u64) {
        self.caches.values().fold(self.cache_lookups, add_lookups)
    }

    /// Unwinds `s` with the mappings of process `owner`.
    pub(super) fn unwind(&mut self, s: &StackSample, owner: u32) -> Unwound {
        if s.no_user_stack {
            return Unwound {
                sample: s.clone(),
                stack: UnwoundStack {
                    frames: Vec::new(),
                    truncated: false,
                },
            };
        }
        // The sample's own address where its mapping changes were lost:
        // refused as any frame there (`walk`), whatever the map shows.
        if in_lost_span(s, s.ip) {
            self.stats.frames_in_lost_maps += 1;
            return unmapped_at_ip(s);
        }
        let Some(p) = self.procs.get(&owner).filter(|p| p.covers(s.ip)) else {
            self.stats.maps_unavailable += 1;
            return unmapped_at_ip(s);
        };
        if !self.caches.contains_key(&owner) && self.caches.len() >= MAX_RULE_CACHES {
            for (_, c) in std::mem::take(&mut self.caches) {
                self.cache_lookups = add_lookups(self.cache_lookups, &c);
            }
        }
        let cache = self.caches.entry(owner).or_default();
        let mut w = walk(p, cache, s, owner);
        // A frame in no mapping known: code mapped since the map was read
        // (a library loaded late, a JIT's code cache grown). Read it again,
        // at most once per batch of samples; not for a refused frame, which
        // /proc would name after what is mapped there now.
        let outside = |frames: &[FrameLoc]| {
            frames
                .iter()
                .any(|f| matches!(f, FrameLoc::Unmapped { mapping: None, .. }))
        };
        if !w.refused
            && outside(&w.frames)
            && self.reread.insert(owner)
            && let Ok(mappings) = maps::read(owner)
        {
            self.reread(owner, mappings);
            if let Some(p) = self.procs.get(&owner) {
                let cache = self.caches.entry(owner).or_default();
                w = walk(p, cache, s, owner);
            }
        }
        let Walked {
            mut frames,
            fps,
            truncated,
            refused,
        } = w;
        self.stats.frames_in_lost_maps += u64::from(refused);
        let paths = std::mem::take(&mut self.modules.paths);
        for r in self.namers_mut() {
            if r.knows(owner) {
                r.name_frames(owner, &mut frames, &fps, &|a| stack_word(s, a), &paths);
            }
        }
        self.modules.paths = paths;
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
}

/// `s` unwound no further than its own address, in no mapping known.
fn unmapped_at_ip(s: &StackSample) -> Unwound {
    Unwound {
        sample: s.without_stack(),
        stack: UnwoundStack {
            frames: vec![FrameLoc::Unmapped {
                addr: s.ip,
                mapping: None,
            }],
            truncated: false,
        },
    }
}

/// `(hits, all)` plus a rule cache's lookups.
fn add_lookups((hits, all): (u64, u64), cache: &CacheX86_64) -> (u64, u64) {
    let st = cache.stats();
    (hits + st.hit_count, all + st.total())
}

/// Walks the stack of `s` in process `p` (`owner`): its frames, whether it
/// was cut short, and whether it ended at a frame refused for lying where
/// the process's mapping changes were lost (`StackSample::maps_lost`: the
/// code there is not known, so neither is its name nor how to unwind past
/// it; the map kerntax holds may show the library before the change, a
/// read of /proc one loaded since).
fn walk(p: &Process, cache: &mut CacheX86_64, s: &StackSample, owner: u32) -> Walked {
    // Set when the unwinder wanted stack beyond the bytes copied: the one
    // way a stack is cut short rather than ended (a trampoline without
    // unwind info, like ld.so's _start or makecontext's, just ends it).
    let mut beyond_copy = false;
    let copied_end = s.sp + s.stack.len() as u64;
    let mut read_stack = |addr: u64| -> Result<u64, ()> {
        stack_word(s, addr).ok_or_else(|| {
            // Not copied: past the copy, or in a page never touched, which
            // holds no frame, so the unwinder asks for it only where it is
            // the loss.
            beyond_copy |= addr >= s.sp
                && (addr >= copied_end
                    || s.absent_pages != 0 && in_absent_page(s.sp, s.absent_pages, addr));
        })
    };
    // framehop's iterator, stepped by hand to keep each frame's frame
    // pointer (what a JVM's interpreter frame is read from).
    let mut regs = UnwindRegsX86_64::new(s.ip, s.sp, s.bp);
    let mut frame = FrameAddress::InstructionPointer(s.ip);
    let mut w = Walked::default();
    loop {
        if w.frames.len() == MAX_FRAMES {
            w.truncated = true;
            break;
        }
        let addr = frame.address_for_lookup();
        let lost = in_lost_span(s, addr);
        w.frames.push(if lost {
            FrameLoc::Unmapped {
                addr,
                mapping: None,
            }
        } else {
            locate(&p.regions, owner, frame)
        });
        w.fps.push(regs.bp());
        if lost {
            w.refused = true;
            break;
        }
        match p
            .unwinder
            .unwind_frame(frame, &mut regs, cache, &mut read_stack)
        {
            Ok(Some(ra)) => match FrameAddress::from_return_address(ra) {
                Some(next) => frame = next,
                None => break,
            },
            _ => break,
        }
    }
    w.truncated |= beyond_copy;
    w
}

/// A walked stack: its frames, each one's frame pointer, whether it was
/// cut short, and whether it ended at a frame refused (`walk`).
#[derive(Default)]
pub(super) struct Walked {
    pub(super) frames: Vec<FrameLoc>,
    pub(super) fps: Vec<u64>,
    pub(super) truncated: bool,
    pub(super) refused: bool,
}

/// The word at `addr` in the stack copied with `s`, if copied.
fn stack_word(s: &StackSample, addr: u64) -> Option<u64> {
    let off = usize::try_from(addr.checked_sub(s.sp)?).ok()?;
    if s.absent_pages != 0 && in_absent_page(s.sp, s.absent_pages, addr) {
        return None;
    }
    let b = s.stack.get(off..off.checked_add(8)?)?;
    Some(u64::from_ne_bytes(b.try_into().ok()?))
}

/// Whether `addr` lies where the mapping changes of the process of `s`
/// were lost when it was taken (`StackSample::maps_lost`).
pub(super) fn in_lost_span(s: &StackSample, addr: u64) -> bool {
    s.maps_lost.is_some_and(|(lo, hi)| (lo..hi).contains(&addr))
}

/// Whether any of the 8 bytes at `addr` lies in a page of a stack copied
/// from `sp` that could not be read (`absent`: bit 0 the page of sp).
fn in_absent_page(sp: u64, absent: u8, addr: u64) -> bool {
    let page_of = |a: u64| (a & !4095).wrapping_sub(sp & !4095) / 4096;
    [page_of(addr), page_of(addr + 7)]
        .iter()
        .any(|&p| p < 8 && absent & (1 << p) != 0)
}

/// The frame at `frame` in process `pid`: in a module, in a JIT's
/// anonymous code, or in no file kerntax can read.
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
    use framehop::x86_64::UnwinderX86_64;

    /// A frame where its process's mapping changes were lost is not named
    /// from the map kerntax holds (which may show the library before the
    /// change): it is `[unknown]` and the walk ends there; one outside the
    /// span, or a sample without one, is located as ever.
    #[test]
    fn a_frame_where_mapping_changes_were_lost_is_refused() {
        let p = Process {
            regions: vec![Region {
                start: 0x1000,
                end: 0x3000,
                module: None,
                name: Some("/lib/libold.so".into()),
            }],
            unwinder: UnwinderX86_64::new(),
        };
        let mut cache = CacheX86_64::new();
        let mut s = StackSample::at(0x1800, 0x7ffd_0000);
        s.maps_lost = Some((0x1000, 0x2000));
        let Walked {
            frames, refused, ..
        } = walk(&p, &mut cache, &s, 7);
        assert!(refused);
        assert_eq!(
            frames,
            vec![FrameLoc::Unmapped {
                addr: 0x1800,
                mapping: None
            }]
        );
        for lost in [Some((0x2000, 0x3000)), None] {
            s.maps_lost = lost;
            let Walked {
                frames, refused, ..
            } = walk(&p, &mut cache, &s, 7);
            assert!(!refused, "{lost:?}");
            assert_eq!(
                frames.first(),
                Some(&FrameLoc::Unmapped {
                    addr: 0x1800,
                    mapping: Some("/lib/libold.so".into())
                }),
                "{lost:?}"
            );
        }
    }

    /// Issue 35: a read lands in a page that could not be copied, or not.
    #[test]
    fn reads_in_pages_that_could_not_be_copied_are_refused() {
        let sp = 0x7ffd_0ff0;
        // sp's page absent: its last 16 bytes; the next page was copied.
        assert!(in_absent_page(sp, 0b01, sp));
        assert!(in_absent_page(sp, 0b01, 0x7ffd_0ff8 + 1), "straddles");
        assert!(!in_absent_page(sp, 0b01, 0x7ffd_1000));
        // Only the second page absent.
        assert!(!in_absent_page(sp, 0b10, sp + 8));
        assert!(in_absent_page(sp, 0b10, 0x7ffd_1ff8));
        assert!(!in_absent_page(sp, 0b10, 0x7ffd_2000));
    }
}
