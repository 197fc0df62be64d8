//! A Ruby thread's control frames, from its execution context: the VM
//! stack's frames grow down from its end, the current one at `ec->cfp`.
//! The frame at the very end is a dummy the thread starts with, which
//! CRuby's own backtraces skip too.
//!
//! A frame runs Ruby code when it has an iseq and a program counter; a C
//! method's frame has neither (its code is native, named by the native
//! stack). Its environment's flags say its kind and whether it is the
//! outermost of its `rb_vm_exec` activation (FINISH).

use std::io;

use super::layout::*;
use crate::interp::memory::{Memory, u64_at};

/// Frames read at most (deeper is cut).
pub const MAX_FRAMES: usize = 128;

/// One control frame as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RbFrameRec {
    pub iseq: u64,
    pub pc: u64,
    /// `ep[0]`: the frame's magic and flags (0 when unread).
    pub ep_flags: u64,
}

impl RbFrameRec {
    /// A frame of Ruby code (not a C method's, not a dummy).
    pub fn is_ruby(&self) -> bool {
        self.pc != 0 && self.iseq != 0 && self.ep_flags & FRAME_MAGIC_MASK != FRAME_MAGIC_CFUNC
    }

    /// The outermost frame its `rb_vm_exec` activation runs.
    pub fn finishes_run(&self) -> bool {
        self.ep_flags & FRAME_FLAG_FINISH != 0
    }
}

/// The frames of the thread whose execution context is at `ec`, innermost
/// first, at most `max`.
pub fn walk(mem: &dyn Memory, l: &Layout, ec: u64, max: usize) -> io::Result<Vec<RbFrameRec>> {
    let head = mem.read_vec(ec, (l.ec_cfp + 8) as usize)?;
    let field = |off: u64| {
        u64_at(&head, off as usize)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "short ec"))
    };
    let (stack, size, mut cfp) = (
        field(l.ec_vm_stack)?,
        field(l.ec_vm_stack_size)?,
        field(l.ec_cfp)?,
    );
    let end = stack
        .checked_add(size.saturating_mul(8))
        .and_then(|e| e.checked_sub(l.cfp_size))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "VM stack out of range"))?;
    if cfp < stack || cfp > end {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "current frame outside the VM stack",
        ));
    }
    let mut out = Vec::new();
    while cfp < end && out.len() < max {
        let f = mem.read_vec(cfp, l.cfp_size as usize)?;
        let at = |off: usize| u64_at(&f, off).unwrap_or(0);
        let ep = at(l.cfp_ep);
        out.push(RbFrameRec {
            iseq: at(l.cfp_iseq),
            pc: at(l.cfp_pc),
            ep_flags: if ep != 0 { mem.read_u64(ep)? } else { 0 },
        });
        cfp += l.cfp_size;
    }
    Ok(out)
}
