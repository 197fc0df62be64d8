//! HotSpot's description of itself: every libjvm.so exports the tables its
//! serviceability agent reads (`gHotSpotVMStructs`: each field's offset, or
//! a static's address; `gHotSpotVMTypes`: each type's size), with the
//! layout of their entries exported beside them. kerntax reads from them
//! the few offsets that name an interpreted frame's method, so no JDK's
//! layout is written into kerntax: a JDK that moves a field says so here.

use std::collections::HashMap;
use std::io;

use crate::interp::memory::Memory;

/// The symbols a libjvm.so exports for the tables, by what kerntax reads.
pub const SYMBOLS: &[&str] = &[
    "gHotSpotVMStructs",
    "gHotSpotVMStructEntryTypeNameOffset",
    "gHotSpotVMStructEntryFieldNameOffset",
    "gHotSpotVMStructEntryOffsetOffset",
    "gHotSpotVMStructEntryAddressOffset",
    "gHotSpotVMStructEntryIsStaticOffset",
    "gHotSpotVMStructEntryArrayStride",
    "gHotSpotVMTypes",
    "gHotSpotVMTypeEntryTypeNameOffset",
    "gHotSpotVMTypeEntrySizeOffset",
    "gHotSpotVMTypeEntryArrayStride",
];

/// The types whose fields kerntax reads; entries of others are skipped
/// without reading their field names.
const TYPES: &[&str] = &[
    "Abstract_VM_Version",
    "AbstractInterpreter",
    "StubQueue",
    "Method",
    "ConstMethod",
    "ConstantPool",
    "Klass",
    "InstanceKlass",
    "Symbol",
];

/// The most entries a table is read for: HotSpot's have a few thousand;
/// past this the table is not one.
const MAX_ENTRIES: u64 = 20_000;

/// A field as the table states it: an offset in its object, or where a
/// static lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Offset(u64),
    Static(u64),
}

/// What kerntax read of the tables: fields of `TYPES` and type sizes.
#[derive(Debug, Default, Clone)]
pub struct Tables {
    pub fields: HashMap<(String, String), Field>,
    pub sizes: HashMap<String, u64>,
}

impl Tables {
    pub fn offset(&self, ty: &str, field: &str) -> Option<u64> {
        match self.fields.get(&(ty.to_string(), field.to_string()))? {
            Field::Offset(o) => Some(*o),
            Field::Static(_) => None,
        }
    }

    pub fn static_at(&self, ty: &str, field: &str) -> Option<u64> {
        match self.fields.get(&(ty.to_string(), field.to_string()))? {
            Field::Static(a) => Some(*a),
            Field::Offset(_) => None,
        }
    }

    /// The first of `fields` the type has (a field renamed across JDKs).
    pub fn offset_of_any(&self, ty: &str, fields: &[&str]) -> Option<u64> {
        fields.iter().find_map(|f| self.offset(ty, f))
    }
}

/// A NUL-terminated string at `addr`, at most 128 bytes (names in the
/// tables are short); None if unreadable or unterminated.
fn c_string(
    mem: &dyn Memory,
    addr: u64,
    cache: &mut HashMap<u64, Option<String>>,
) -> Option<String> {
    if addr == 0 {
        return None;
    }
    if let Some(s) = cache.get(&addr) {
        return s.clone();
    }
    // A read that crosses into an unmapped page fails: shorter then.
    let s = [128usize, 32]
        .iter()
        .find_map(|&n| mem.read_vec(addr, n).ok())
        .and_then(|b| {
            let end = b.iter().position(|&c| c == 0)?;
            String::from_utf8(b[..end].to_vec()).ok()
        });
    cache.insert(addr, s.clone());
    s
}

fn word(entry: &[u8], at: u64) -> u64 {
    let at = at as usize;
    entry
        .get(at..at + 8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
}

/// The entries of a table at `base` (`stride` bytes each, a type name's
/// pointer at `ty_at`, ended by a null one) whose type is one of `TYPES`,
/// with that name; `what` names the table in an error.
fn entries_of_types(
    mem: &dyn Memory,
    (base, stride, ty_at): (u64, u64, u64),
    names: &mut HashMap<u64, Option<String>>,
    what: &str,
) -> io::Result<Vec<(String, Vec<u8>)>> {
    if base == 0 || !(16..=256).contains(&stride) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("vmStructs: no {what}"),
        ));
    }
    let mut out = Vec::new();
    for i in 0..MAX_ENTRIES {
        let e = mem.read_vec(base + i * stride, stride as usize)?;
        let ty = word(&e, ty_at);
        if ty == 0 {
            break;
        }
        if let Some(ty) = c_string(mem, ty, names).filter(|t| TYPES.contains(&t.as_str())) {
            out.push((ty, e));
        }
    }
    Ok(out)
}

/// Reads the tables of the libjvm whose exported symbols are at `sym`
/// (runtime addresses).
pub fn read(mem: &dyn Memory, sym: &HashMap<&'static str, u64>) -> io::Result<Tables> {
    let missing = || io::Error::new(io::ErrorKind::NotFound, "libjvm's vmStructs symbols");
    let value =
        |name: &str| -> io::Result<u64> { mem.read_u64(*sym.get(name).ok_or_else(missing)?) };
    let mut names = HashMap::new();
    let mut out = Tables::default();
    // Fields.
    let table = (
        value("gHotSpotVMStructs")?,
        value("gHotSpotVMStructEntryArrayStride")?,
        value("gHotSpotVMStructEntryTypeNameOffset")?,
    );
    let (field_at, off_at, addr_at, static_at) = (
        value("gHotSpotVMStructEntryFieldNameOffset")?,
        value("gHotSpotVMStructEntryOffsetOffset")?,
        value("gHotSpotVMStructEntryAddressOffset")?,
        value("gHotSpotVMStructEntryIsStaticOffset")?,
    );
    for (ty, e) in entries_of_types(mem, table, &mut names, "table")? {
        let Some(field) = c_string(mem, word(&e, field_at), &mut names) else {
            continue;
        };
        let is_static = e
            .get(static_at as usize..static_at as usize + 4)
            .is_some_and(|b| b != [0, 0, 0, 0]);
        let f = if is_static {
            Field::Static(word(&e, addr_at))
        } else {
            Field::Offset(word(&e, off_at))
        };
        out.fields.insert((ty, field), f);
    }
    // Sizes.
    let table = (
        value("gHotSpotVMTypes")?,
        value("gHotSpotVMTypeEntryArrayStride")?,
        value("gHotSpotVMTypeEntryTypeNameOffset")?,
    );
    let size_at = value("gHotSpotVMTypeEntrySizeOffset")?;
    for (ty, e) in entries_of_types(mem, table, &mut names, "type table")? {
        out.sizes.insert(ty, word(&e, size_at));
    }
    Ok(out)
}
