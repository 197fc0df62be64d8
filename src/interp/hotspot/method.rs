//! A HotSpot `Method` read from the JVM's memory: its class, name, source
//! file and line table, through the offsets the JVM's own tables give
//! (`vmstructs`). A Method lives in metaspace for as long as its class is
//! loaded; it is read once and its frames numbered (`Jvms`).
//!
//! The line table is HotSpot's compressed one (after the bytecodes, when
//! the method has one): pairs of (bci, line) deltas, one byte `bci<<3 |
//! line` for small ones, else 0xFF and two signed UNSIGNED5 numbers, ended
//! by 0. JDK 20 and later encode UNSIGNED5 without zero bytes (`x` = 1).

use std::io;
use std::ops::Range;

use super::vmstructs::Tables;
use crate::interp::memory::Memory;

/// The offsets and sizes a Method's names are read through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The JDK's feature version (17, 21, 25).
    pub major: u32,
    pub method_const_method: u64,
    cm_constants: u64,
    cm_name_index: u64,
    cm_code_size: u64,
    cm_flags: u64,
    cm_size: u64,
    cp_holder: u64,
    cp_size: u64,
    /// The source file's name index: in the ConstantPool (JDK 21+) or the
    /// InstanceKlass (before).
    cp_source_file: Option<u64>,
    ik_source_file: Option<u64>,
    klass_name: u64,
    sym_length: u64,
    sym_body: u64,
    /// Where `AbstractInterpreter::_code` (a StubQueue*) lives.
    pub interp_code: u64,
    stub_buffer: u64,
    buffer_limit: u64,
}

/// ConstMethod's flag that it has a line table: bit 0 of its flags in
/// every JDK since 8 (`_has_linenumber_table`, `has_linenumber_table`).
const HAS_LINE_TABLE: u8 = 1;

impl Layout {
    /// The layout the tables give, with the JDK's version read from `mem`;
    /// None when a field kerntax needs is not in them.
    pub fn new(t: &Tables, mem: &dyn Memory) -> Option<Layout> {
        let major_at = t.static_at("Abstract_VM_Version", "_vm_major_version")?;
        let mut v = [0u8; 4];
        mem.read(major_at, &mut v).ok()?;
        Some(Layout {
            major: u32::from_le_bytes(v),
            method_const_method: t.offset("Method", "_constMethod")?,
            cm_constants: t.offset("ConstMethod", "_constants")?,
            cm_name_index: t.offset("ConstMethod", "_name_index")?,
            cm_code_size: t.offset("ConstMethod", "_code_size")?,
            cm_flags: t.offset_of_any("ConstMethod", &["_flags._flags", "_flags"])?,
            cm_size: *t.sizes.get("ConstMethod")?,
            cp_holder: t.offset("ConstantPool", "_pool_holder")?,
            cp_size: *t.sizes.get("ConstantPool")?,
            cp_source_file: t.offset("ConstantPool", "_source_file_name_index"),
            ik_source_file: t.offset("InstanceKlass", "_source_file_name_index"),
            klass_name: t.offset("Klass", "_name")?,
            sym_length: t.offset("Symbol", "_length")?,
            sym_body: t.offset("Symbol", "_body")?,
            interp_code: t.static_at("AbstractInterpreter", "_code")?,
            stub_buffer: t.offset("StubQueue", "_stub_buffer")?,
            buffer_limit: t.offset("StubQueue", "_buffer_limit")?,
        })
    }

    /// The interpreter's code (its StubQueue's buffer); None before the
    /// JVM has generated it.
    pub fn interpreter(&self, mem: &dyn Memory) -> Option<Range<u64>> {
        let queue = mem.read_u64(self.interp_code).ok().filter(|&q| q != 0)?;
        let start = mem.read_u64(queue + self.stub_buffer).ok()?;
        let mut limit = [0u8; 4];
        mem.read(queue + self.buffer_limit, &mut limit).ok()?;
        let len = u64::from(u32::from_le_bytes(limit));

        (start != 0 && len > 0 && len < 1 << 30).then(|| start..start + len)
    }

    /// The ConstMethod* `m` was read through: its bytecodes follow it.
    pub fn const_method_of(&self, m: &JavaMethod) -> u64 {
        m.code.start - self.cm_size
    }

    /// UNSIGNED5's excluded bytes: 1 from JDK 20.
    fn unsigned5_x(&self) -> u8 {
        u8::from(self.major >= 20)
    }
}

/// A Java method as the JVM holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaMethod {
    /// `java.util.concurrent.ThreadPoolExecutor.getTask`, as the JIT's
    /// perf map names it once compiled.
    pub name: String,
    /// Its class's source file (`ThreadPoolExecutor.java`), if the class
    /// says.
    pub file: Option<String>,
    /// Its bytecodes in the JVM's memory: a frame's bcp lies here.
    pub code: Range<u64>,
    /// (bci, line), as the class file's table has them.
    pub lines: Vec<(u32, u32)>,
}

impl JavaMethod {
    /// The line of the bytecode at `bcp` (0: unknown): the entry at its
    /// bci, else the nearest before it, as HotSpot's own line_from_bci.
    pub fn line_at(&self, bcp: u64) -> i32 {
        if !self.code.contains(&bcp) {
            return 0;
        }
        let bci = (bcp - self.code.start) as u32;
        let mut best: Option<(u32, u32)> = None;
        for &(b, l) in &self.lines {
            if b == bci {
                return l as i32;
            }
            if b < bci && best.is_none_or(|(bb, _)| b >= bb) {
                best = Some((b, l));
            }
        }
        best.map_or(0, |(_, l)| l as i32)
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("not a Method: {what}"))
}

/// Whether `p` can point at a metaspace object (8-byte aligned).
fn aligned(p: u64) -> bool {
    p != 0 && p.is_multiple_of(8)
}

fn u16_at(mem: &dyn Memory, addr: u64) -> io::Result<u16> {
    let mut b = [0u8; 2];
    mem.read(addr, &mut b)?;
    Ok(u16::from_le_bytes(b))
}

/// A Symbol's text (class and method names: modified UTF-8, ASCII in
/// practice); refused if long or holding control characters, which a
/// word that is not a Symbol* would give.
fn symbol(mem: &dyn Memory, l: &Layout, at: u64) -> io::Result<String> {
    if !aligned(at) {
        return Err(bad("symbol pointer"));
    }
    let len = u16_at(mem, at + l.sym_length)? as usize;
    if len == 0 || len > 1024 {
        return Err(bad("symbol length"));
    }
    let body = mem.read_vec(at + l.sym_body, len)?;
    let s = String::from_utf8_lossy(&body).into_owned();
    if s.chars().any(char::is_control) {
        return Err(bad("symbol text"));
    }
    Ok(s)
}

/// The Symbol at index `i` of the constant pool at `cp`.
fn pool_symbol(mem: &dyn Memory, l: &Layout, cp: u64, i: u16) -> io::Result<String> {
    let at = mem.read_u64(cp + l.cp_size + u64::from(i) * 8)?;
    symbol(mem, l, at)
}

/// Reads the Method at `method`. The caller has it from an interpreter
/// frame; a word that is not a Method fails here rather than naming a
/// frame wrongly.
pub fn read(mem: &dyn Memory, l: &Layout, method: u64) -> io::Result<JavaMethod> {
    if !aligned(method) {
        return Err(bad("pointer"));
    }
    let cm = mem.read_u64(method + l.method_const_method)?;
    if !aligned(cm) {
        return Err(bad("ConstMethod"));
    }
    let cp = mem.read_u64(cm + l.cm_constants)?;
    if !aligned(cp) {
        return Err(bad("ConstantPool"));
    }
    let holder = mem.read_u64(cp + l.cp_holder)?;
    if !aligned(holder) {
        return Err(bad("holder"));
    }
    let class = symbol(mem, l, mem.read_u64(holder + l.klass_name)?)?;
    let name = pool_symbol(mem, l, cp, u16_at(mem, cm + l.cm_name_index)?)?;
    let file_index = match (l.cp_source_file, l.ik_source_file) {
        (Some(o), _) => u16_at(mem, cp + o).ok(),
        (None, Some(o)) => u16_at(mem, holder + o).ok(),
        _ => None,
    };
    let file = file_index
        .filter(|&i| i != 0)
        .and_then(|i| pool_symbol(mem, l, cp, i).ok());
    let code_size = u64::from(u16_at(mem, cm + l.cm_code_size)?);
    let code = cm + l.cm_size..cm + l.cm_size + code_size;
    let mut flags = [0u8; 1];
    mem.read(cm + l.cm_flags, &mut flags)?;
    let lines = if flags[0] & HAS_LINE_TABLE != 0 {
        read_lines(mem, code.end, l.unsigned5_x())
    } else {
        Vec::new()
    };
    Ok(JavaMethod {
        name: format!("{}.{name}", class.replace('/', ".")),
        file,
        code,
        lines,
    })
}

/// The most of a line table read: 64 KiB of bytecode has at most as many
/// entries, a few bytes each.
const MAX_TABLE_BYTES: usize = 1 << 18;

/// The line table at `at`, read a page at a time until its end (a read
/// past the last page mapped would fail whole).
fn read_lines(mem: &dyn Memory, at: u64, x: u8) -> Vec<(u32, u32)> {
    let mut bytes = Vec::new();
    while bytes.len() < MAX_TABLE_BYTES {
        let from = at + bytes.len() as u64;
        let piece = 4096 - (from % 4096) as usize;
        let Ok(more) = mem.read_vec(from, piece) else {
            break;
        };
        bytes.extend(more);
        if let Some(lines) = decode_lines(&bytes, x) {
            return lines;
        }
    }
    Vec::new()
}

/// One UNSIGNED5 number from `b` at `*pos` (`x` excluded low bytes).
fn unsigned5(b: &[u8], pos: &mut usize, x: u8) -> Option<u32> {
    // 256 - 64 high codes: a byte below `L + x` ends the number.
    const L: u32 = 192;
    let mut sum: u32 = 0;
    let mut shift = 0;
    for i in 0..5 {
        let byte = *b.get(*pos)?;
        *pos += 1;
        let v = u32::from(byte.checked_sub(x)?);
        sum = sum.wrapping_add(v << shift);
        if u32::from(byte) < L || i == 4 {
            return Some(sum);
        }
        shift += 6;
    }
    Some(sum)
}

fn signed5(b: &[u8], pos: &mut usize, x: u8) -> Option<i32> {
    let v = unsigned5(b, pos, x)?;
    Some(((v >> 1) as i32) ^ -((v & 1) as i32))
}

/// The (bci, line) pairs of a compressed line table; None if `b` ends
/// before the table does.
pub fn decode_lines(b: &[u8], x: u8) -> Option<Vec<(u32, u32)>> {
    let (mut bci, mut line) = (0u32, 0u32);
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let next = *b.get(pos)?;
        pos += 1;
        match next {
            0 => return Some(out),
            0xff => {
                bci = bci.wrapping_add(signed5(b, &mut pos, x)? as u32);
                line = line.wrapping_add(signed5(b, &mut pos, x)? as u32);
            }
            n => {
                bci += u32::from(n >> 3);
                line += u32::from(n & 7);
            }
        }
        out.push((bci, line));
    }
}

#[cfg(test)]
#[path = "method_tests.rs"]
mod tests;
