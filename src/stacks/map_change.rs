//! A process's memory map kept in the order of its samples: the changes of
//! its executable file mappings that BPF sends in ring order
//! (src/bpf/maps.bpf.h) are applied to the map kerntax holds, and a later
//! read of /proc/PID/maps only fills in around them.
//!
//! Why: /proc is read when a batch of samples is unwound, up to 100 ms after
//! they were taken. A library dlclose'd and another dlopen'ed at its address
//! in between had every sample of the first named in the second, with
//! nothing lost on record (tests/faults.rs). With the changes in ring order,
//! each sample is unwound against the executable file mappings it was taken
//! under; /proc (which may be ahead of the samples) still supplies what the
//! changes do not carry: anonymous executable memory (JIT code), data
//! mappings for naming lock addresses, and anything a lost change missed.

use super::maps::Mapping;
use crate::collect::events::ExitMapping;

/// An executable mapping of a file: the ones the changes keep exact.
fn tracked(m: &Mapping) -> bool {
    m.executable && m.inode != 0
}

/// The part of `m` inside `lo..hi`, its offset moved with its start; None
/// if they do not meet.
fn clip(m: &Mapping, lo: u64, hi: u64) -> Option<Mapping> {
    let (start, end) = (m.start.max(lo), m.end.min(hi));
    (start < end).then(|| Mapping {
        start,
        end,
        offset: if m.inode == 0 {
            m.offset
        } else {
            m.offset + (start - m.start)
        },
        ..m.clone()
    })
}

/// `maps` with nothing left in `start..end` (mappings across its edges are
/// cut there).
pub fn cut(maps: &[Mapping], start: u64, end: u64) -> Vec<Mapping> {
    let mut out = Vec::with_capacity(maps.len() + 1);
    for m in maps {
        if m.end <= start || m.start >= end {
            out.push(m.clone());
            continue;
        }
        out.extend(clip(m, m.start, start));
        out.extend(clip(m, end, m.end));
    }
    out
}

/// `known` after a change: `start..end` emptied, then `now` (whole
/// mappings) put in, clipped to the range; `path` names each by device and
/// inode. An unread change leaves the range empty; the kernel sends it
/// again, and until then the process's samples leave their frames there
/// unnamed (`StackSample::maps_lost`) rather than read /proc, which may
/// show what was mapped there since.
pub fn apply(
    known: &[Mapping],
    start: u64,
    end: u64,
    now: &[ExitMapping],
    mut path: impl FnMut(&ExitMapping) -> Option<String>,
) -> Vec<Mapping> {
    let mut out = cut(known, start, end);
    for e in now {
        let whole = Mapping {
            start: e.start,
            end: e.end,
            offset: e.offset,
            executable: e.executable,
            dev: e.dev,
            inode: e.inode,
            path: path(e),
        };
        out.extend(clip(&whole, start, end));
    }
    out.sort_by_key(|m| m.start);
    out
}

/// A fresh read of /proc merged into `known`, a map kept exact by the
/// changes: `known`'s executable file mappings stay (the read may be ahead
/// of the samples still to unwind: a library mapped since at the same
/// address); everything else comes from the read, cut around them.
pub fn fill_gaps(known: &[Mapping], fresh: &[Mapping]) -> Vec<Mapping> {
    let kept: Vec<&Mapping> = known.iter().filter(|m| tracked(m)).collect();
    let mut out: Vec<Mapping> = kept.iter().map(|m| (*m).clone()).collect();
    for f in fresh {
        // `f` minus the kept intervals (both sorted by start).
        let mut pieces = vec![f.clone()];
        for k in kept.iter().filter(|k| k.start < f.end && k.end > f.start) {
            pieces = pieces
                .iter()
                .flat_map(|p| [clip(p, p.start, k.start), clip(p, k.end, p.end)])
                .flatten()
                .collect();
        }
        out.extend(pieces);
    }
    out.sort_by_key(|m| m.start);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(start: u64, end: u64, offset: u64, inode: u64, exec: bool) -> Mapping {
        Mapping {
            start,
            end,
            offset,
            executable: exec,
            dev: 0x800_0001,
            inode,
            path: Some(format!("/lib/lib{inode}.so")),
        }
    }

    fn anon(start: u64, end: u64, exec: bool) -> Mapping {
        Mapping {
            start,
            end,
            offset: 0,
            executable: exec,
            dev: 0,
            inode: 0,
            path: None,
        }
    }

    fn change(start: u64, end: u64, offset: u64, inode: u64) -> ExitMapping {
        ExitMapping {
            start,
            end,
            offset,
            dev: 0x800_0001,
            inode,
            executable: true,
            heap: false,
        }
    }

    fn spans(maps: &[Mapping]) -> Vec<(u64, u64, u64, u64)> {
        maps.iter()
            .map(|m| (m.start, m.end, m.offset, m.inode))
            .collect()
    }

    #[test]
    fn a_cut_keeps_what_lies_outside_its_range_with_offsets_moved() {
        let maps = [
            file(0x1000, 0x5000, 0x0, 7, true),
            anon(0x6000, 0x8000, false),
        ];
        assert_eq!(
            spans(&cut(&maps, 0x2000, 0x3000)),
            [
                (0x1000, 0x2000, 0, 7),
                (0x3000, 0x5000, 0x2000, 7),
                (0x6000, 0x8000, 0, 0)
            ]
        );
        // A range over everything leaves nothing; one beside it, everything.
        assert!(cut(&maps, 0, 0x9000).is_empty());
        assert_eq!(cut(&maps, 0x5000, 0x6000), maps);
    }

    /// The fault test's case: library 1 unloaded, library 2 loaded where
    /// its code was; the samples between are named in library 1, the ones
    /// after in library 2.
    #[test]
    fn a_library_loaded_where_another_was_replaces_it_in_the_range_only() {
        let known = [
            file(0x1000, 0x2000, 0, 1, false),
            file(0x2000, 0x3000, 0x1000, 1, true),
            file(0x9000, 0xa000, 0x1000, 9, true),
        ];
        // dlclose: the whole reservation goes.
        let gone = apply(&known, 0x1000, 0x3000, &[], |_| None);
        assert_eq!(spans(&gone), [(0x9000, 0xa000, 0x1000, 9)]);
        // dlopen: its text mapped (the VMA reaches past the call's range,
        // merged with a neighbour: only the range is taken).
        let loaded = apply(
            &gone,
            0x2000,
            0x3000,
            &[change(0x2000, 0x4000, 0x1000, 2)],
            |e| Some(format!("/lib/lib{}.so", e.inode)),
        );
        assert_eq!(
            spans(&loaded),
            [(0x2000, 0x3000, 0x1000, 2), (0x9000, 0xa000, 0x1000, 9)]
        );
        assert_eq!(loaded[0].path.as_deref(), Some("/lib/lib2.so"));
        assert!(loaded[0].executable);
    }

    #[test]
    fn a_fresh_read_ahead_of_the_samples_does_not_replace_a_known_library() {
        // Known: library 1's text. The read already shows library 2 there
        // (loaded after samples still to unwind), a JIT region and data.
        let known = [
            file(0x2000, 0x3000, 0x1000, 1, true),
            anon(0x7000, 0x8000, false),
        ];
        let fresh = [
            file(0x1000, 0x2000, 0, 2, false),
            file(0x2000, 0x4000, 0x1000, 2, true),
            anon(0x7000, 0x8000, true),
        ];
        let merged = fill_gaps(&known, &fresh);
        assert_eq!(
            spans(&merged),
            [
                (0x1000, 0x2000, 0, 2),
                (0x2000, 0x3000, 0x1000, 1),
                (0x3000, 0x4000, 0x2000, 2),
                (0x7000, 0x8000, 0, 0),
            ]
        );
        // Anonymous memory is the read's: a JIT's pages made executable
        // since are executable now.
        assert!(merged[3].executable);
    }

    #[test]
    fn a_fresh_read_over_nothing_known_is_taken_whole() {
        let fresh = [file(0x1000, 0x2000, 0, 2, true), anon(0x3000, 0x4000, true)];
        assert_eq!(fill_gaps(&[], &fresh), fresh);
    }
}
