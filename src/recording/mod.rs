//! The hand-off from collection to analysis: what the analyses read of a
//! run once its samples are unwound and named. Plain data: naming (which
//! reads the live unwinder's module table, JIT maps, interpreters and
//! memory maps) is done before it (`stacks::name`), so the analysis needs
//! nothing of unwinding.

use std::collections::HashMap;

use crate::model::{FrameLoc, Frames, LockKey};
use crate::tally::StackId;

/// A distinct stack of the run, named.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamedStack {
    /// Function names, innermost first (an inlined call is a frame of its
    /// own; a frame without a name is `[unresolved]` or its file+offset).
    pub frames: Frames,
    /// How many of the innermost frames are the runtime's own libraries
    /// (libc, libpthread, the vDSO): where the program's code begins.
    pub runtime: usize,
    /// Whether the unwinder cut it short (its outer frames missing).
    pub truncated: bool,
    /// Where its innermost frame is, as a key of the code copied around
    /// on-CPU samples (`SampleTally::code`).
    pub leaf: Option<FrameLoc>,
}

/// Kernel stacks by stack id, named.
#[derive(Debug, Default)]
pub struct KernelStacks {
    /// Shared with the on-CPU samples that have them.
    pub frames: HashMap<i32, Frames>,
    /// Distinct addresses no symbol covers.
    pub unresolved: u64,
}

/// The run's stacks and locks, named.
#[derive(Clone, Debug, Default)]
pub struct Named {
    /// Each distinct stack of the tally (`SampleTally::stacks`).
    pub stacks: HashMap<StackId, NamedStack>,
    /// Each lock the kernel counted.
    pub lock_names: HashMap<LockKey, LockName>,
    /// Distinct user frames that got no function name.
    pub unresolved_frames: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockName {
    /// `g_lock`, or `g_table+0x10` inside a larger variable.
    pub symbol: Option<String>,
    /// The variable itself: its name and address. Futex words of one
    /// variable (a condvar's two sequence words) are one lock.
    pub variable: Option<(String, u64)>,
    pub address: Option<u64>,
    /// The binary or library holding it, or [heap], [stack], [anon].
    pub mapping: Option<String>,
    /// The process it was named in (private futexes).
    pub pid: Option<u32>,
}

impl LockName {
    /// What identifies the lock in the report: its variable if known.
    pub fn object(&self) -> Option<String> {
        let (name, addr) = self.variable.as_ref()?;
        Some(format!("{}:{addr:#x}:{name}", self.pid.unwrap_or(0)))
    }
}
