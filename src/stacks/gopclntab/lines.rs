//! A Go function's files and lines, and the calls inlined into it, at one
//! address: what the Go runtime's own traceback reads (`funcline1`,
//! `pcvalue`, the inline unwinder), read from the file.
//!
//! Why here and not in DWARF: a stripped Go binary keeps no DWARF, but its
//! `_func` records keep pc-value programs (a value per range of addresses:
//! the file number, the line, the index into the inline tree) because the
//! runtime needs them to print a panic's stack. Inlined calls matter in
//! Go: the compiler inlines small functions by default, so the innermost
//! function at an address (the one whose line the tables give) is often
//! not the one the entry table names.

use super::{GoFuncs, Layout, c_str, u32_at};

/// The `pcdata` table of the inline tree's index, and the `funcdata` of
/// the tree (Go's `PCDATA_InlTreeIndex`, `FUNCDATA_InlTree`).
const PCDATA_INL_TREE_INDEX: usize = 2;
const FUNCDATA_INL_TREE: usize = 3;

/// Inlined calls followed outward from one address at most: a deeper
/// chain is a corrupt table (a loop), not a program.
const MAX_INLINED: usize = 64;

/// One frame at an address, innermost first: the function, its file and
/// line there, and whether the compiler inlined it into the next one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoFrame<'a> {
    pub name: &'a str,
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    pub inlined: bool,
}

/// A `_func` record's fields that are read here.
struct Func {
    entry: u64,
    name_off: u32,
    pcfile: u32,
    pcln: u32,
    cu_offset: u32,
    /// Where its `pcdata` offsets begin (in the table), and how many.
    pcdata: usize,
    npcdata: u32,
    /// Where its `funcdata` offsets begin, and how many.
    funcdata: usize,
    nfuncdata: u8,
}

/// An unsigned LEB128 value of at most 32 bits at `at`, and its length.
pub(super) fn varint(b: &[u8], at: usize) -> Option<(u32, usize)> {
    let mut v: u32 = 0;
    for i in 0..5 {
        let byte = *b.get(at.checked_add(i)?)?;
        v |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

impl GoFuncs {
    fn func(&self, entry: u64, at: usize) -> Option<Func> {
        let b = self.bytes();
        let u = |off: usize| u32_at(b, at.checked_add(off)?);
        // Go 1.16's entry is a pointer; later ones a 32-bit offset. Go
        // 1.20 put the start line before funcID, flag, pad and nfuncdata.
        let base = match self.layout {
            Layout::Go116 => self.ptr,
            _ => 4,
        };
        let (nfuncdata_at, size) = match self.layout {
            Layout::Go116 | Layout::Go118 => (base + 35, base + 36),
            Layout::Go120 => (base + 39, base + 40),
        };
        let npcdata = u(base + 24)?;
        let pcdata = at.checked_add(size)?;
        let funcdata = pcdata.checked_add(npcdata as usize * 4)?;
        Some(Func {
            entry,
            name_off: u(base)?,
            pcfile: u(base + 16)?,
            pcln: u(base + 20)?,
            cu_offset: u(base + 28)?,
            pcdata,
            npcdata,
            funcdata,
            nfuncdata: *b.get(at.checked_add(nfuncdata_at)?)?,
        })
    }

    /// The value of the pc-value program at `off` of `pctab` for `target`
    /// in the function entered at `entry` (Go's `pcvalue`); None where the
    /// function has no such program or it does not cover `target`.
    fn pcvalue(&self, off: u32, entry: u64, target: u64) -> Option<i32> {
        if off == 0 {
            return None;
        }
        let b = self.bytes();
        let mut p = self.tabs.pctab.checked_add(off as usize)?;
        let (mut pc, mut val) = (entry, -1i32);
        let mut first = true;
        loop {
            let (uv, n) = varint(b, p)?;
            if uv == 0 && !first {
                return None;
            }
            p += n;
            // Zig-zag: the low bit is the sign.
            let delta = (0u32.wrapping_sub(uv & 1) ^ (uv >> 1)) as i32;
            val = val.wrapping_add(delta);
            let (pcd, n) = varint(b, p)?;
            p += n;
            pc = pc.checked_add(u64::from(pcd).checked_mul(self.quantum)?)?;
            if target < pc {
                return Some(val);
            }
            first = false;
        }
    }

    /// The file and line of `f` at `pc` (Go's `funcline1`).
    fn file_line(&self, f: &Func, pc: u64) -> (Option<&str>, Option<u32>) {
        let line = self
            .pcvalue(f.pcln, f.entry, pc)
            .and_then(|l| u32::try_from(l).ok());
        let file = self
            .pcvalue(f.pcfile, f.entry, pc)
            .and_then(|n| u32::try_from(n).ok())
            .and_then(|n| {
                let cu = self.tabs.cutab.checked_add(
                    (f.cu_offset as usize)
                        .checked_add(n as usize)?
                        .checked_mul(4)?,
                )?;
                let off = u32_at(self.bytes(), cu)?;
                (off != u32::MAX)
                    .then(|| c_str(self.bytes(), self.tabs.filetab.checked_add(off as usize)?))?
            });
        (file, line)
    }

    /// The inline tree's index at `pc` (negative or None: no inlined call).
    fn inl_index(&self, f: &Func, pc: u64) -> Option<usize> {
        if f.npcdata as usize <= PCDATA_INL_TREE_INDEX {
            return None;
        }
        let at = f.pcdata.checked_add(PCDATA_INL_TREE_INDEX * 4)?;
        let off = u32_at(self.bytes(), at)?;
        usize::try_from(self.pcvalue(off, f.entry, pc)?).ok()
    }

    /// Where in the file `f`'s inline tree is (Go 1.18 and later).
    fn inl_tree(&self, f: &Func) -> Option<usize> {
        if self.layout == Layout::Go116 || usize::from(f.nfuncdata) <= FUNCDATA_INL_TREE {
            return None;
        }
        let off = u32_at(self.bytes(), f.funcdata.checked_add(FUNCDATA_INL_TREE * 4)?)?;
        (off != u32::MAX).then_some(())?;
        self.gofunc?.checked_add(off as usize)
    }

    /// Inlined call `ix` of the tree at `tree` (a file offset): its name's
    /// offset and the offset from the entry of an address at its call.
    fn inlined_call(&self, tree: usize, ix: usize) -> Option<(u32, u32)> {
        let (size, name, parent_pc) = match self.layout {
            // parent int16, funcID, pad, file, line, func_, parentPc
            Layout::Go118 => (20, 12, 16),
            // funcID, pad[3], nameOff, parentPc, startLine
            _ => (16, 4, 8),
        };
        let at = tree.checked_add(ix.checked_mul(size)?)?;
        let u = |off: usize| u32_at(&self.map, at.checked_add(off)?);
        Some((u(name)?, u(parent_pc)?))
    }

    /// The frames at `addr`, innermost first: the calls inlined there
    /// (where the inline tree could be read), then the function itself.
    /// None where no Go function holds `addr`.
    pub fn frames(&self, addr: u64) -> Option<Vec<GoFrame<'_>>> {
        let (entry, at) = self.func_at(addr)?;
        let f = self.func(entry, at)?;
        let mut out = Vec::new();
        let mut pc = addr;
        if let Some(tree) = self.inl_tree(&f) {
            while let Some(ix) = self.inl_index(&f, pc) {
                let Some((name_off, parent_pc)) = self.inlined_call(tree, ix) else {
                    break;
                };
                let Some(name) = self.func_name(name_off) else {
                    break;
                };
                let (file, line) = self.file_line(&f, pc);
                out.push(GoFrame {
                    name,
                    file,
                    line,
                    inlined: true,
                });
                pc = entry.checked_add(u64::from(parent_pc))?;
                if out.len() == MAX_INLINED {
                    break;
                }
            }
        }
        let (file, line) = self.file_line(&f, pc);
        out.push(GoFrame {
            name: self.func_name(f.name_off)?,
            file,
            line,
            inlined: false,
        });
        Some(out)
    }
}
