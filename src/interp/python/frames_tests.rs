//! The merge of Python frames into native stacks, on made-up stacks: the
//! live interpreter's are in tests/python_frames.rs.

use super::*;
use crate::interp::Reader;

const PID: u32 = 4242;
const EVAL: std::ops::Range<u64> = 0x1000..0x2000;
const PATH: &str = "/usr/bin/python3.11";

fn native(svma: u64) -> FrameLoc {
    FrameLoc::InModule { module: 0, svma }
}

fn rec(code: u64, entry: u8) -> PyFrameRec {
    PyFrameRec {
        code,
        lasti: 3,
        entry,
        owner: 0,
    }
}

/// A Pythons with one 3.11 process whose code objects 0xa0.. are named
/// f_a0.. with every instruction on line 7.
fn pythons() -> Pythons {
    let mut p = Pythons::default();
    let mut codes = HashMap::new();
    for code in [0xa0u64, 0xb0, 0xc0, 0xd0] {
        let object = Some(Arc::new(CodeObject {
            qualname: format!("f_{code:x}"),
            filename: "/srv/app/main.py".into(),
            first_line: 7,
            // One entry: 8 units, same line (short form).
            linetable: vec![0x80 | 7, 0],
            identity: [code; 4],
        }));
        let id = p.objects.len() as u64;
        p.objects.push(object.clone());
        // Read in this batch: trusted without a check.
        codes.insert(
            code,
            Known {
                id,
                code: object,
                checked_in: 0,
            },
        );
    }
    p.procs.insert(
        PID,
        PyProcess {
            runtime: Runtime {
                path: PATH.into(),
                version: 0x030b_02f0,
                runtime: 0,
                code_type: 0,
                eval: EVAL,
                eval_svma: EVAL,
                key_addr: Some(0),
            },
            layout: None,
            codes,
        },
    );
    p
}

fn merged(
    frames: Vec<FrameLoc>,
    py: Vec<PyFrameRec>,
) -> (Vec<String>, crate::report::Interpreters) {
    let mut p = pythons();
    let py = PyFrames {
        frames: py,
        no_thread: false,
        fault: false,
        truncated: false,
    };
    let out = p.merge(PID, frames, &py, |f, eval, path| {
        matches!(f, FrameLoc::InModule { svma, .. } if eval.contains(svma)) && path == PATH
    });
    (names(&p, &out), p.stats)
}

/// A merged stack as strings: Python frames by name, native by address.
fn names(p: &Pythons, frames: &[FrameLoc]) -> Vec<String> {
    frames
        .iter()
        .map(|f| match f {
            FrameLoc::Python { code, line, .. } => p.name(*code, *line).unwrap(),
            FrameLoc::InModule { svma, .. } => format!("native {svma:#x}"),
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn each_eval_frame_gives_way_to_the_run_of_python_frames_it_ran() {
    // time.sleep <- eval (leaf, mid) <- sorted <- eval (key's caller, main)
    // <- Py_RunMain.
    let frames = vec![
        native(0x300),
        native(0x1100),
        native(0x400),
        native(0x1200),
        native(0x500),
    ];
    let py = vec![rec(0xa0, 0), rec(0xb0, 1), rec(0xc0, 0), rec(0xd0, 1)];
    let (names, stats) = merged(frames, py);
    assert_eq!(
        names,
        [
            "native 0x300",
            "f_a0 (main.py:7)",
            "f_b0 (main.py:7)",
            "native 0x400",
            "f_c0 (main.py:7)",
            "f_d0 (main.py:7)",
            "native 0x500",
        ]
    );
    assert_eq!(
        (stats.samples, stats.frames, stats.merge_mismatches),
        (1, 4, 0)
    );
}

#[test]
fn runs_without_their_eval_frame_go_innermost_and_are_counted() {
    // The innermost eval frame was not unwound (its cold part): two runs,
    // one eval frame; the outer run pairs with it, the inner goes first.
    let frames = vec![native(0x300), native(0x1200), native(0x500)];
    let py = vec![rec(0xa0, 1), rec(0xc0, 0), rec(0xd0, 1)];
    let (names, stats) = merged(frames, py);
    assert_eq!(
        names,
        [
            "native 0x300",
            "f_a0 (main.py:7)",
            "f_c0 (main.py:7)",
            "f_d0 (main.py:7)",
            "native 0x500",
        ]
    );
    assert_eq!(stats.merge_mismatches, 1);
    // No eval frame at all (native unwinding stopped early): after them.
    let (names, _) = merged(vec![native(0x300)], vec![rec(0xa0, 1)]);
    assert_eq!(names, ["native 0x300", "f_a0 (main.py:7)"]);
}

#[test]
fn a_stack_without_python_frames_is_left_as_it_is() {
    let frames = vec![native(0x300), native(0x1100)];
    let (names, stats) = merged(frames, vec![]);
    assert_eq!(names, ["native 0x300", "native 0x1100"]);
    assert_eq!(stats.frames, 0);
}

#[test]
fn runs_split_at_entry_frames_and_at_312_shims() {
    let r = runs(&[rec(1, 0), rec(2, 1), rec(3, 1)], 11);
    assert_eq!(r.iter().map(Vec::len).collect::<Vec<_>>(), [2, 1]);
    let shim = PyFrameRec {
        owner: super::super::walk::OWNED_BY_CSTACK,
        ..rec(9, 0)
    };
    let r = runs(&[rec(1, 0), shim, rec(2, 0), rec(3, 0), shim], 12);
    assert_eq!(r.iter().map(Vec::len).collect::<Vec<_>>(), [1, 2]);
}

#[test]
fn files_are_shown_from_their_package_or_by_name() {
    assert_eq!(
        short_path("/usr/lib/python3.11/json/decoder.py"),
        "json/decoder.py"
    );
    assert_eq!(
        short_path("/usr/lib/python3/dist-packages/requests/api.py"),
        "requests/api.py"
    );
    assert_eq!(short_path("/srv/app/main.py"), "main.py");
    assert_eq!(short_path("<string>"), "<string>");
}

#[test]
fn a_chain_cut_short_pairs_from_the_innermost() {
    // Three eval frames, BPF recorded only the two inner runs.
    let mut p = pythons();
    let py = PyFrames {
        frames: vec![rec(0xa0, 1), rec(0xb0, 1)],
        no_thread: false,
        fault: false,
        truncated: true,
    };
    let frames = vec![
        native(0x1100),
        native(0x1200),
        native(0x1300),
        native(0x500),
    ];
    let out = p.merge(
        PID,
        frames,
        &py,
        |f, eval, _| matches!(f, FrameLoc::InModule { svma, .. } if eval.contains(svma)),
    );
    let names = names(&p, &out);
    assert_eq!(
        names,
        [
            "f_a0 (main.py:7)",
            "f_b0 (main.py:7)",
            "native 0x1300",
            "native 0x500"
        ]
    );
    assert_eq!(p.stats.merge_mismatches, 0);
}

/// Issue 20 (a suite run): a module body compiled from a string was read at
/// start-up, freed, and its address reused by `middle`'s code; the frames
/// of `middle` were named `<module> (<string>)`. A code object known from
/// an earlier batch is read again when its header says it is another.
#[test]
fn an_address_reused_by_another_code_object_is_read_again() {
    let mut p = pythons();
    // Process 1 does not exist: the check cannot read the header, so the
    // object known is not trusted in a later batch.
    let (id, _) = p.code(PID, 0xa0).unwrap();
    assert_eq!(id, 0);
    p.new_batch();
    let (id2, code) = p.code(PID, 0xa0).unwrap();
    assert!(id2 != id && code.is_none(), "{id2} {code:?}");
    // Both numbers keep naming what each was: the old frames keep their name.
    assert_eq!(p.name(id, 7).as_deref(), Some("f_a0 (main.py:7)"));
    assert_eq!(p.name(id2, 7), None);
}
