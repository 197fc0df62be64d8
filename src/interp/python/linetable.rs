//! CPython 3.11-3.12's location table (`co_linetable`, specified in
//! CPython's Objects/locations.md): which source line an instruction of a
//! code object is on. The BPF walk records only a frame's code object and
//! instruction index; the table is read from the target's memory and
//! decoded here, in user space, once per code object.
//!
//! The table is a run of entries, each covering 1-8 code units (2 bytes
//! each): a first byte with bit 7 set, the entry's kind in bits 3-6 and its
//! length less one in bits 0-2, then the kind's operands. Lines are deltas
//! from a running line that starts at `co_firstlineno`; columns are not
//! needed here and are skipped.

use std::fmt;

/// A malformed table: the code object was read while being freed or the
/// interpreter is not the version assumed. Its frames get no line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineTableError {
    pub at_byte: usize,
    pub what: &'static str,
}

impl fmt::Display for LineTableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "location table byte {}: {}", self.at_byte, self.what)
    }
}

/// Code units `start..end` are on `line` (None: no location, as for the
/// instructions the compiler adds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRange {
    pub start: u32,
    pub end: u32,
    pub line: Option<i32>,
}

/// Kind 15: no location; the running line stays as it is.
const KIND_NONE: u8 = 15;
/// Kind 14: a line delta, an end-line delta and two columns, all varints.
const KIND_LONG: u8 = 14;
/// Kind 13: a line delta (signed varint), no columns.
const KIND_NO_COLUMN: u8 = 13;
/// Kinds 10-12: the line moves by kind - 10; two column bytes follow.
const KIND_ONE_LINE_FIRST: u8 = 10;
/// A varint holds at most this many bits (the interpreter writes ints).
const MAX_VARINT_BITS: u32 = 36;

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn fail<T>(&self, what: &'static str) -> Result<T, LineTableError> {
        Err(LineTableError {
            at_byte: self.at,
            what,
        })
    }

    fn byte(&mut self) -> Result<u8, LineTableError> {
        match self.bytes.get(self.at) {
            Some(&b) => {
                self.at += 1;
                Ok(b)
            }
            None => self.fail("truncated entry"),
        }
    }

    /// Little-endian 6-bit chunks, 0x40 set on all but the last.
    fn varint(&mut self) -> Result<u64, LineTableError> {
        let (mut value, mut shift) = (0u64, 0u32);
        loop {
            let b = self.byte()?;
            value |= u64::from(b & 0x3f) << shift;
            if b & 0x40 == 0 {
                return Ok(value);
            }
            shift += 6;
            if shift > MAX_VARINT_BITS {
                return self.fail("varint too long");
            }
        }
    }

    /// A varint whose bit 0 is the sign.
    fn svarint(&mut self) -> Result<i64, LineTableError> {
        let v = self.varint()?;
        let magnitude = (v >> 1) as i64;
        Ok(if v & 1 == 1 { -magnitude } else { magnitude })
    }

    /// One entry: (code units it covers, line delta, has a location).
    fn entry(&mut self) -> Result<Option<(u32, i64, bool)>, LineTableError> {
        let Some(&first) = self.bytes.get(self.at) else {
            return Ok(None);
        };
        if first & 0x80 == 0 {
            return self.fail("entry without its start bit");
        }
        self.at += 1;
        let kind = (first >> 3) & 0x0f;
        let units = u32::from(first & 0x07) + 1;
        let (delta, located) = match kind {
            KIND_NONE => (0, false),
            KIND_LONG => {
                let delta = self.svarint()?;
                for _ in 0..3 {
                    self.varint()?; // end line delta, column + 1, end column + 1
                }
                (delta, true)
            }
            KIND_NO_COLUMN => (self.svarint()?, true),
            KIND_ONE_LINE_FIRST..KIND_NO_COLUMN => {
                self.byte()?;
                self.byte()?;
                (i64::from(kind - KIND_ONE_LINE_FIRST), true)
            }
            _ => {
                self.byte()?; // the short form's column byte; same line
                (0, true)
            }
        };
        Ok(Some((units, delta, located)))
    }
}

/// Every range of the table, in order.
pub fn ranges(table: &[u8], first_line: i32) -> Result<Vec<LineRange>, LineTableError> {
    let mut out = Vec::new();
    walk(table, first_line, |r| {
        out.push(r);
        false
    })?;
    Ok(out)
}

/// The line of code unit `unit` (the instruction a frame last ran): None
/// when the table says it has none or does not reach it. A frame that has
/// run nothing yet (index -1) is on the code object's first line, as
/// CPython's `PyCode_Addr2Line` says.
pub fn line_at(table: &[u8], first_line: i32, unit: i64) -> Result<Option<i32>, LineTableError> {
    if unit < 0 {
        return Ok(Some(first_line));
    }
    let mut found = None;
    walk(table, first_line, |r| {
        if i64::from(r.start) <= unit && unit < i64::from(r.end) {
            found = Some(r.line);
            return true;
        }
        false
    })?;
    Ok(found.flatten())
}

/// Calls `each` with every range until it returns true.
fn walk(
    table: &[u8],
    first_line: i32,
    mut each: impl FnMut(LineRange) -> bool,
) -> Result<(), LineTableError> {
    let mut r = Reader {
        bytes: table,
        at: 0,
    };
    let (mut line, mut start) = (i64::from(first_line), 0u32);
    while let Some((units, delta, located)) = r.entry()? {
        line += delta;
        let end = start.saturating_add(units);
        let range = LineRange {
            start,
            end,
            line: (located && i32::try_from(line).is_ok()).then_some(line as i32),
        };
        if each(range) {
            return Ok(());
        }
        start = end;
    }
    Ok(())
}

#[cfg(test)]
#[path = "linetable_tests.rs"]
mod tests;
