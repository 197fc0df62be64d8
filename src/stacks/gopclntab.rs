//! Go's own table of functions (`.gopclntab`): the names of a Go binary's
//! functions where no symbol table is left.
//!
//! Why: Go binaries as distributions ship them are stripped (Debian's
//! caddy, etcd, rclone: no `.symtab`, no DWARF), yet every one carries the
//! table the Go runtime itself reads for its tracebacks, with each
//! function's entry and name. Without it every Go frame reads
//! `binary+0x…`, the runtime's own parking among them.
//!
//! Read here: Go 1.16 and later (the header's magic says which layout:
//! 1.16-1.17, 1.18-1.19, 1.20 and later), names only (the table's file and
//! line programs are not decoded; inlined calls are not split out). The
//! text start (1.18 and later) is the header's: with external linking the
//! C runtime's code comes first in `.text` (Debian's caddy: Go's text at
//! 0x4035e0, `.text` at 0x4034e0, and names off by one function taken from
//! the section, as Go 1.26's `go tool addr2line` gives them); the
//! section's address only where the header's is zero (a position-
//! independent binary's, left to its relocation).

use std::ops::Range;

use memmap2::Mmap;
use object::{Object, ObjectSection};

/// The header's magic of each layout read here.
const MAGIC_GO116: u32 = 0xffff_fffa;
const MAGIC_GO118: u32 = 0xffff_fff0;
const MAGIC_GO120: u32 = 0xffff_fff1;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    /// Go 1.16-1.17: function entries are addresses.
    Go116,
    /// Go 1.18 and later: entries are 32-bit offsets from the text start.
    Go118,
}

/// A Go binary's function table, over the file's bytes.
pub struct GoFuncs {
    map: Mmap,
    tab: Range<usize>,
    layout: Layout,
    ptr: usize,
    nfunc: usize,
    funcnames: usize,
    functab: usize,
    text_start: u64,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn uptr_at(b: &[u8], at: usize, ptr: usize) -> Option<u64> {
    match ptr {
        8 => Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?)),
        4 => u32_at(b, at).map(u64::from),
        _ => None,
    }
}

/// The layout, pointer size, (nfunc, funcnametab, functab) offsets and
/// text start (0: none stated) of a table, from its header; None for
/// layouts not read here.
fn header(tab: &[u8]) -> Option<(Layout, usize, [usize; 3], u64)> {
    let layout = match u32_at(tab, 0)? {
        MAGIC_GO116 => Layout::Go116,
        MAGIC_GO118 | MAGIC_GO120 => Layout::Go118,
        _ => return None,
    };
    let ptr = usize::from(*tab.get(7)?);
    if ptr != 4 && ptr != 8 {
        return None;
    }
    let field =
        |i: usize| -> Option<usize> { usize::try_from(uptr_at(tab, 8 + i * ptr, ptr)?).ok() };
    // Go 1.18 added the text start after nfiles: every later field moves.
    let skip = usize::from(layout == Layout::Go118);
    let nfunc = field(0)?;
    let funcnames = field(2 + skip)?;
    let functab = field(6 + skip)?;
    let text = if layout == Layout::Go118 {
        uptr_at(tab, 8 + 2 * ptr, ptr)?
    } else {
        0
    };
    Some((layout, ptr, [nfunc, funcnames, functab], text))
}

impl GoFuncs {
    /// The table of the ELF file at `path`, if it is a Go binary whose
    /// table this reads.
    pub fn open(path: &str) -> Option<GoFuncs> {
        let file = std::fs::File::open(path).ok()?;
        // SAFETY: the file is mapped read-only; a binary rewritten while
        // mapped is the same risk blazesym's own mappings take.
        let map = unsafe { Mmap::map(&file) }.ok()?;
        let (tab, text_start) = {
            let obj = object::File::parse(&*map).ok()?;
            let (off, len) = obj.section_by_name(".gopclntab")?.file_range()?;
            let text = obj.section_by_name(".text")?.address();
            let start = usize::try_from(off).ok()?;
            (start..start.checked_add(usize::try_from(len).ok()?)?, text)
        };
        Self::from_parts(map, tab, text_start)
    }

    fn from_parts(map: Mmap, tab: Range<usize>, text_section: u64) -> Option<GoFuncs> {
        let bytes = map.get(tab.clone())?;
        let (layout, ptr, [nfunc, funcnames, functab], stated) = header(bytes)?;
        let text_start = if stated != 0 { stated } else { text_section };
        let g = GoFuncs {
            map,
            tab,
            layout,
            ptr,
            nfunc,
            funcnames,
            functab,
            text_start,
        };
        // The table's end entry must be inside it.
        g.entry(nfunc)?;
        Some(g)
    }

    fn bytes(&self) -> &[u8] {
        &self.map[self.tab.clone()]
    }

    fn entry_size(&self) -> usize {
        match self.layout {
            Layout::Go116 => 2 * self.ptr,
            Layout::Go118 => 8,
        }
    }

    /// Function `i`'s entry address and its `_func`'s offset in the table
    /// (`i == nfunc`: the end of the last function, offset 0).
    fn entry(&self, i: usize) -> Option<(u64, usize)> {
        let b = self.bytes();
        let at = self
            .functab
            .checked_add(i.checked_mul(self.entry_size())?)?;
        match self.layout {
            Layout::Go116 => {
                let entry = uptr_at(b, at, self.ptr)?;
                let func = if i < self.nfunc {
                    uptr_at(b, at + self.ptr, self.ptr)?
                } else {
                    0
                };
                Some((entry, usize::try_from(func).ok()?))
            }
            Layout::Go118 => {
                let entry = self.text_start.checked_add(u64::from(u32_at(b, at)?))?;
                let func = if i < self.nfunc {
                    u32_at(b, at + 4)?
                } else {
                    0
                };
                Some((entry, func as usize))
            }
        }
    }

    /// The name of the function holding `addr`.
    pub fn name(&self, addr: u64) -> Option<&str> {
        let (first, _) = self.entry(0)?;
        let (end, _) = self.entry(self.nfunc)?;
        if addr < first || addr >= end || self.nfunc == 0 {
            return None;
        }
        // The last function whose entry is at or below addr.
        let (mut lo, mut hi) = (0, self.nfunc);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mid)?.0 <= addr {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let (_, func) = self.entry(lo)?;
        let b = self.bytes();
        let at = self.functab.checked_add(func)?;
        let name_off = match self.layout {
            Layout::Go116 => u32_at(b, at + self.ptr)?,
            Layout::Go118 => u32_at(b, at + 4)?,
        };
        let start = self.funcnames.checked_add(name_off as usize)?;
        let rest = b.get(start..)?;
        let len = rest.iter().position(|&c| c == 0)?;
        std::str::from_utf8(&rest[..len])
            .ok()
            .filter(|s| !s.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of two functions, `main.a` at 0x1000 and `runtime.park` at
    /// 0x1040, ending at 0x1080, in the 1.18 layout (offsets from a text
    /// start of 0x1000) or the 1.16 one (addresses).
    fn table(layout: Layout) -> Vec<u8> {
        let ptr = 8usize;
        let fields = if layout == Layout::Go118 { 8 } else { 7 };
        let header_len = 8 + fields * ptr;
        let names = b"main.a\0runtime.park\0";
        let funcnames = header_len;
        let functab = funcnames + names.len();
        let entry_size = if layout == Layout::Go118 { 8 } else { 16 };
        // Two _func records after the three entries.
        let funcs = 3 * entry_size;
        let func_len = 16;
        let mut t = vec![0u8; functab + funcs + 2 * func_len];
        let magic = if layout == Layout::Go118 {
            MAGIC_GO120
        } else {
            MAGIC_GO116
        };
        t[0..4].copy_from_slice(&magic.to_le_bytes());
        t[6] = 1;
        t[7] = ptr as u8;
        let put =
            |t: &mut Vec<u8>, at: usize, v: u64| t[at..at + 8].copy_from_slice(&v.to_le_bytes());
        put(&mut t, 8, 2); // nfunc
        let skip = usize::from(layout == Layout::Go118);
        put(&mut t, 8 + (2 + skip) * ptr, funcnames as u64);
        put(&mut t, 8 + (6 + skip) * ptr, functab as u64);
        t[funcnames..funcnames + names.len()].copy_from_slice(names);
        for (i, (entry, name_off)) in [(0x1000u64, 0u32), (0x1040, 7), (0x1080, 0)]
            .iter()
            .enumerate()
        {
            let func = (funcs + i * func_len) as u64;
            let at = functab + i * entry_size;
            if layout == Layout::Go118 {
                t[at..at + 4].copy_from_slice(&((entry - 0x1000) as u32).to_le_bytes());
                if i < 2 {
                    t[at + 4..at + 8].copy_from_slice(&(func as u32).to_le_bytes());
                    let f = functab + func as usize;
                    t[f + 4..f + 8].copy_from_slice(&name_off.to_le_bytes());
                }
            } else {
                put(&mut t, at, *entry);
                if i < 2 {
                    put(&mut t, at + 8, func);
                    let f = functab + func as usize;
                    t[f + 8..f + 12].copy_from_slice(&name_off.to_le_bytes());
                }
            }
        }
        t
    }

    fn funcs(bytes: &[u8]) -> Option<GoFuncs> {
        let mut m = memmap2::MmapMut::map_anon(bytes.len()).unwrap();
        m.copy_from_slice(bytes);
        GoFuncs::from_parts(m.make_read_only().unwrap(), 0..bytes.len(), 0x1000)
    }

    #[test]
    fn the_headers_text_start_wins_over_the_sections() {
        let mut t = table(Layout::Go118);
        t[8 + 16..8 + 24].copy_from_slice(&0x1000u64.to_le_bytes());
        let mut m = memmap2::MmapMut::map_anon(t.len()).unwrap();
        m.copy_from_slice(&t);
        // The section starts 0x100 earlier (C code first).
        let g = GoFuncs::from_parts(m.make_read_only().unwrap(), 0..t.len(), 0xf00).unwrap();
        assert_eq!(g.name(0x1040), Some("runtime.park"));
        assert_eq!(g.name(0xf40), None);
    }

    #[test]
    fn names_come_from_either_layout_and_nothing_outside_the_text() {
        for layout in [Layout::Go118, Layout::Go116] {
            let g = funcs(&table(layout)).expect("a table");
            assert_eq!(g.name(0x1000), Some("main.a"), "{layout:?}");
            assert_eq!(g.name(0x103f), Some("main.a"), "{layout:?}");
            assert_eq!(g.name(0x1040), Some("runtime.park"), "{layout:?}");
            assert_eq!(g.name(0x107f), Some("runtime.park"), "{layout:?}");
            assert_eq!(g.name(0x1080), None, "{layout:?}");
            assert_eq!(g.name(0xfff), None, "{layout:?}");
        }
    }

    #[test]
    fn a_table_of_another_layout_or_cut_short_is_none_not_a_panic() {
        let mut t = table(Layout::Go118);
        t[0..4].copy_from_slice(&0xffff_fffbu32.to_le_bytes());
        assert!(funcs(&t).is_none());
        let t = table(Layout::Go118);
        for len in [0, 4, 8, 40, t.len() / 2] {
            let _ = funcs(&t[..len]).map(|g| g.name(0x1040).map(str::to_string));
        }
        let mut t = table(Layout::Go116);
        t[7] = 3;
        assert!(funcs(&t).is_none());
    }
}
