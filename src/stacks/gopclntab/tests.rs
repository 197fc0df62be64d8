//! The table read from bytes built here: names, files and lines, each
//! layout, and cut or corrupt tables (None, never a panic).

use super::*;

/// A table of two functions, `main.a` at 0x1000 and `runtime.park` at
/// 0x1040, ending at 0x1080, in the 1.18 layout (offsets from a text
/// start of 0x1000) or the 1.16 one (addresses).
fn table(layout: Layout) -> Vec<u8> {
    let ptr = 8usize;
    let fields = if layout == Layout::Go118 { 8 } else { 7 };
    let header_len = 8 + fields * ptr;
    let names = b"main.a\0runtime.park\0";
    let funcnames = header_len;
    let functab = funcnames + names.len();
    let entry_size = if layout == Layout::Go118 { 8 } else { 16 };
    // Two _func records after the three entries.
    let funcs = 3 * entry_size;
    let func_len = 16;
    let mut t = vec![0u8; functab + funcs + 2 * func_len];
    let magic = if layout == Layout::Go118 {
        MAGIC_GO120
    } else {
        MAGIC_GO116
    };
    t[0..4].copy_from_slice(&magic.to_le_bytes());
    t[6] = 1;
    t[7] = ptr as u8;
    let put = |t: &mut Vec<u8>, at: usize, v: u64| t[at..at + 8].copy_from_slice(&v.to_le_bytes());
    put(&mut t, 8, 2); // nfunc
    let skip = usize::from(layout == Layout::Go118);
    put(&mut t, 8 + (2 + skip) * ptr, funcnames as u64);
    put(&mut t, 8 + (6 + skip) * ptr, functab as u64);
    t[funcnames..funcnames + names.len()].copy_from_slice(names);
    for (i, (entry, name_off)) in [(0x1000u64, 0u32), (0x1040, 7), (0x1080, 0)]
        .iter()
        .enumerate()
    {
        let func = (funcs + i * func_len) as u64;
        let at = functab + i * entry_size;
        if layout == Layout::Go118 {
            t[at..at + 4].copy_from_slice(&((entry - 0x1000) as u32).to_le_bytes());
            if i < 2 {
                t[at + 4..at + 8].copy_from_slice(&(func as u32).to_le_bytes());
                let f = functab + func as usize;
                t[f + 4..f + 8].copy_from_slice(&name_off.to_le_bytes());
            }
        } else {
            put(&mut t, at, *entry);
            if i < 2 {
                put(&mut t, at + 8, func);
                let f = functab + func as usize;
                t[f + 8..f + 12].copy_from_slice(&name_off.to_le_bytes());
            }
        }
    }
    t
}

fn funcs(bytes: &[u8]) -> Option<GoFuncs> {
    let mut m = memmap2::MmapMut::map_anon(bytes.len()).unwrap();
    m.copy_from_slice(bytes);
    GoFuncs::from_parts(m.make_read_only().unwrap(), 0..bytes.len(), 0x1000)
}

#[test]
fn the_headers_text_start_wins_over_the_sections() {
    let mut t = table(Layout::Go118);
    t[8 + 16..8 + 24].copy_from_slice(&0x1000u64.to_le_bytes());
    let mut m = memmap2::MmapMut::map_anon(t.len()).unwrap();
    m.copy_from_slice(&t);
    // The section starts 0x100 earlier (C code first).
    let g = GoFuncs::from_parts(m.make_read_only().unwrap(), 0..t.len(), 0xf00).unwrap();
    assert_eq!(g.name(0x1040), Some("runtime.park"));
    assert_eq!(g.name(0xf40), None);
}

#[test]
fn names_come_from_either_layout_and_nothing_outside_the_text() {
    for layout in [Layout::Go118, Layout::Go116] {
        let g = funcs(&table(layout)).expect("a table");
        assert_eq!(g.name(0x1000), Some("main.a"), "{layout:?}");
        assert_eq!(g.name(0x103f), Some("main.a"), "{layout:?}");
        assert_eq!(g.name(0x1040), Some("runtime.park"), "{layout:?}");
        assert_eq!(g.name(0x107f), Some("runtime.park"), "{layout:?}");
        assert_eq!(g.name(0x1080), None, "{layout:?}");
        assert_eq!(g.name(0xfff), None, "{layout:?}");
    }
}

#[test]
fn a_table_of_another_layout_or_cut_short_is_none_not_a_panic() {
    let mut t = table(Layout::Go118);
    t[0..4].copy_from_slice(&0xffff_fffbu32.to_le_bytes());
    assert!(funcs(&t).is_none());
    let t = table(Layout::Go118);
    for len in [0, 4, 8, 40, t.len() / 2] {
        let _ = funcs(&t[..len]).map(|g| g.name(0x1040).map(str::to_string));
    }
    let mut t = table(Layout::Go116);
    t[7] = 3;
    assert!(funcs(&t).is_none());
}

/// A Go 1.20 table of one function, `main.a` at 0x1000 to 0x1030: in
/// `main.go` line 10 to 0x1010, then in `util.go` line 300 to 0x1020 and
/// line 299 (a negative step) to the end.
fn lines_table() -> Vec<u8> {
    let mut t = vec![0u8; 184];
    t[0..4].copy_from_slice(&MAGIC_GO120.to_le_bytes());
    t[6] = 1;
    t[7] = 8;
    let put = |t: &mut Vec<u8>, at: usize, v: u64| t[at..at + 8].copy_from_slice(&v.to_le_bytes());
    let put32 =
        |t: &mut Vec<u8>, at: usize, v: u32| t[at..at + 4].copy_from_slice(&v.to_le_bytes());
    // nfunc, nfiles, text start, then the tables' offsets.
    for (i, v) in [1u64, 2, 0x1000, 72, 80, 88, 104, 116].iter().enumerate() {
        put(&mut t, 8 + i * 8, *v);
    }
    t[72..79].copy_from_slice(b"main.a\0");
    put32(&mut t, 80, 0);
    put32(&mut t, 84, 8);
    t[88..104].copy_from_slice(b"main.go\0util.go\0");
    // pctab: a pad byte (offset 0 is "no program"), pcfile at 1, pcln at 6.
    t[105..110].copy_from_slice(&[2, 0x10, 2, 0x20, 0]);
    t[110..118].copy_from_slice(&[22, 0x10, 0xc4, 0x04, 0x10, 1, 0x10, 0]);
    // functab at 116 would overlap: it is at 120 (the header says 116 for
    // pctab's end; move it).
    put(&mut t, 8 + 7 * 8, 120);
    put32(&mut t, 120, 0); // entry offset
    put32(&mut t, 124, 16); // _func at functab + 16
    put32(&mut t, 128, 0x30); // end
    let f = 136;
    put32(&mut t, f + 20, 1); // pcfile
    put32(&mut t, f + 24, 6); // pcln
    put32(&mut t, f + 36, 9); // start line
    t
}

#[test]
fn files_and_lines_come_from_the_functions_pc_value_programs() {
    let g = funcs(&lines_table()).expect("a table");
    let at = |addr| {
        g.frames(addr).map(|v| {
            v.iter()
                .map(|f| {
                    (
                        f.name.to_string(),
                        f.file.map(str::to_string),
                        f.line,
                        f.inlined,
                    )
                })
                .collect::<Vec<_>>()
        })
    };
    let frame = |file: &str, line| {
        vec![(
            "main.a".to_string(),
            Some(file.to_string()),
            Some(line),
            false,
        )]
    };
    assert_eq!(at(0x1000), Some(frame("main.go", 10)));
    assert_eq!(at(0x100f), Some(frame("main.go", 10)));
    assert_eq!(at(0x1010), Some(frame("util.go", 300)));
    assert_eq!(at(0x1020), Some(frame("util.go", 299)));
    assert_eq!(at(0x102f), Some(frame("util.go", 299)));
    assert_eq!(at(0x1030), None);
    assert_eq!(g.name(0x1020), Some("main.a"));
}

#[test]
fn a_program_cut_short_loses_the_line_not_the_name() {
    let mut t = lines_table();
    // The line program's varint never ends.
    t[110..118].copy_from_slice(&[0xff; 8]);
    let g = funcs(&t[..]).expect("a table");
    let v = g.frames(0x1018).expect("a frame");
    assert_eq!(
        (v[0].name, v[0].file, v[0].line),
        ("main.a", Some("util.go"), None)
    );
    // A file number past the compilation unit's files: no file.
    let mut t = lines_table();
    t[105..110].copy_from_slice(&[0x7e, 0x10, 2, 0x20, 0]);
    let g = funcs(&t[..]).expect("a table");
    assert_eq!(g.frames(0x1004).expect("a frame")[0].file, None);
}

#[test]
fn varints_and_zig_zag_steps_decode_as_go_writes_them() {
    assert_eq!(lines::varint(&[0x05], 0), Some((5, 1)));
    assert_eq!(lines::varint(&[0xc4, 0x04], 0), Some((580, 2)));
    assert_eq!(lines::varint(&[0x80, 0x80, 0x80, 0x80, 0x80], 0), None);
    assert_eq!(lines::varint(&[0x80], 0), None);
}
