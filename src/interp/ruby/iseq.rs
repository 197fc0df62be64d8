//! An instruction sequence (iseq) read from the target's memory: its label
//! (`work`, `block in <main>`), its file and its line table, which name a
//! Ruby frame as `label (file.rb:line)`. An iseq is an imemo object of the
//! iseq type; anything else at the address is refused, not named.

use std::io;

use super::layout::*;
use super::succ;
use crate::interp::memory::{Memory, i32_at, u32_at, u64_at};

/// Longest label or path read; longer is a damaged object.
const MAX_STR_BYTES: u64 = 4096;
/// More line-table entries than an iseq has (a body read wrongly).
const MAX_INSNS_INFO: u32 = 1 << 20;

/// An iseq, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iseq {
    pub label: String,
    pub path: String,
    pub first_line: i64,
    /// `iseq_encoded`: where its instructions start.
    pub encoded: u64,
    /// Instructions' size in VALUEs.
    pub size: u32,
    /// `insns_info`: the entries, their count, and how positions map to
    /// them (the succinct table, or a plain array of positions).
    insns_info: u64,
    insns_size: u32,
    succ_table: u64,
    positions: u64,
    /// The entry size of the layout it was read with.
    entry_bytes: u64,
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// A Ruby string's bytes (as text, invalid UTF-8 replaced).
pub fn string(mem: &dyn Memory, v: u64) -> io::Result<String> {
    let head = mem.read_vec(v, 32)?;
    let flags = u64_at(&head, 0).ok_or_else(|| bad("short string"))?;
    if flags & T_MASK != T_STRING {
        return Err(bad("not a String"));
    }
    let bytes = if flags & FL_USER1 == 0 {
        let len = (flags >> STR_EMBED_LEN_SHIFT) & STR_EMBED_LEN_MASK;
        head.get(STR_EMBED as usize..(STR_EMBED + len) as usize)
            .ok_or_else(|| bad("embedded string too long"))?
            .to_vec()
    } else {
        let len = u64_at(&head, STR_HEAP_LEN as usize).ok_or_else(|| bad("short string"))?;
        let ptr = u64_at(&head, STR_HEAP_PTR as usize).ok_or_else(|| bad("short string"))?;
        if len > MAX_STR_BYTES {
            return Err(bad("string too long"));
        }
        mem.read_vec(ptr, len as usize)?
    };
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// An iseq's path: its `pathobj` is the path itself, or `[path, realpath]`.
fn path(mem: &dyn Memory, pathobj: u64) -> io::Result<String> {
    let flags = mem.read_u64(pathobj)?;
    match flags & T_MASK {
        T_STRING => string(mem, pathobj),
        T_ARRAY => {
            let first = if flags & FL_USER1 != 0 {
                if (flags >> ARY_EMBED_LEN_SHIFT) & ARY_EMBED_LEN_MASK == 0 {
                    return Err(bad("empty pathobj"));
                }
                mem.read_u64(pathobj + ARY_EMBED)?
            } else {
                if mem.read_u64(pathobj + ARY_HEAP_LEN)? == 0 {
                    return Err(bad("empty pathobj"));
                }
                mem.read_u64(mem.read_u64(pathobj + ARY_HEAP_PTR)?)?
            };
            string(mem, first)
        }
        _ => Err(bad("pathobj neither String nor Array")),
    }
}

/// Whether the object at `v` is an iseq (an imemo of the iseq type).
pub fn is_iseq(mem: &dyn Memory, v: u64) -> io::Result<bool> {
    let flags = mem.read_u64(v)?;
    Ok(flags & T_MASK == T_IMEMO && (flags >> IMEMO_SHIFT) & IMEMO_MASK == IMEMO_ISEQ)
}

impl Iseq {
    /// The iseq at `iseq`, read with layout `l`.
    pub fn read(mem: &dyn Memory, l: &Layout, iseq: u64) -> io::Result<Iseq> {
        if !is_iseq(mem, iseq)? {
            return Err(bad("not an iseq"));
        }
        let body = mem.read_u64(iseq + l.iseq_body)?;
        let b = mem.read_vec(body, l.body_read)?;
        let field = |off: usize| u64_at(&b, off).ok_or_else(|| bad("short iseq body"));
        let insns_size = u32_at(&b, l.body_insns_size).ok_or_else(|| bad("short iseq body"))?;
        if insns_size > MAX_INSNS_INFO {
            return Err(bad("line table too large"));
        }
        Ok(Iseq {
            label: string(mem, field(l.body_label)?)?,
            path: path(mem, field(l.body_pathobj)?)?,
            // A Fixnum: (n << 1) | 1.
            first_line: (field(l.body_first_lineno)? as i64) >> 1,
            encoded: field(l.body_encoded)?,
            size: u32_at(&b, l.body_size).ok_or_else(|| bad("short iseq body"))?,
            insns_info: field(l.body_insns_info)?,
            insns_size,
            succ_table: field(l.body_succ_table)?,
            positions: field(l.body_insns_positions)?,
            entry_bytes: l.insn_info_entry,
        })
    }

    /// The instruction a frame's `pc` is at: `pc` points past the one
    /// running, as CRuby's own backtraces count it.
    pub fn position(&self, pc: u64) -> Option<u32> {
        let pos = pc.checked_sub(self.encoded)? / 8;
        if pos > u64::from(self.size) {
            return None;
        }
        Some(pos.saturating_sub(1) as u32)
    }

    /// The line of the instruction at `pc`.
    pub fn line(&self, mem: &dyn Memory, pc: u64) -> io::Result<i32> {
        let pos = self
            .position(pc)
            .ok_or_else(|| bad("pc outside the iseq"))?;
        let index = match self.insns_size {
            0 => return Err(bad("no line table")),
            1 => 0,
            _ if self.succ_table != 0 => succ::rank(mem, self.succ_table, pos)?
                .checked_sub(1)
                .ok_or_else(|| bad("no entry at the pc"))?,
            _ if self.positions != 0 => {
                let p = mem.read_vec(self.positions, self.insns_size as usize * 4)?;
                let starts: Vec<u32> = p.chunks_exact(4).filter_map(|c| u32_at(c, 0)).collect();
                (starts.partition_point(|&s| s <= pos) as u32)
                    .checked_sub(1)
                    .ok_or_else(|| bad("no entry at the pc"))?
            }
            _ => return Err(bad("no position map")),
        };
        if index >= self.insns_size {
            return Err(bad("entry past the line table"));
        }
        let e = mem.read_vec(self.insns_info + u64::from(index) * self.entry_bytes, 4)?;
        i32_at(&e, 0).ok_or_else(|| bad("short entry"))
    }
}
