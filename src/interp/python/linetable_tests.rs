//! Hand-made tables, one per entry kind; tests/python_frames.rs checks the
//! decoder against tables the real interpreter wrote.

use super::*;

/// An entry's first byte: kind and code units covered.
fn head(kind: u8, units: u8) -> u8 {
    0x80 | (kind << 3) | (units - 1)
}

#[test]
fn each_kind_moves_the_running_line_as_specified() {
    let table = [
        head(0, 2),
        0x05, // short form: same line (10), a column byte
        head(11, 1),
        3,
        9, // one-line form: +1 (11)
        head(13, 3),
        0x04,        // no column: +2 (13)
        head(15, 1), // no location: line None, running line kept
        head(13, 1),
        0x03, // no column: -1 (12)
        head(14, 2),
        0x06,
        0,
        5,
        7, // long: +3 (15), then end line, column, end column
    ];
    let got = ranges(&table, 10).unwrap();
    let lines: Vec<(u32, u32, Option<i32>)> =
        got.iter().map(|r| (r.start, r.end, r.line)).collect();
    assert_eq!(
        lines,
        [
            (0, 2, Some(10)),
            (2, 3, Some(11)),
            (3, 6, Some(13)),
            (6, 7, None),
            (7, 8, Some(12)),
            (8, 10, Some(15)),
        ]
    );
    assert_eq!(line_at(&table, 10, 4), Ok(Some(13)));
    assert_eq!(line_at(&table, 10, 6), Ok(None));
    assert_eq!(line_at(&table, 10, 9), Ok(Some(15)));
    // Past the table's end: no line.
    assert_eq!(line_at(&table, 10, 10), Ok(None));
    // Not started yet: the first line.
    assert_eq!(line_at(&table, 10, -1), Ok(Some(10)));
}

#[test]
fn varints_carry_six_bits_per_byte() {
    // +100 as a signed varint: 200 = 0b11_001000 -> 0x48 (8 | continue), 3.
    let table = [head(13, 1), 0x48, 0x03];
    assert_eq!(line_at(&table, 1, 0), Ok(Some(101)));
    // -100: 201 -> 0x49, 3.
    let table = [head(13, 1), 0x49, 0x03];
    assert_eq!(line_at(&table, 1, 0), Ok(Some(-99)));
}

#[test]
fn a_damaged_table_is_an_error_not_a_panic_or_a_line() {
    // An operand where an entry should start.
    let e = ranges(&[head(0, 1), 0, 0x05], 1).unwrap_err();
    assert_eq!((e.at_byte, e.what), (2, "entry without its start bit"));
    // Cut inside an entry.
    assert_eq!(
        ranges(&[head(11, 1), 1], 1).unwrap_err().what,
        "truncated entry"
    );
    // A varint that never ends.
    let mut endless = vec![head(13, 1)];
    endless.extend([0x7f; 8]);
    assert_eq!(ranges(&endless, 1).unwrap_err().what, "varint too long");
    // A line that leaves i32 is no line.
    let table = [head(13, 1), 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x0f];
    assert_eq!(line_at(&table, i32::MAX, 0), Ok(None));
    // An empty table has no lines.
    assert_eq!(ranges(&[], 1), Ok(vec![]));
}
