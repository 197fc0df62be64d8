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
    /// Its constant body's address: what tells it from another iseq at the
    /// same address later.
    pub body: u64,
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
    // Flags, class, then 24 bytes: an embedded string's (up to 23 and a
    // NUL), or a heap string's length and pointer.
    let head = mem.read_vec(v, (STR_EMBED + 24) as usize)?;
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

/// The body of the iseq at `v`, one read of its header; None when the
/// object there is not an iseq (an imemo of the iseq type).
pub fn body_of(mem: &dyn Memory, l: &Layout, v: u64) -> io::Result<Option<u64>> {
    let head = mem.read_vec(v, (l.iseq_body + 8) as usize)?;
    let flags = u64_at(&head, 0).unwrap_or(0);
    let iseq = flags & T_MASK == T_IMEMO && (flags >> IMEMO_SHIFT) & IMEMO_MASK == IMEMO_ISEQ;
    Ok(iseq.then(|| u64_at(&head, l.iseq_body as usize)).flatten())
}

impl Iseq {
    /// The iseq at `iseq`, read with layout `l`.
    pub fn read(mem: &dyn Memory, l: &Layout, iseq: u64) -> io::Result<Iseq> {
        let body = body_of(mem, l, iseq)?.ok_or_else(|| bad("not an iseq"))?;
        let b = mem.read_vec(body, l.body_read)?;
        let field = |off: usize| u64_at(&b, off).ok_or_else(|| bad("short iseq body"));
        let insns_size = u32_at(&b, l.body_insns_size).ok_or_else(|| bad("short iseq body"))?;
        if insns_size > MAX_INSNS_INFO {
            return Err(bad("line table too large"));
        }
        Ok(Iseq {
            body,
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

    /// A pc BPF sent as its low half, whole again: the iseq's code is
    /// under 4 GiB, so it lies within 4 GiB past where the code starts.
    pub fn full_pc(&self, pc_lo: u64) -> u64 {
        let pc = (self.encoded & !0xffff_ffff) | (pc_lo & 0xffff_ffff);
        if pc < self.encoded {
            pc + (1 << 32)
        } else {
            pc
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::memory::FakeMemory;

    fn embedded(text: &str) -> Vec<u8> {
        let flags = T_STRING | ((text.len() as u64) << STR_EMBED_LEN_SHIFT);
        let mut b = flags.to_le_bytes().to_vec();
        b.extend([0u8; 8]);
        b.extend(text.as_bytes());
        b.resize(STR_EMBED as usize + 24, 0);
        b
    }

    /// A 23-byte label is embedded whole (the first reader took 32 bytes of
    /// the object and refused every label over 16).
    #[test]
    fn strings_read_embedded_up_to_23_bytes_and_from_the_heap() {
        let long = "block in handle_request";
        assert_eq!(long.len(), 23);
        let mut heap = (T_STRING | FL_USER1).to_le_bytes().to_vec();
        heap.extend([0u8; 8]);
        heap.extend(5u64.to_le_bytes());
        heap.extend(0x9000u64.to_le_bytes());
        heap.resize(40, 0);
        let mem = FakeMemory {
            blocks: vec![
                (0x1000, embedded(long)),
                (0x2000, heap),
                (0x9000, b"<main>".to_vec()),
                (0x3000, embedded("x").into_iter().map(|_| 0).collect()),
            ],
        };
        assert_eq!(string(&mem, 0x1000).unwrap(), long);
        assert_eq!(string(&mem, 0x2000).unwrap(), "<main");
        // Not a String (flags 0: a freed slot): refused, not read.
        assert!(string(&mem, 0x3000).is_err());
    }
}
