//! A file's PT_LOAD segments, and the load bias (runtime minus stated
//! address) of what a mapping of it maps.
//!
//! Why its own module: a mapping names only its file offset, and segments
//! share file pages at their borders. A small program's read-only data and
//! its data segment begin in one page (every lab program: `.rodata` at file
//! offset 0x2000, the data segment at 0x2dc0), so the data mapping as the
//! kernel maps it at exec, and its RELRO page after ld.so's mprotect, start
//! at an offset two segments begin in; taken as the first, a lock variable
//! there was named from an address 0x1000 off. ld.so and the kernel load
//! every segment of a file at one bias, so another mapping of the same file
//! settles it (`load_bias`).

use super::maps::Mapping;

/// One PT_LOAD segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub offset: u64,
    pub vaddr: u64,
    pub file_size: u64,
    pub executable: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Segments(pub Vec<Segment>);

fn page(off: u64) -> u64 {
    off & !0xfff
}

impl Segments {
    /// The segments `m` may start in: those beginning in the file page it
    /// starts at, of its own executability when any is; else (a mapping
    /// split by mprotect, like RELRO) the last one beginning before it and
    /// reaching into it. Containment alone would pick the wrong one at a
    /// shared border page.
    fn candidates(&self, m: &Mapping) -> Vec<&Segment> {
        let starting: Vec<&Segment> = self
            .0
            .iter()
            .filter(|s| page(s.offset) == m.offset)
            .collect();
        if !starting.is_empty() {
            let same: Vec<&Segment> = starting
                .iter()
                .copied()
                .filter(|s| s.executable == m.executable)
                .collect();
            return if same.is_empty() { starting } else { same };
        }
        self.0
            .iter()
            .filter(|s| {
                page(s.offset) <= m.offset && m.offset < s.offset.saturating_add(s.file_size)
            })
            .max_by_key(|s| s.offset)
            .into_iter()
            .collect()
    }

    fn bias_from(m: &Mapping, s: &Segment) -> u64 {
        let svma_at_start = s.vaddr.wrapping_sub(s.offset).wrapping_add(m.offset);
        m.start.wrapping_sub(svma_at_start)
    }

    /// The bias of what `m` maps, from the first segment it may start in.
    /// The unwinder's: an executable mapping's segment is its file's only
    /// executable one beginning in that page.
    pub fn bias(&self, m: &Mapping) -> Option<u64> {
        self.candidates(m).first().map(|s| Self::bias_from(m, s))
    }

    /// The bias of what `m` maps, `maps` being every mapping of its process:
    /// where `m` may start in more than one segment, that of another mapping
    /// of the same file that starts in one only. None when no mapping does:
    /// no name is better than a wrong one.
    pub fn load_bias(&self, m: &Mapping, maps: &[Mapping]) -> Option<u64> {
        let sole = |o: &Mapping| match self.candidates(o)[..] {
            [s] => Some(Self::bias_from(o, s)),
            _ => None,
        };
        match self.candidates(m)[..] {
            [] => None,
            [s] => Some(Self::bias_from(m, s)),
            _ => maps
                .iter()
                .filter(|o| o.dev == m.dev && o.inode == m.inode && o.path == m.path)
                .find_map(sole),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lab's icinga_namespace as `readelf -l` shows it (gcc 12, Debian
    /// 12): four PT_LOAD, `.rodata`'s and the data segment's in one page.
    fn lab_program() -> Segments {
        let seg = |offset, vaddr, file_size, executable| Segment {
            offset,
            vaddr,
            file_size,
            executable,
        };
        Segments(vec![
            seg(0x0, 0x0, 0xa88, false),
            seg(0x1000, 0x1000, 0x929, true),
            seg(0x2000, 0x2000, 0x364, false),
            seg(0x2dc0, 0x3dc0, 0x2c8, false),
        ])
    }

    const BASE: u64 = 0x5555_5555_4000;

    fn mapping(start: u64, end: u64, offset: u64, executable: bool) -> Mapping {
        Mapping {
            start: BASE + start,
            end: BASE + end,
            offset,
            executable,
            dev: 0x800001,
            inode: 42,
            path: Some("/usr/bin/icinga_namespace".into()),
        }
    }

    /// The process's map once ld.so has run: the data segment split at its
    /// RELRO page.
    fn relocated() -> Vec<Mapping> {
        vec![
            mapping(0x0, 0x1000, 0x0, false),
            mapping(0x1000, 0x2000, 0x1000, true),
            mapping(0x2000, 0x3000, 0x2000, false),
            mapping(0x3000, 0x4000, 0x2000, false),
            mapping(0x4000, 0x5000, 0x3000, false),
        ]
    }

    #[test]
    fn each_mapping_of_a_file_gets_its_one_load_bias() {
        let segs = lab_program();
        let maps = relocated();
        for m in &maps {
            assert_eq!(segs.load_bias(m, &maps), Some(BASE), "{m:?}");
        }
        // Text, .rodata (the first segment in its page) and the split-off
        // .data: the unwinder's bias is right for them too.
        for m in [&maps[0], &maps[1], &maps[2], &maps[4]] {
            assert_eq!(segs.bias(m), Some(BASE), "{m:?}");
        }
    }

    /// The RELRO page, and the data segment as mapped at exec (before
    /// ld.so's mprotect split it), start in the page `.rodata` begins in:
    /// taken from `.rodata`'s segment their bias was 0x1000 off, and the
    /// lab's `g_namespace_lock` (0x4160) was looked up at 0x3160.
    #[test]
    fn a_data_mapping_starting_in_a_shared_page_takes_the_files_bias() {
        let segs = lab_program();
        let relro = &relocated()[3];
        assert_eq!(segs.bias(relro), Some(BASE + 0x1000));
        assert_eq!(segs.load_bias(relro, &relocated()), Some(BASE));
        let at_exec = vec![
            mapping(0x0, 0x1000, 0x0, false),
            mapping(0x1000, 0x2000, 0x1000, true),
            mapping(0x2000, 0x3000, 0x2000, false),
            mapping(0x3000, 0x5000, 0x2000, false),
        ];
        assert_eq!(segs.load_bias(&at_exec[3], &at_exec), Some(BASE));
    }

    /// With no other mapping of the file to settle it, an ambiguous
    /// mapping has no bias rather than a guess.
    #[test]
    fn an_ambiguous_mapping_alone_has_no_load_bias() {
        let segs = lab_program();
        let relro = relocated()[3].clone();
        assert_eq!(segs.load_bias(&relro, std::slice::from_ref(&relro)), None);
        // Nor is another file's mapping taken for it.
        let mut other = relocated()[0].clone();
        other.inode = 43;
        assert_eq!(segs.load_bias(&relro, &[relro.clone(), other]), None);
    }

    /// The lab program itself, as built here: mapped as the kernel maps it
    /// at exec, every mapping gets the file's bias, and its lock variable
    /// is named from the data mapping.
    #[test]
    fn the_lab_programs_lock_is_named_from_its_data_mapping_at_exec() {
        use object::{Object, ObjectSymbol};
        let path = concat!(env!("KERNTAX_LAB_DIR"), "/icinga_namespace");
        let elf = crate::stacks::elf::ElfFile::open(path).unwrap();
        let bytes = std::fs::read(path).unwrap();
        let obj = object::File::parse(&*bytes).unwrap();
        let lock = obj
            .symbols()
            .find(|s| s.name() == Ok("g_namespace_lock"))
            .unwrap()
            .address();
        let segs = &elf.segments().0;
        let up = |a: u64| (a + 0xfff) & !0xfff;
        let maps: Vec<Mapping> = segs
            .iter()
            .map(|s| Mapping {
                start: BASE + page(s.vaddr),
                end: BASE + up(s.vaddr + s.file_size),
                offset: page(s.offset),
                executable: s.executable,
                dev: 1,
                inode: 1,
                path: Some(path.into()),
            })
            .collect();
        // The premise: two segments begin in one page (gcc 12 and binutils
        // 2.40, Debian 12's).
        let pages: std::collections::HashSet<u64> = segs.iter().map(|s| page(s.offset)).collect();
        assert!(pages.len() < segs.len(), "{segs:?}");
        for m in &maps {
            assert_eq!(elf.load_bias(m, &maps), Some(BASE), "{m:?}");
        }
        let data = maps.last().unwrap();
        let svma = (BASE + lock) - elf.load_bias(data, &maps).unwrap();
        assert_eq!(elf.data_symbol(svma), Some(("g_namespace_lock", 0)));
        assert_ne!(
            elf.data_symbol((BASE + lock) - elf.bias(data).unwrap()),
            Some(("g_namespace_lock", 0))
        );
    }

    /// Older linkers put code and data in two segments, the data's
    /// beginning in the last page of the code's: each mapping's own
    /// executability tells them apart.
    #[test]
    fn executability_tells_apart_two_segments_in_one_page() {
        let segs = Segments(vec![
            Segment {
                offset: 0,
                vaddr: 0x400000,
                file_size: 0x7dc,
                executable: true,
            },
            Segment {
                offset: 0xe10,
                vaddr: 0x600e10,
                file_size: 0x230,
                executable: false,
            },
        ]);
        let text = Mapping {
            start: 0x400000,
            end: 0x401000,
            offset: 0,
            executable: true,
            dev: 1,
            inode: 1,
            path: Some("/old".into()),
        };
        let data = Mapping {
            start: 0x600000,
            executable: false,
            ..text.clone()
        };
        let maps = [text.clone(), data.clone()];
        assert_eq!(segs.bias(&text), Some(0));
        assert_eq!(segs.bias(&data), Some(0));
        assert_eq!(segs.load_bias(&data, &maps), Some(0));
    }
}
