//! The BPF side's part (src/bpf/python.bpf.h): what user space tells it
//! about a CPython process (`kt_py_proc`: where the thread state is, the
//! frame layout of its minor version) and the frame records it sends back
//! with each stack sample.

use crate::collect::bpf::types;
use crate::collect::events::constants::{
    KT_PY_FAULT, KT_PY_NO_THREAD, KT_PY_RUBY, KT_PY_TRUNCATED, KT_PY_WALKED,
};

/// One frame as BPF read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PyFrameRec {
    /// The code object's address.
    pub code: u64,
    /// The instruction it last ran, in code units (-1: none yet).
    pub lasti: i32,
    /// The frame's `is_entry` byte (3.11): the first Python frame a C call
    /// entered the eval loop with.
    pub entry: u8,
    /// The frame's `owner` byte (3.12: 3 is a C-stack shim frame).
    pub owner: u8,
}

/// A thread's Python frames at a sample, innermost first.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PyFrames {
    pub frames: Vec<PyFrameRec>,
    /// The thread has no Python thread state (a thread Python never ran on).
    pub no_thread: bool,
    /// A read failed midway: the frames up to it are kept.
    pub fault: bool,
    /// Deeper than BPF records (KT_PY_FRAMES).
    pub truncated: bool,
}

/// Bytes of one record (`struct kt_py_frame`).
pub const RECORD_BYTES: usize = 16;

impl PyFrames {
    /// The records BPF sent (`py_flags`, then `py_frames` records); None
    /// when the process is not registered as a CPython.
    pub fn decode(flags: u16, bytes: &[u8]) -> Option<PyFrames> {
        let flags = u32::from(flags);
        if flags & KT_PY_WALKED == 0 || flags & KT_PY_RUBY != 0 {
            return None;
        }
        let frames = bytes
            .chunks_exact(RECORD_BYTES)
            .map(|r| PyFrameRec {
                code: u64::from_le_bytes(r[0..8].try_into().unwrap_or_default()),
                lasti: i32::from_le_bytes(r[8..12].try_into().unwrap_or_default()),
                entry: r[12],
                owner: r[13],
            })
            .collect();
        Some(PyFrames {
            frames,
            no_thread: flags & KT_PY_NO_THREAD != 0,
            fault: flags & KT_PY_FAULT != 0,
            truncated: flags & KT_PY_TRUNCATED != 0,
        })
    }
}

/// glibc x86-64 (2.36, Debian 12): a key below 32 has its value in the
/// thread descriptor, at the thread pointer plus 0x310 (`specific_1stblock`)
/// plus 16 bytes per key, of which the value is the second word. Checked
/// by what the walk finds: code objects that are code objects.
pub const GLIBC_TSD_OFFSET: u32 = 0x310 + 8;
pub const GLIBC_TSD_STRIDE: u32 = 16;

/// The frame layout of CPython 3.`minor`, as `kt_py_proc` carries it;
/// None for a minor version not supported.
pub fn frame_layout(minor: u32) -> Option<types::kt_py_proc> {
    let mut p = types::kt_py_proc {
        tsd_offset: GLIBC_TSD_OFFSET,
        tsd_stride: GLIBC_TSD_STRIDE,
        // PyThreadState.cframe, the same in both.
        tstate_cframe: 56,
        ..Default::default()
    };
    match minor {
        11 => {
            // _PyCFrame: use_tracing, then current_frame.
            p.cframe_frame = 8;
            // _PyInterpreterFrame: f_func, f_globals, f_builtins, f_locals,
            // f_code, frame_obj, previous, prev_instr, stacktop, is_entry,
            // owner.
            p.frame_code = 32;
            p.frame_previous = 48;
            p.frame_instr = 56;
            p.frame_entry = 68;
            p.frame_owner = 69;
        }
        12 => {
            p.cframe_frame = 0;
            // f_code, previous, f_funcobj, f_globals, f_builtins, f_locals,
            // frame_obj, prev_instr, stacktop, return_offset, owner.
            p.frame_code = 0;
            p.frame_previous = 8;
            p.frame_instr = 56;
            p.frame_entry = 70;
            p.frame_owner = 70;
        }
        _ => return None,
    }
    Some(p)
}

/// 3.12's `owner` of a shim frame a C call pushes before entering the eval
/// loop (FRAME_OWNED_BY_CSTACK): the end of one run of Python frames.
pub const OWNED_BY_CSTACK: u8 = 3;

impl PyFrameRec {
    /// Whether this frame is the outermost of the run of frames one eval
    /// loop activation runs.
    pub fn ends_run(&self, minor: u32) -> bool {
        match minor {
            11 => self.entry != 0,
            _ => false,
        }
    }

    /// 3.12's shim frames are no Python code.
    pub fn is_shim(&self, minor: u32) -> bool {
        minor >= 12 && self.owner == OWNED_BY_CSTACK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_decode_innermost_first_with_their_flags() {
        let mut bytes = Vec::new();
        for (code, lasti, entry) in [(0x7f00_0010u64, 12i32, 0u8), (0x7f00_0020, -1, 1)] {
            bytes.extend(code.to_le_bytes());
            bytes.extend(lasti.to_le_bytes());
            bytes.extend([entry, 0, 0, 0]);
        }
        let f = PyFrames::decode((KT_PY_WALKED | KT_PY_FAULT) as u16, &bytes).unwrap();
        assert_eq!(f.frames.len(), 2);
        assert_eq!((f.frames[0].code, f.frames[0].lasti), (0x7f00_0010, 12));
        assert_eq!((f.frames[1].lasti, f.frames[1].entry), (-1, 1));
        assert!(f.fault && !f.no_thread && !f.truncated);
        // Not a Python process: nothing.
        assert_eq!(PyFrames::decode(0, &[]), None);
    }

    #[test]
    fn only_311_and_312_have_a_layout() {
        assert_eq!(frame_layout(11).unwrap().frame_code, 32);
        assert_eq!(frame_layout(12).unwrap().frame_code, 0);
        assert!(frame_layout(10).is_none() && frame_layout(13).is_none());
    }
}
