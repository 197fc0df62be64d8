//! A small V8 heap laid out by hand with node 20's constants: a function,
//! its SharedFunctionInfo, ScopeInfo, name, Script and source.

use super::*;
use crate::interp::memory::FakeMemory;
use crate::interp::v8::layout::tests::node20;

const MAPS: u64 = 0x10_0000;
const HEAP: u64 = 0x20_0000;

fn layout() -> Layout {
    Layout::new(&node20()).unwrap()
}

/// Builds objects: each a map (with its instance type) and fields.
struct Heap {
    maps: Vec<u8>,
    heap: Vec<u8>,
}

impl Heap {
    fn new() -> Heap {
        Heap {
            maps: vec![0; 0x1000],
            heap: vec![0; 0x4000],
        }
    }

    /// The tagged map of instance type `t`.
    fn map(&mut self, t: u16) -> u64 {
        let off = u64::from(t) * 16 % 0xf00;
        self.maps[off as usize + 12..off as usize + 14].copy_from_slice(&t.to_le_bytes());
        MAPS + off + 1
    }

    /// Puts an object of type `t` at heap offset `off`: its tagged address.
    fn object(&mut self, off: u64, t: u16) -> u64 {
        let m = self.map(t);
        self.word(off, 0, m);
        HEAP + off + 1
    }

    fn word(&mut self, off: u64, field: u64, v: u64) {
        let at = (off + field) as usize;
        self.heap[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    fn bytes(&mut self, off: u64, field: u64, b: &[u8]) {
        let at = (off + field) as usize;
        self.heap[at..at + b.len()].copy_from_slice(b);
    }

    /// A one-byte sequential string at `off`.
    fn string(&mut self, off: u64, s: &str) -> u64 {
        let t = self.object(off, 40);
        self.bytes(off, 12, &(s.len() as u32).to_le_bytes());
        self.bytes(off, 16, s.as_bytes());
        t
    }

    fn memory(self) -> FakeMemory {
        FakeMemory {
            blocks: vec![(MAPS, self.maps), (HEAP, self.heap)],
        }
    }
}

fn smi(v: i64) -> u64 {
    (v as u64) << 32
}

/// A function `burn` at line 3 of /srv/work.js, with two context locals
/// before its name in the ScopeInfo.
fn burn() -> (FakeMemory, u64) {
    let mut h = Heap::new();
    let source = "// work\n\nfunction burn(n) {\n  return n;\n}\n";
    let src = h.string(0x1000, source);
    let file = h.string(0x1100, "/srv/work.js");
    let name = h.string(0x1180, "burn");
    let local = h.string(0x11c0, "n");
    let script = h.object(0x1200, 167);
    h.word(0x1200, 8, src);
    h.word(0x1200, 16, file);
    let scope = h.object(0x1300, 261);
    // flags, parameters, context locals (2: names then infos), name,
    // a Smi that is no position pair yet, then start and end.
    let slots = [
        smi(0x1234),
        smi(1),
        smi(2),
        local,
        local,
        smi(0),
        smi(0),
        name,
        smi(-1),
        smi(10),
        smi(44),
    ];
    for (i, s) in slots.iter().enumerate() {
        h.word(0x1300, 8 + 8 * i as u64, *s);
    }
    let shared = h.object(0x1400, 262);
    h.word(0x1400, 16, scope);
    h.word(0x1400, 32, script);
    let function = h.object(0x1500, 2066);
    h.word(0x1500, 24, shared);
    (h.memory(), function)
}

#[test]
fn a_function_is_named_from_its_scope_info_and_its_script() {
    let l = layout();
    let (mem, function) = burn();
    let shared = shared_of(&mem, &l, function).expect("a JSFunction");
    let f = function_at(&mem, &l, shared);
    assert_eq!(f.name.as_deref(), Some("burn"));
    assert_eq!(
        script_name(&mem, &l, f.script).as_deref(),
        Some("/srv/work.js")
    );
    let starts = line_starts(&mem, &l, f.script).unwrap();
    assert_eq!(starts, vec![0, 8, 9, 28, 40, 42]);
    // Position 10 is in "function burn" on line 3.
    assert_eq!(f.start, 10);
    assert_eq!(line_of(&starts, f.start), 3);
    assert_eq!(line_of(&starts, 0), 1);
    assert_eq!(line_of(&starts, -1), 0);
}

fn function_at(mem: &FakeMemory, l: &Layout, shared: u64) -> JsFunction {
    function(
        mem,
        l,
        shared_words(mem, l, shared).expect("a SharedFunctionInfo"),
    )
}

/// An anonymous function assigned to `Module._compile`: its ScopeInfo's
/// function name is empty, and the name V8 inferred follows it.
#[test]
fn an_anonymous_function_is_named_as_v8_inferred() {
    let l = layout();
    let mut h = Heap::new();
    let empty = h.string(0x100, "");
    let inferred = h.string(0x140, "Module._compile");
    let scope = h.object(0x200, 261);
    let slots = [
        smi(0),
        smi(2),
        smi(0),
        empty,
        smi(3),
        inferred,
        smi(5),
        smi(90),
    ];
    for (i, s) in slots.iter().enumerate() {
        h.word(0x200, 8 + 8 * i as u64, *s);
    }
    let shared = h.object(0x300, 262);
    h.word(0x300, 16, scope);
    h.word(0x300, 32, smi(0));
    let mem = h.memory();
    let f = function_at(&mem, &l, shared);
    assert_eq!(f.name.as_deref(), Some("Module._compile"));
    assert_eq!((f.script, f.start), (0, 5));
    // Without the inferred name: anonymous, its position still found.
    let mut h = Heap::new();
    let empty = h.string(0x100, "");
    let scope = h.object(0x200, 261);
    let slots = [smi(0), smi(2), smi(0), empty, smi(-1), smi(5), smi(90)];
    for (i, s) in slots.iter().enumerate() {
        h.word(0x200, 8 + 8 * i as u64, *s);
    }
    let shared = h.object(0x300, 262);
    h.word(0x300, 16, scope);
    let mem = h.memory();
    let f = function_at(&mem, &l, shared);
    assert_eq!((f.name.as_deref(), f.start), (Some(""), 5));
}

#[test]
fn a_word_that_is_not_a_function_reads_as_none() {
    let l = layout();
    let (mem, function) = burn();
    // A Smi, an untagged word, an object of another type, nothing mapped.
    assert_eq!(shared_of(&mem, &l, smi(7)), None);
    assert_eq!(shared_of(&mem, &l, function - 1), None);
    assert_eq!(shared_of(&mem, &l, HEAP + 0x1400 + 1), None);
    assert_eq!(shared_of(&mem, &l, 0x7000_0001), None);
}

#[test]
fn cons_thin_and_sliced_strings_read_as_their_characters() {
    let l = layout();
    let mut h = Heap::new();
    let a = h.string(0x100, "wait");
    let b = h.string(0x180, "ForJob");
    let cons = h.object(0x200, 41);
    h.bytes(0x200, 12, &10u32.to_le_bytes());
    h.word(0x200, 16, a);
    h.word(0x200, 24, b);
    let thin = h.object(0x280, 45);
    h.bytes(0x280, 12, &10u32.to_le_bytes());
    h.word(0x280, 16, cons);
    let sliced = h.object(0x300, 43);
    h.bytes(0x300, 12, &3u32.to_le_bytes());
    h.word(0x300, 16, b);
    h.word(0x300, 24, smi(3));
    let two = h.object(0x380, 32);
    h.bytes(0x380, 12, &2u32.to_le_bytes());
    h.bytes(0x380, 16, &[0x68, 0, 0xe9, 0]);
    let mem = h.memory();
    assert_eq!(string(&mem, &l, cons, 100).as_deref(), Some("waitForJob"));
    assert_eq!(string(&mem, &l, cons, 6).as_deref(), Some("waitFo"));
    assert_eq!(string(&mem, &l, thin, 100).as_deref(), Some("waitForJob"));
    assert_eq!(string(&mem, &l, sliced, 100).as_deref(), Some("Job"));
    assert_eq!(string(&mem, &l, two, 100).as_deref(), Some("hé"));
}

/// One entry of a source position table: code offset delta (negative for
/// an expression), raw position delta, each zigzag VLQ.
fn entry(out: &mut Vec<u8>, code_delta: i64, statement: bool, pos_delta: i64) {
    for v in [
        if statement {
            code_delta
        } else {
            -code_delta - 1
        },
        pos_delta,
    ] {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        loop {
            let b = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
    }
}

/// A raw source position for script offset `p`.
fn raw(p: i64) -> i64 {
    (p + 1) << 1
}

#[test]
fn a_bytecode_offset_reads_the_position_of_the_last_entry_at_or_before_it() {
    let mut t = Vec::new();
    entry(&mut t, 0, true, raw(30));
    entry(&mut t, 5, false, raw(200) - raw(30));
    entry(&mut t, 300, true, raw(1000) - raw(200));
    assert_eq!(position_at(&t, 0), Some(30));
    assert_eq!(position_at(&t, 4), Some(30));
    assert_eq!(position_at(&t, 5), Some(200));
    assert_eq!(position_at(&t, 304), Some(200));
    assert_eq!(position_at(&t, 305), Some(1000));
    assert_eq!(position_at(&t, 10_000), Some(1000));
    assert_eq!(position_at(&[], 3), None);
    // Cut inside a number: no position past what was read.
    assert_eq!(position_at(&t[..t.len() - 1], 10_000), Some(200));
}
