//! A Method read from bytes laid out as a JVM's tables say, and line
//! tables decoded as HotSpot writes them.

use super::*;
use crate::interp::hotspot::vmstructs::{Field, Tables};
use std::collections::HashMap;

/// Memory in a test: bytes at addresses.
struct Bytes(Vec<(u64, Vec<u8>)>);

impl Memory for Bytes {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        for (at, b) in &self.0 {
            if addr >= *at && addr + buf.len() as u64 <= at + b.len() as u64 {
                let o = (addr - at) as usize;
                buf.copy_from_slice(&b[o..o + buf.len()]);
                return Ok(());
            }
        }
        Err(io::Error::from(io::ErrorKind::UnexpectedEof))
    }
}

#[test]
fn short_and_escaped_pairs_decode_to_bci_and_line() {
    // (0, 10) escaped, (3, 11) short, (40, 9) escaped with a negative
    // line delta, then the end.
    let zigzag = |v: i32| ((v << 1) ^ (v >> 31)) as u8;
    let table = [
        0xff,
        zigzag(0),
        zigzag(10),
        3 << 3 | 1,
        0xff,
        zigzag(37),
        zigzag(-2),
        0,
    ];
    assert_eq!(
        decode_lines(&table, 0),
        Some(vec![(0, 10), (3, 11), (40, 9)])
    );
    // JDK 20+: every UNSIGNED5 byte one higher, no zero bytes.
    let shifted = [0xff, zigzag(0) + 1, zigzag(10) + 1, 3 << 3 | 1, 0];
    assert_eq!(decode_lines(&shifted, 1), Some(vec![(0, 10), (3, 11)]));
    // Cut before its end: not a table.
    assert_eq!(decode_lines(&table[..4], 0), None);
    // A number of two bytes: 192 + 64 * 1 = 256 bytecodes on.
    let long = [0xff, 192, 1, zigzag(1), 0];
    assert_eq!(decode_lines(&long, 0), Some(vec![(128, 1)]));
}

#[test]
fn the_line_is_the_entry_at_the_bci_or_the_nearest_before() {
    let m = JavaMethod {
        name: "A.b".into(),
        file: None,
        code: 0x1000..0x1100,
        lines: vec![(0, 10), (8, 12), (4, 11)],
    };
    assert_eq!(m.line_at(0x1000), 10);
    assert_eq!(m.line_at(0x1004), 11);
    assert_eq!(m.line_at(0x1006), 11);
    assert_eq!(m.line_at(0x1050), 12);
    assert_eq!(m.line_at(0x1100), 0);
    assert_eq!(m.line_at(0), 0);
}

/// A JVM's objects as JDK 17 lays them out, at made-up addresses.
fn jdk17() -> (Tables, Bytes) {
    let mut t = Tables::default();
    let mut f = |ty: &str, field: &str, v: Field| {
        t.fields.insert((ty.into(), field.into()), v);
    };
    f(
        "Abstract_VM_Version",
        "_vm_major_version",
        Field::Static(0x100),
    );
    f("Method", "_constMethod", Field::Offset(8));
    f("ConstMethod", "_constants", Field::Offset(8));
    f("ConstMethod", "_flags", Field::Offset(18));
    f("ConstMethod", "_code_size", Field::Offset(20));
    f("ConstMethod", "_name_index", Field::Offset(22));
    f("ConstantPool", "_pool_holder", Field::Offset(16));
    f(
        "InstanceKlass",
        "_source_file_name_index",
        Field::Offset(40),
    );
    f("Klass", "_name", Field::Offset(24));
    f("Symbol", "_length", Field::Offset(4));
    f("Symbol", "_body", Field::Offset(6));
    f("AbstractInterpreter", "_code", Field::Static(0x108));
    f("StubQueue", "_stub_buffer", Field::Offset(8));
    f("StubQueue", "_buffer_limit", Field::Offset(16));
    t.sizes = HashMap::from([("ConstMethod".into(), 48), ("ConstantPool".into(), 64)]);
    let symbol = |s: &str| {
        let mut b = vec![0u8; 4];
        b.extend((s.len() as u16).to_le_bytes());
        b.extend(s.as_bytes());
        b
    };
    let mut cm = vec![0u8; 48];
    cm[8..16].copy_from_slice(&0x3000u64.to_le_bytes());
    cm[18] = 1; // has a line table
    cm[20..22].copy_from_slice(&16u16.to_le_bytes());
    cm[22..24].copy_from_slice(&1u16.to_le_bytes());
    cm.extend([0u8; 16]); // bytecodes
    cm.extend([0xff, 0, 84, 8 << 3 | 2, 0]); // (0, 42), (8, 44)
    cm.resize(0x1000, 0xee); // the rest of its page
    let mut cp = vec![0u8; 64];
    cp[16..24].copy_from_slice(&0x4000u64.to_le_bytes());
    cp.extend(0u64.to_le_bytes()); // index 0
    cp.extend(0x5000u64.to_le_bytes()); // 1: the method's name
    cp.extend(0x5100u64.to_le_bytes()); // 2: the source file
    let mut ik = vec![0u8; 48];
    ik[24..32].copy_from_slice(&0x5200u64.to_le_bytes());
    ik[40..42].copy_from_slice(&2u16.to_le_bytes());
    let mut stubs = vec![0u8; 24];
    stubs[8..16].copy_from_slice(&0x7000_0000u64.to_le_bytes());
    stubs[16..20].copy_from_slice(&0x2_0000u32.to_le_bytes());
    let mut statics = 17u32.to_le_bytes().to_vec();
    statics.extend([0; 4]);
    statics.extend(0x6000u64.to_le_bytes());
    let mem = Bytes(vec![
        (0x100, statics),
        (
            0x1000,
            [0u64.to_le_bytes(), 0x2000u64.to_le_bytes()].concat(),
        ),
        (0x2000, cm),
        (0x3000, cp),
        (0x4000, ik),
        (0x5000, symbol("getTask")),
        (0x5100, symbol("ThreadPoolExecutor.java")),
        (0x5200, symbol("java/util/concurrent/ThreadPoolExecutor")),
        (0x6000, stubs),
    ]);
    (t, mem)
}

#[test]
fn a_method_is_named_as_its_compiled_code_with_its_file_and_lines() {
    let (t, mem) = jdk17();
    let l = Layout::new(&t, &mem).unwrap();
    assert_eq!(l.major, 17);
    assert_eq!(l.interpreter(&mem), Some(0x7000_0000..0x7002_0000));
    let m = read(&mem, &l, 0x1000).unwrap();
    assert_eq!(m.name, "java.util.concurrent.ThreadPoolExecutor.getTask");
    assert_eq!(m.file.as_deref(), Some("ThreadPoolExecutor.java"));
    assert_eq!(m.code, 0x2030..0x2040);
    assert_eq!(l.const_method_of(&m), 0x2000);
    assert_eq!(m.lines, vec![(0, 42), (8, 44)]);
    assert_eq!(m.line_at(0x2039), 44);
    // Words that are not a Method.
    assert!(read(&mem, &l, 0).is_err());
    assert!(read(&mem, &l, 0x1001).is_err());
    assert!(read(&mem, &l, 0x9000).is_err());
}

#[test]
fn a_table_without_a_field_kerntax_needs_gives_no_layout() {
    let (mut t, mem) = jdk17();
    t.fields
        .remove(&("Method".to_string(), "_constMethod".to_string()));
    assert_eq!(Layout::new(&t, &mem), None);
}
