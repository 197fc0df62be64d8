//! Reading V8's heap objects from a live process: a frame's JSFunction,
//! its SharedFunctionInfo (the function whatever its code), the function's
//! name (in its ScopeInfo once compiled), its Script's name and source
//! (for lines), and an interpreted frame's bytecode's source positions.
//! Every object's instance type is checked before a field of it is read:
//! a word that is not what the frame layout says (a moved object, a slot
//! that is not a function's) reads as nothing, never as a guess.

use super::layout::Layout;
use crate::interp::memory::{Memory, u64_at};

/// Characters of a string read at most: a function's or script's name.
const MAX_NAME_UNITS: usize = 1024;

/// Characters of a script's source read at most, to number its lines.
const MAX_SOURCE_UNITS: usize = 8 << 20;

/// Strings within strings (cons, thin, sliced) followed at most.
const MAX_STRING_DEPTH: u32 = 16;

/// Slots of a ScopeInfo read to find the function's name and position:
/// its fixed slots, the context locals' names and infos before them, and
/// the optional fields after (V8's `scope-info.tq`; what is optional moves
/// between versions, so the name is the first string past the locals and
/// the position the first pair of small integers, start before end).
const SCOPE_SLOTS: u64 = 24;

/// One function, as its SharedFunctionInfo says.
#[derive(Debug, Clone, PartialEq)]
pub struct JsFunction {
    /// Empty for an anonymous function; None where it could not be read.
    pub name: Option<String>,
    /// The Script's tagged address (0: none, a builtin's).
    pub script: u64,
    /// Where the function starts in its script's source (-1: unknown).
    pub start: i64,
}

/// The instance type of the heap object `tagged` points to.
pub fn instance_type(mem: &dyn Memory, l: &Layout, tagged: u64) -> Option<u16> {
    if !l.is_heap_object(tagged) {
        return None;
    }
    let map = mem.read_u64(l.untag(tagged) + l.map).ok()?;
    if !l.is_heap_object(map) {
        return None;
    }
    let mut b = [0u8; 2];
    mem.read(l.untag(map) + l.map_instance_type, &mut b).ok()?;
    Some(u16::from_le_bytes(b))
}

/// The SharedFunctionInfo of the JSFunction `tagged`, if it is one.
pub fn shared_of(mem: &dyn Memory, l: &Layout, function: u64) -> Option<u64> {
    let t = instance_type(mem, l, function)?;
    if !l.js_function.contains(&t) {
        return None;
    }
    let shared = mem.read_u64(l.untag(function) + l.function_shared).ok()?;
    (instance_type(mem, l, shared)? == l.shared_function_info).then_some(shared)
}

/// The two words of a SharedFunctionInfo a function is read from: its name
/// or ScopeInfo, and its Script (or debug info).
pub fn shared_words(mem: &dyn Memory, l: &Layout, shared: u64) -> Option<(u64, u64)> {
    let base = l.untag(shared);
    Some((
        mem.read_u64(base + l.shared_name_or_scope_info).ok()?,
        mem.read_u64(base + l.shared_script).ok()?,
    ))
}

/// The function a SharedFunctionInfo describes, from its two words
/// (`shared_words`).
pub fn function(mem: &dyn Memory, l: &Layout, (name_or_scope, script): (u64, u64)) -> JsFunction {
    let (name, start) = match instance_type(mem, l, name_or_scope) {
        Some(t) if t < l.first_nonstring => (string(mem, l, name_or_scope, MAX_NAME_UNITS), -1),
        Some(t) if t == l.scope_info => scope_name(mem, l, name_or_scope),
        // No name (a Smi: an anonymous function never compiled with one).
        _ => (Some(String::new()), -1),
    };
    let script = match instance_type(mem, l, script) {
        Some(t) if t == l.script => script,
        _ => 0,
    };
    JsFunction {
        name,
        script,
        start,
    }
}

/// A compiled function's name and start position, from its ScopeInfo.
fn scope_name(mem: &dyn Memory, l: &Layout, scope: u64) -> (Option<String>, i64) {
    let Ok(b) = mem.read_vec(l.untag(scope) + 8, (SCOPE_SLOTS * 8) as usize) else {
        return (None, -1);
    };
    let slot = |i: u64| u64_at(&b, (i * 8) as usize);
    let Some(locals) = slot(l.scope_context_locals).and_then(|w| l.smi(w)) else {
        return (None, -1);
    };
    let mut name: Option<String> = None;
    let mut prev: Option<i64> = None;
    let first = l.scope_first_vars + 2 * locals.max(0) as u64;
    for i in first..SCOPE_SLOTS {
        let Some(w) = slot(i) else { break };
        // The function's own name, else (an anonymous function's, empty)
        // the name V8 inferred for it (`Module._compile` for a function
        // assigned there), which follows it.
        if matches!(instance_type(mem, l, w), Some(t) if t < l.first_nonstring) {
            if name.as_deref().is_none_or(str::is_empty) {
                name = string(mem, l, w, MAX_NAME_UNITS).or(name);
            }
            prev = None;
            continue;
        }
        if name.is_none() {
            continue;
        }
        // The position pair: a start before an end (the slot index of
        // the function's name, -1 unless it refers to itself, comes
        // first).
        let now = l.smi(w);
        if let (Some(start), Some(end)) = (prev, now)
            && 0 <= start
            && start < end
        {
            return (name, start);
        }
        prev = now;
    }
    (name, -1)
}

/// A Script's name (its file or URL), if it has one.
pub fn script_name(mem: &dyn Memory, l: &Layout, script: u64) -> Option<String> {
    let w = mem.read_u64(l.untag(script) + l.script_name).ok()?;
    string(mem, l, w, MAX_NAME_UNITS).filter(|s| !s.is_empty())
}

/// Where each line of a Script's source starts (its first at 0).
pub fn line_starts(mem: &dyn Memory, l: &Layout, script: u64) -> Option<Vec<u32>> {
    let w = mem.read_u64(l.untag(script) + l.script_source).ok()?;
    let units = units(mem, l, w, MAX_SOURCE_UNITS, 0)?;
    let mut out = vec![0];
    out.extend(
        units
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c == u16::from(b'\n'))
            .map(|(i, _)| i as u32 + 1),
    );
    Some(out)
}

/// The line (from 1) of source position `pos`.
pub fn line_of(starts: &[u32], pos: i64) -> i32 {
    if pos < 0 {
        return 0;
    }
    starts.partition_point(|&s| i64::from(s) <= pos) as i32
}

/// The string `tagged` points to, up to `max` characters.
pub fn string(mem: &dyn Memory, l: &Layout, tagged: u64, max: usize) -> Option<String> {
    units(mem, l, tagged, max, 0).map(|u| String::from_utf16_lossy(&u))
}

/// The UTF-16 units of the string `tagged` points to (one-byte strings
/// widened), up to `max`.
fn units(mem: &dyn Memory, l: &Layout, tagged: u64, max: usize, depth: u32) -> Option<Vec<u16>> {
    if depth > MAX_STRING_DEPTH {
        return None;
    }
    let t = instance_type(mem, l, tagged)?;
    if t >= l.first_nonstring {
        return None;
    }
    let base = l.untag(tagged);
    let mut b = [0u8; 4];
    mem.read(base + l.string_length, &mut b).ok()?;
    let len = (u32::from_le_bytes(b) as usize).min(max);
    let one_byte = t & l.encoding_mask == l.one_byte;
    let chars = |at: u64| -> Option<Vec<u16>> {
        let width = if one_byte { 1 } else { 2 };
        let raw = mem.read_vec(at, len * width).ok()?;
        Some(if one_byte {
            raw.iter().map(|&c| u16::from(c)).collect()
        } else {
            raw.chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect()
        })
    };
    let rep = t & l.representation_mask;
    if rep == l.seq {
        let off = if one_byte {
            l.seq_one_byte_chars
        } else {
            l.seq_two_byte_chars
        };
        chars(base + off)
    } else if rep == l.external {
        let data = mem.read_u64(base + l.external_data).ok()?;
        (data != 0).then(|| chars(data)).flatten()
    } else if rep == l.thin {
        let actual = mem.read_u64(base + l.thin_actual).ok()?;
        units(mem, l, actual, max, depth + 1)
    } else if rep == l.cons {
        let first = mem.read_u64(base + l.cons_first).ok()?;
        let second = mem.read_u64(base + l.cons_second).ok()?;
        let mut out = units(mem, l, first, max, depth + 1)?;
        if out.len() < len {
            out.extend(units(mem, l, second, len - out.len(), depth + 1)?);
        }
        out.truncate(len);
        Some(out)
    } else if rep == l.sliced {
        let parent = mem.read_u64(base + l.sliced_parent).ok()?;
        let off = l.smi(mem.read_u64(base + l.sliced_offset).ok()?)?.max(0) as usize;
        let all = units(mem, l, parent, off + len, depth + 1)?;
        Some(all.get(off..)?.to_vec())
    } else {
        None
    }
}

/// The source position of the bytecode at `offset` (from the array's
/// first bytecode) of the BytecodeArray `array`, from its source position
/// table, where V8 has collected one (it does so lazily: a function no
/// stack trace or profiler asked about has none).
pub fn bytecode_position(mem: &dyn Memory, l: &Layout, array: u64, offset: i64) -> Option<i64> {
    // The table's field is not among the postmortem constants: it has
    // followed the length, the constant pool and the handler table since
    // V8 8.
    let table = mem
        .read_u64(l.untag(array) + l.fixed_array_length + 24)
        .ok()?;
    if !l.is_heap_object(table) {
        return None;
    }
    let base = l.untag(table);
    let len = l.smi(mem.read_u64(base + l.fixed_array_length).ok()?)?;
    if !(1..=1 << 20).contains(&len) {
        return None;
    }
    let bytes = mem
        .read_vec(base + l.fixed_array_length + 8, len as usize)
        .ok()?;
    position_at(&bytes, offset)
}

/// The script offset in effect at code offset `offset` in a V8 source
/// position table: entries of (code offset delta, with the statement flag
/// in its sign; raw position delta), each a zigzag VLQ; a raw position
/// holds its script offset + 1 in bits 1-30.
pub fn position_at(table: &[u8], offset: i64) -> Option<i64> {
    let mut i = 0;
    let (mut code, mut raw) = (0i64, 0i64);
    let mut found = None;
    while i < table.len() {
        // A table cut short: the entries before the cut stand.
        let (Some(delta), Some(pos)) = (vlq(table, &mut i), vlq(table, &mut i)) else {
            break;
        };
        code += if delta >= 0 { delta } else { -(delta + 1) };
        raw += pos;
        if code > offset {
            break;
        }
        found = Some(((raw >> 1) & 0x3fff_ffff) - 1);
    }
    found.filter(|&p| p >= 0)
}

/// One zigzag-encoded VLQ at `*i`.
fn vlq(b: &[u8], i: &mut usize) -> Option<i64> {
    let (mut v, mut shift) = (0u64, 0u32);
    loop {
        let byte = *b.get(*i)?;
        *i += 1;
        v |= u64::from(byte & 0x7f).checked_shl(shift)?;
        shift += 7;
        if byte & 0x80 == 0 {
            break;
        }
        if shift > 63 {
            return None;
        }
    }
    Some(((v >> 1) as i64) ^ -((v & 1) as i64))
}

#[cfg(test)]
#[path = "heap_tests.rs"]
mod tests;
