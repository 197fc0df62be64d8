//! Go's own table of functions (`.gopclntab`): the names, files and lines
//! of a Go binary's functions, its inlined calls split out, where no
//! symbol table or debug info is left.
//!
//! Why: Go binaries as distributions ship them are stripped (Debian's
//! caddy, etcd, rclone: no `.symtab`, no DWARF), yet every one carries the
//! table the Go runtime itself reads for its tracebacks: each function's
//! entry and name, and its pc-value programs for file and line. Without it
//! every Go frame reads `binary+0x…`, the runtime's own parking among them.
//!
//! Read here: Go 1.16 and later (the header's magic says which layout:
//! 1.16-1.17, 1.18-1.19, 1.20 and later). Files and lines come from the
//! function's pc-value programs (`lines.rs`); inlined calls from its inline
//! tree (Go 1.18 and later), found through the module's `moduledata`
//! (`moduledata.rs`), which also gives the text start where the header no
//! longer does (Go 1.26). The text start is otherwise the header's: with
//! external linking the C runtime's code comes first in `.text` (Debian's
//! caddy: Go's text at 0x4035e0, `.text` at 0x4034e0, and names off by one
//! function taken from the section, as Go 1.26's `go tool addr2line` gives
//! them); the section's address only where neither states it.

mod lines;
mod moduledata;

use std::ops::Range;

use memmap2::Mmap;
use object::{Object, ObjectSection};

pub use lines::GoFrame;

/// The header's magic of each layout read here.
const MAGIC_GO116: u32 = 0xffff_fffa;
const MAGIC_GO118: u32 = 0xffff_fff0;
const MAGIC_GO120: u32 = 0xffff_fff1;

/// The table's section: a position-independent build puts it among the
/// data relocated at load (Go 1.19's `-buildmode=pie`).
const SECTIONS: &[&str] = &[".gopclntab", ".data.rel.ro.gopclntab"];

#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
enum Layout {
    /// Go 1.16-1.17: function entries are addresses.
    Go116,
    /// Go 1.18-1.19: entries are 32-bit offsets from the text start.
    Go118,
    /// Go 1.20 and later: as 1.18, and `_func` states its start line.
    Go120,
}

/// The tables the header locates, as offsets into `.gopclntab`.
#[derive(Clone, Copy, Debug, Default)]
struct Tabs {
    funcnames: usize,
    cutab: usize,
    filetab: usize,
    pctab: usize,
    functab: usize,
}

/// A Go binary's function table, over the file's bytes.
pub struct GoFuncs {
    map: Mmap,
    tab: Range<usize>,
    layout: Layout,
    ptr: usize,
    quantum: u64,
    nfunc: usize,
    tabs: Tabs,
    text_start: u64,
    /// Where in the file the module's `go:func.*` data begins (inline
    /// trees): None where the module's data could not be found.
    gofunc: Option<usize>,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn uptr_at(b: &[u8], at: usize, ptr: usize) -> Option<u64> {
    match ptr {
        8 => Some(u64::from_le_bytes(
            b.get(at..at.checked_add(8)?)?.try_into().ok()?,
        )),
        4 => u32_at(b, at).map(u64::from),
        _ => None,
    }
}

/// The NUL-terminated string at `at` of `b`, if it is UTF-8 and not empty.
fn c_str(b: &[u8], at: usize) -> Option<&str> {
    let rest = b.get(at..)?;
    let len = rest.iter().position(|&c| c == 0)?;
    std::str::from_utf8(&rest[..len])
        .ok()
        .filter(|s| !s.is_empty())
}

/// What a table's header states.
#[derive(Clone, Copy, Debug)]
struct Header {
    layout: Layout,
    ptr: usize,
    /// Bytes per instruction step of the pc-value programs (`minLC`).
    quantum: u64,
    nfunc: usize,
    tabs: Tabs,
    /// The text start (0: none stated; Go 1.16, and Go 1.26 on).
    text: u64,
}

/// A table's header; None for layouts not read here.
fn header(tab: &[u8]) -> Option<Header> {
    let layout = match u32_at(tab, 0)? {
        MAGIC_GO116 => Layout::Go116,
        MAGIC_GO118 => Layout::Go118,
        MAGIC_GO120 => Layout::Go120,
        _ => return None,
    };
    let quantum = u64::from(*tab.get(6)?).max(1);
    let ptr = usize::from(*tab.get(7)?);
    if ptr != 4 && ptr != 8 {
        return None;
    }
    let field =
        |i: usize| -> Option<usize> { usize::try_from(uptr_at(tab, 8 + i * ptr, ptr)?).ok() };
    // Go 1.18 added the text start after nfiles: every later field moves.
    let skip = usize::from(layout >= Layout::Go118);
    let tabs = Tabs {
        funcnames: field(2 + skip)?,
        cutab: field(3 + skip)?,
        filetab: field(4 + skip)?,
        pctab: field(5 + skip)?,
        functab: field(6 + skip)?,
    };
    let text = if layout >= Layout::Go118 {
        uptr_at(tab, 8 + 2 * ptr, ptr)?
    } else {
        0
    };
    Some(Header {
        layout,
        ptr,
        quantum,
        nfunc: field(0)?,
        tabs,
        text,
    })
}

impl GoFuncs {
    /// The table of the ELF file at `path`, if it is a Go binary whose
    /// table this reads.
    pub fn open(path: &str) -> Option<GoFuncs> {
        let file = std::fs::File::open(path).ok()?;
        // SAFETY: the file is mapped read-only; a binary rewritten while
        // mapped is the same risk blazesym's own mappings take.
        let map = unsafe { Mmap::map(&file) }.ok()?;
        let (tab, h, text_section, module) = {
            let obj = object::File::parse(&*map).ok()?;
            let section = SECTIONS.iter().find_map(|n| obj.section_by_name(n))?;
            let (off, len) = section.file_range()?;
            let text = obj.section_by_name(".text")?.address();
            let start = usize::try_from(off).ok()?;
            let tab = start..start.checked_add(usize::try_from(len).ok()?)?;
            let h = header(map.get(tab.clone())?)?;
            let module = moduledata::find(&obj, &map, section.address(), &h);
            (tab, h, text, module)
        };
        // The header's text start, else the module's data's, else the
        // section's.
        let text_start = match (h.text, module) {
            (0, Some(m)) => m.text,
            (0, None) => text_section,
            (stated, _) => stated,
        };
        Self::with_header(map, tab, h, text_start, module.and_then(|m| m.gofunc))
    }

    /// The table over `tab` of `map`, its header read, the text start
    /// being the header's or else `text_section` (tests).
    #[cfg(test)]
    fn from_parts(map: Mmap, tab: Range<usize>, text_section: u64) -> Option<GoFuncs> {
        let h = header(map.get(tab.clone())?)?;
        let text_start = if h.text != 0 { h.text } else { text_section };
        Self::with_header(map, tab, h, text_start, None)
    }

    fn with_header(
        map: Mmap,
        tab: Range<usize>,
        h: Header,
        text_start: u64,
        gofunc: Option<usize>,
    ) -> Option<GoFuncs> {
        let g = GoFuncs {
            map,
            tab,
            layout: h.layout,
            ptr: h.ptr,
            quantum: h.quantum,
            nfunc: h.nfunc,
            tabs: h.tabs,
            text_start,
            gofunc,
        };
        // The table's end entry must be inside it.
        g.entry(g.nfunc)?;
        Some(g)
    }

    fn bytes(&self) -> &[u8] {
        &self.map[self.tab.clone()]
    }

    fn entry_size(&self) -> usize {
        match self.layout {
            Layout::Go116 => 2 * self.ptr,
            _ => 8,
        }
    }

    /// Function `i`'s entry address and its `_func`'s offset in the table
    /// (`i == nfunc`: the end of the last function, offset 0).
    fn entry(&self, i: usize) -> Option<(u64, usize)> {
        let b = self.bytes();
        let at = self
            .tabs
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
            _ => {
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

    /// The entry and the `_func`'s offset in the table of the function
    /// holding `addr`.
    fn func_at(&self, addr: u64) -> Option<(u64, usize)> {
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
        let (entry, func) = self.entry(lo)?;
        Some((entry, self.tabs.functab.checked_add(func)?))
    }

    /// The name at `off` of the function name table.
    fn func_name(&self, off: u32) -> Option<&str> {
        c_str(self.bytes(), self.tabs.funcnames.checked_add(off as usize)?)
    }

    /// The name of the function holding `addr`.
    pub fn name(&self, addr: u64) -> Option<&str> {
        let (_, func) = self.func_at(addr)?;
        let at = match self.layout {
            Layout::Go116 => func.checked_add(self.ptr)?,
            _ => func.checked_add(4)?,
        };
        let name_off = u32_at(self.bytes(), at)?;
        self.func_name(name_off)
    }
}

#[cfg(test)]
mod tests;
