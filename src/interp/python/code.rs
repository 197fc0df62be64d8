//! A CPython code object read from the target's memory: its qualified
//! name, file, first line and location table, which name a frame as
//! `qualname (file.py:line)`.
//!
//! Where those fields sit is not assumed: the interpreter's own `PyCode_Type`
//! lists them (`tp_members`, each member's name and offset) and states the
//! header's size (`tp_basicsize`, where the instructions start), read once
//! per process. What is assumed, per minor version, is the layout of the
//! type object and of str and bytes objects, which those members point to.

use std::io;

use super::linetable;
use crate::interp::memory::{Memory, i32_at, u32_at, u64_at};

/// `PyTypeObject`: `tp_name`, `tp_basicsize`, `tp_members` (3.11, 3.12).
const TP_NAME: u64 = 24;
const TP_BASICSIZE: u64 = 32;
const TP_MEMBERS: u64 = 240;
/// `PyMemberDef`: name pointer at 0, offset at 16; 40 bytes each.
const MEMBER_SIZE: usize = 40;
const MEMBER_OFFSET: usize = 16;
/// More members than any code type has: a table read wrongly.
const MAX_MEMBERS: usize = 64;
/// `PyObject`: `ob_type`.
const OB_TYPE: usize = 8;
/// `PyBytesObject`: `ob_size`, then the bytes at `ob_sval`.
const BYTES_SIZE: usize = 16;
const BYTES_DATA: u64 = 32;
/// `PyASCIIObject`: `length`, `state` (kind in bits 2-4, compact bit 5,
/// ascii bit 6).
const STR_LENGTH: usize = 16;
const STR_STATE: usize = 32;
/// Longest name or path read; longer is a damaged object.
const MAX_STR_CHARS: u64 = 4096;
/// Longest location table read (a 100,000-line function is ~200 KiB).
const MAX_TABLE_BYTES: u64 = 1 << 20;
/// A header larger than this is no code type.
const MAX_BASICSIZE: u64 = 1024;

/// Where a code object's fields are, for one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeLayout {
    /// `PyCode_Type`'s address: every code object's `ob_type`.
    pub code_type: u64,
    /// Header size: the instructions start here (`co_code_adaptive`).
    pub basicsize: u64,
    pub firstlineno: usize,
    pub filename: usize,
    pub qualname: usize,
    pub linetable: usize,
    /// Where a str's characters start: compact ASCII, compact other.
    pub ascii_data: u64,
    pub compact_data: u64,
}

/// A code object, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeObject {
    pub qualname: String,
    pub filename: String,
    pub first_line: i32,
    pub linetable: Vec<u8>,
    /// What tells this object from another at the same address later (a
    /// code object freed, its memory reused): its name, file and table
    /// objects' addresses and its first line.
    pub identity: Identity,
}

/// A code object's identity, from its header alone (see `CodeObject`).
pub type Identity = [u64; 4];

impl CodeObject {
    /// The line of instruction `unit` (code units from the start), None
    /// when the table has none or is damaged.
    pub fn line(&self, unit: i64) -> Option<i32> {
        linetable::line_at(&self.linetable, self.first_line, unit)
            .ok()
            .flatten()
    }
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

fn c_string(mem: &dyn Memory, addr: u64, max: usize) -> io::Result<String> {
    let mut out = Vec::new();
    while out.len() < max {
        // Up to 32 bytes, never across a page: the next may be unmapped.
        let at = addr + out.len() as u64;
        let mut chunk = [0u8; 32];
        let chunk = &mut chunk[..(4096 - at % 4096).min(32) as usize];
        mem.read(at, chunk)?;
        match chunk.iter().position(|&b| b == 0) {
            Some(n) => {
                out.extend_from_slice(&chunk[..n]);
                return Ok(String::from_utf8_lossy(&out).into_owned());
            }
            None => out.extend_from_slice(chunk),
        }
    }
    Err(invalid(format!("no string end at {addr:#x}")))
}

impl CodeLayout {
    /// Reads the layout from the live `PyCode_Type` at `code_type`, for
    /// CPython 3.`minor`.
    pub fn read(mem: &dyn Memory, code_type: u64, minor: u32) -> io::Result<CodeLayout> {
        let (ascii_data, compact_data) = match minor {
            11 => (48, 72),
            12 => (40, 56),
            _ => return Err(invalid(format!("CPython 3.{minor} is not supported"))),
        };
        let name = c_string(mem, mem.read_u64(code_type + TP_NAME)?, 64)?;
        if name != "code" {
            return Err(invalid(format!(
                "PyCode_Type's name is {name:?}, not \"code\""
            )));
        }
        let basicsize = mem.read_u64(code_type + TP_BASICSIZE)?;
        if !(16..=MAX_BASICSIZE).contains(&basicsize) {
            return Err(invalid(format!("PyCode_Type's size {basicsize}")));
        }
        let members = mem.read_u64(code_type + TP_MEMBERS)?;
        let (mut first, mut file, mut qual, mut table) = (None, None, None, None);
        for i in 0..MAX_MEMBERS {
            let mut m = [0u8; MEMBER_SIZE];
            mem.read(members + (i * MEMBER_SIZE) as u64, &mut m)?;
            let name_at = u64_at(&m, 0).unwrap_or(0);
            if name_at == 0 {
                break;
            }
            let offset = u64_at(&m, MEMBER_OFFSET).unwrap_or(u64::MAX);
            if offset + 8 > basicsize {
                continue;
            }
            let slot = match c_string(mem, name_at, 64)?.as_str() {
                "co_firstlineno" => &mut first,
                "co_filename" => &mut file,
                "co_qualname" => &mut qual,
                "co_linetable" => &mut table,
                _ => continue,
            };
            *slot = Some(offset as usize);
        }
        let need = |v: Option<usize>, what: &str| {
            v.ok_or_else(|| invalid(format!("PyCode_Type lists no {what}")))
        };
        Ok(CodeLayout {
            code_type,
            basicsize,
            firstlineno: need(first, "co_firstlineno")?,
            filename: need(file, "co_filename")?,
            qualname: need(qual, "co_qualname")?,
            linetable: need(table, "co_linetable")?,
            ascii_data,
            compact_data,
        })
    }

    /// Reads the code object at `addr`; an error when it is not one (freed
    /// and reused, or a wrong address).
    pub fn code(&self, mem: &dyn Memory, addr: u64) -> io::Result<CodeObject> {
        let head = self.header(mem, addr)?;
        let field = |off: usize| u64_at(&head, off).unwrap_or(0);
        Ok(CodeObject {
            qualname: self.str_object(mem, field(self.qualname))?,
            filename: self.str_object(mem, field(self.filename))?,
            first_line: i32_at(&head, self.firstlineno).unwrap_or(0),
            linetable: bytes_object(mem, field(self.linetable))?,
            identity: self.identity_of(&head),
        })
    }

    /// The identity of the code object at `addr` now: one read of its
    /// header.
    pub fn identity(&self, mem: &dyn Memory, addr: u64) -> io::Result<Identity> {
        Ok(self.identity_of(&self.header(mem, addr)?))
    }

    fn header(&self, mem: &dyn Memory, addr: u64) -> io::Result<Vec<u8>> {
        let head = mem.read_vec(addr, self.basicsize as usize)?;
        let ob_type = u64_at(&head, OB_TYPE).unwrap_or(0);
        if ob_type != self.code_type {
            return Err(invalid(format!("no code object at {addr:#x}")));
        }
        Ok(head)
    }

    fn identity_of(&self, head: &[u8]) -> Identity {
        let field = |off: usize| u64_at(head, off).unwrap_or(0);
        [
            field(self.qualname),
            field(self.filename),
            field(self.linetable),
            i32_at(head, self.firstlineno).unwrap_or(0) as u64,
        ]
    }

    /// A str object's text (compact: every str a code object holds).
    fn str_object(&self, mem: &dyn Memory, addr: u64) -> io::Result<String> {
        let head = mem.read_vec(addr, 40)?;
        let len = u64_at(&head, STR_LENGTH).unwrap_or(u64::MAX);
        let state = u32_at(&head, STR_STATE).unwrap_or(0);
        let (kind, compact, ascii) = ((state >> 2) & 7, state >> 5 & 1 == 1, state >> 6 & 1 == 1);
        if !compact || len > MAX_STR_CHARS || !matches!(kind, 1 | 2 | 4) {
            return Err(invalid(format!("no compact str at {addr:#x}")));
        }
        let data = addr
            + if ascii {
                self.ascii_data
            } else {
                self.compact_data
            };
        let raw = mem.read_vec(data, (len * u64::from(kind)) as usize)?;
        Ok(match kind {
            1 => raw.iter().map(|&b| char::from(b)).collect(),
            2 => String::from_utf16_lossy(
                &raw.chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect::<Vec<_>>(),
            ),
            _ => raw
                .chunks_exact(4)
                .map(|c| {
                    char::from_u32(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .unwrap_or('\u{fffd}')
                })
                .collect(),
        })
    }
}

/// A bytes object's contents.
fn bytes_object(mem: &dyn Memory, addr: u64) -> io::Result<Vec<u8>> {
    let head = mem.read_vec(addr, BYTES_DATA as usize)?;
    let len = u64_at(&head, BYTES_SIZE).unwrap_or(u64::MAX);
    if len > MAX_TABLE_BYTES {
        return Err(invalid(format!("no bytes object at {addr:#x}")));
    }
    mem.read_vec(addr + BYTES_DATA, len as usize)
}
