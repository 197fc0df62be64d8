//! Where V8 keeps what naming a JavaScript frame reads, from the binary
//! that embeds it: V8 builds with postmortem support (node's default) carry
//! `v8dbg_*` constants, one exported `int` each, written for debuggers
//! (mdb_v8, llnode) — the frame's slots, the objects' field offsets and
//! instance types, the tagging scheme. They are read from the file, never
//! assumed; a binary without them, or with pointer compression (32-bit
//! tagged fields, which this reader does not follow), is said so.

use std::collections::HashMap;

use object::{Object, ObjectSection, ObjectSymbol, SectionKind};

/// JSFunction is a range of instance types since V8 9.6 (class
/// constructors and friends follow JS_FUNCTION_TYPE): how many.
const JS_FUNCTION_TYPES: u16 = 15;

/// The constants read, by name without the `v8dbg_` prefix.
const NAMES: &[&str] = &[
    "TaggedSize",
    "HeapObjectTag",
    "HeapObjectTagMask",
    "SmiTagMask",
    "SmiShiftSize",
    "off_fp_context_or_frame_type",
    "off_fp_function",
    "off_fp_bytecode_array",
    "off_fp_bytecode_offset",
    "class_HeapObject__map__Map",
    "class_Map__instance_type__uint16_t",
    "class_JSFunction__shared__SharedFunctionInfo",
    "class_SharedFunctionInfo__name_or_scope_info__Object",
    "class_SharedFunctionInfo__script_or_debug_info__HeapObject",
    "class_Script__name__Object",
    "class_Script__source__Object",
    "class_String__length__int32_t",
    "class_SeqOneByteString__chars__char",
    "class_SeqTwoByteString__chars__char",
    "class_ConsString__first__String",
    "class_ConsString__second__String",
    "class_ThinString__actual__String",
    "class_SlicedString__parent__String",
    "class_SlicedString__offset__SMI",
    "class_ExternalString__resource__Object",
    "class_FixedArrayBase__length__SMI",
    "class_BytecodeArray__data__uintptr_t",
    "FirstNonstringType",
    "StringEncodingMask",
    "OneByteStringTag",
    "StringRepresentationMask",
    "SeqStringTag",
    "ConsStringTag",
    "ExternalStringTag",
    "SlicedStringTag",
    "ThinStringTag",
    "type_JSFunction__JS_FUNCTION_TYPE",
    "type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE",
    "type_ScopeInfo__SCOPE_INFO_TYPE",
    "type_Script__SCRIPT_TYPE",
    "type_BytecodeArray__BYTECODE_ARRAY_TYPE",
    "scopeinfo_idx_first_vars",
    "scopeinfo_idx_ncontextlocals",
];

/// The layout of one V8 build.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub heap_object_tag: u64,
    pub heap_object_tag_mask: u64,
    pub smi_shift: u32,
    pub fp_context: i64,
    pub fp_function: i64,
    pub fp_bytecode_array: i64,
    pub fp_bytecode_offset: i64,
    pub map: u64,
    pub map_instance_type: u64,
    pub function_shared: u64,
    pub shared_name_or_scope_info: u64,
    pub shared_script: u64,
    pub script_name: u64,
    pub script_source: u64,
    pub string_length: u64,
    pub seq_one_byte_chars: u64,
    pub seq_two_byte_chars: u64,
    pub cons_first: u64,
    pub cons_second: u64,
    pub thin_actual: u64,
    pub sliced_parent: u64,
    pub sliced_offset: u64,
    /// The external string's cached data pointer follows its resource.
    pub external_data: u64,
    pub fixed_array_length: u64,
    pub bytecode_data: u64,
    pub first_nonstring: u16,
    pub encoding_mask: u16,
    pub one_byte: u16,
    pub representation_mask: u16,
    pub seq: u16,
    pub cons: u16,
    pub external: u16,
    pub sliced: u16,
    pub thin: u16,
    pub js_function: std::ops::Range<u16>,
    pub shared_function_info: u16,
    pub scope_info: u16,
    pub script: u16,
    pub bytecode_array: u16,
    pub scope_first_vars: u64,
    pub scope_context_locals: u64,
}

impl Layout {
    /// The layout from the constants (`NAMES`, by name), or why not.
    pub fn new(c: &HashMap<String, i64>) -> Result<Layout, String> {
        if let Some(n) = NAMES.iter().find(|n| !c.contains_key(**n)) {
            return Err(format!("it lacks v8dbg_{n}"));
        }
        let g = |n: &str| c[n];
        let u = |n: &str| g(n) as u64;
        let t = |n: &str| g(n) as u16;
        if g("TaggedSize") != 8 {
            return Err(format!(
                "its tagged fields are {} bytes (pointer compression), which kerntax does not read",
                g("TaggedSize")
            ));
        }
        let function = t("type_JSFunction__JS_FUNCTION_TYPE");
        Ok(Layout {
            heap_object_tag: u("HeapObjectTag"),
            heap_object_tag_mask: u("HeapObjectTagMask"),
            smi_shift: (g("SmiShiftSize") + 1) as u32,
            fp_context: g("off_fp_context_or_frame_type"),
            fp_function: g("off_fp_function"),
            fp_bytecode_array: g("off_fp_bytecode_array"),
            fp_bytecode_offset: g("off_fp_bytecode_offset"),
            map: u("class_HeapObject__map__Map"),
            map_instance_type: u("class_Map__instance_type__uint16_t"),
            function_shared: u("class_JSFunction__shared__SharedFunctionInfo"),
            shared_name_or_scope_info: u("class_SharedFunctionInfo__name_or_scope_info__Object"),
            shared_script: u("class_SharedFunctionInfo__script_or_debug_info__HeapObject"),
            script_name: u("class_Script__name__Object"),
            script_source: u("class_Script__source__Object"),
            string_length: u("class_String__length__int32_t"),
            seq_one_byte_chars: u("class_SeqOneByteString__chars__char"),
            seq_two_byte_chars: u("class_SeqTwoByteString__chars__char"),
            cons_first: u("class_ConsString__first__String"),
            cons_second: u("class_ConsString__second__String"),
            thin_actual: u("class_ThinString__actual__String"),
            sliced_parent: u("class_SlicedString__parent__String"),
            sliced_offset: u("class_SlicedString__offset__SMI"),
            external_data: u("class_ExternalString__resource__Object") + 8,
            fixed_array_length: u("class_FixedArrayBase__length__SMI"),
            bytecode_data: u("class_BytecodeArray__data__uintptr_t"),
            first_nonstring: t("FirstNonstringType"),
            encoding_mask: t("StringEncodingMask"),
            one_byte: t("OneByteStringTag"),
            representation_mask: t("StringRepresentationMask"),
            seq: t("SeqStringTag"),
            cons: t("ConsStringTag"),
            external: t("ExternalStringTag"),
            sliced: t("SlicedStringTag"),
            thin: t("ThinStringTag"),
            js_function: function..function + JS_FUNCTION_TYPES,
            shared_function_info: t("type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE"),
            scope_info: t("type_ScopeInfo__SCOPE_INFO_TYPE"),
            script: t("type_Script__SCRIPT_TYPE"),
            bytecode_array: t("type_BytecodeArray__BYTECODE_ARRAY_TYPE"),
            scope_first_vars: u("scopeinfo_idx_first_vars"),
            scope_context_locals: u("scopeinfo_idx_ncontextlocals"),
        })
    }

    /// Whether `word` is a tagged pointer to a heap object.
    pub fn is_heap_object(&self, word: u64) -> bool {
        word & self.heap_object_tag_mask == self.heap_object_tag && word > 0x1000
    }

    /// The value of a small integer, if `word` is one.
    pub fn smi(&self, word: u64) -> Option<i64> {
        (word & 1 == 0).then_some((word as i64) >> self.smi_shift)
    }

    /// The address of the heap object `word` tags.
    pub fn untag(&self, word: u64) -> u64 {
        word & !self.heap_object_tag_mask
    }
}

/// The `v8dbg_*` constants the binary at `path` exports (`NAMES`, by name
/// without the prefix); None if it exports none of them (not a V8).
pub fn constants(path: &str) -> Option<HashMap<String, i64>> {
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: a read-only private mapping of a binary on disk; one replaced
    // under it would be a new inode.
    let data = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let obj = object::File::parse(&*data).ok()?;
    let mut out = HashMap::new();
    for s in obj.dynamic_symbols().chain(obj.symbols()) {
        let Ok(name) = s.name() else { continue };
        let Some(short) = name.strip_prefix("v8dbg_") else {
            continue;
        };
        if !NAMES.contains(&short) || out.contains_key(short) {
            continue;
        }
        let Some(section) = s.section_index().and_then(|i| obj.section_by_index(i).ok()) else {
            continue;
        };
        let value = if section.kind() == SectionKind::UninitializedData {
            0
        } else {
            let Ok(bytes) = section.data() else { continue };
            let off = s.address().wrapping_sub(section.address()) as usize;
            let Some(b) = bytes.get(off..off + 4) else {
                continue;
            };
            i64::from(i32::from_le_bytes(b.try_into().ok()?))
        };
        out.insert(short.to_string(), value);
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Node 20's constants (V8 11.3), as `constants` reads them from
    /// Debian's node.
    pub(crate) fn node20() -> HashMap<String, i64> {
        let v: &[(&str, i64)] = &[
            ("TaggedSize", 8),
            ("HeapObjectTag", 1),
            ("HeapObjectTagMask", 3),
            ("SmiTagMask", 1),
            ("SmiShiftSize", 31),
            ("off_fp_context_or_frame_type", -8),
            ("off_fp_function", -16),
            ("off_fp_bytecode_array", -32),
            ("off_fp_bytecode_offset", -40),
            ("class_HeapObject__map__Map", 0),
            ("class_Map__instance_type__uint16_t", 12),
            ("class_JSFunction__shared__SharedFunctionInfo", 24),
            ("class_SharedFunctionInfo__name_or_scope_info__Object", 16),
            (
                "class_SharedFunctionInfo__script_or_debug_info__HeapObject",
                32,
            ),
            ("class_Script__name__Object", 16),
            ("class_Script__source__Object", 8),
            ("class_String__length__int32_t", 12),
            ("class_SeqOneByteString__chars__char", 16),
            ("class_SeqTwoByteString__chars__char", 16),
            ("class_ConsString__first__String", 16),
            ("class_ConsString__second__String", 24),
            ("class_ThinString__actual__String", 16),
            ("class_SlicedString__parent__String", 16),
            ("class_SlicedString__offset__SMI", 24),
            ("class_ExternalString__resource__Object", 16),
            ("class_FixedArrayBase__length__SMI", 8),
            ("class_BytecodeArray__data__uintptr_t", 54),
            ("FirstNonstringType", 128),
            ("StringEncodingMask", 8),
            ("OneByteStringTag", 8),
            ("StringRepresentationMask", 7),
            ("SeqStringTag", 0),
            ("ConsStringTag", 1),
            ("ExternalStringTag", 2),
            ("SlicedStringTag", 3),
            ("ThinStringTag", 5),
            ("type_JSFunction__JS_FUNCTION_TYPE", 2066),
            ("type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", 262),
            ("type_ScopeInfo__SCOPE_INFO_TYPE", 261),
            ("type_Script__SCRIPT_TYPE", 167),
            ("type_BytecodeArray__BYTECODE_ARRAY_TYPE", 191),
            ("scopeinfo_idx_first_vars", 3),
            ("scopeinfo_idx_ncontextlocals", 2),
        ];
        v.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn a_build_with_every_constant_has_a_layout_and_one_lacking_one_says_which() {
        let l = Layout::new(&node20()).unwrap();
        assert_eq!(l.smi(5u64 << 32), Some(5));
        assert_eq!(l.smi(0x1001), None);
        assert!(l.is_heap_object(0x7f00_0000_1001));
        assert_eq!(l.untag(0x7f00_0000_1001), 0x7f00_0000_1000);
        assert_eq!(l.js_function, 2066..2081);
        let mut c = node20();
        c.remove("class_Script__name__Object");
        assert_eq!(
            Layout::new(&c).unwrap_err(),
            "it lacks v8dbg_class_Script__name__Object"
        );
        let mut c = node20();
        c.insert("TaggedSize".into(), 4);
        assert!(Layout::new(&c).unwrap_err().contains("pointer compression"));
    }

    /// The constants of the node on this machine, where there is one.
    #[test]
    fn the_node_here_exports_every_constant_read() {
        let Ok(path) = std::fs::canonicalize("/usr/bin/node") else {
            return;
        };
        let c = constants(path.to_str().unwrap()).expect("node exports v8dbg_ constants");
        Layout::new(&c).expect("node's constants make a layout");
    }
}
