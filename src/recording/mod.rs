//! The hand-off from collection to analysis: what the analyses read of a
//! run once its samples are unwound and named. Plain data: naming (which
//! reads the live unwinder's module table, JIT maps, interpreters and
//! memory maps) is done before it (`stacks::name`), so the analysis needs
//! nothing of unwinding.
//!
//! A `Recording` is all of it and the run's facts: what `kerntax record`
//! writes (`file`) and `kerntax report` analyses again. The live run
//! analyses the same value, so a recording read back gives the report the
//! run gave.

pub mod entries;
pub mod file;
pub mod samples;

use crate::fixed_hash::HashMap;

use serde::{Deserialize, Serialize};

use crate::model::{FrameLoc, Frames, KernelCounters, LockKey, ThreadUsage};
use crate::report::{EndReason, HostUsage, Loss, Mode, Profiler, Sampling, Timeline};
use crate::sched_trace::SchedTrace;
use crate::tally::StackId;
use crate::target::ExitStatus;
use samples::Samples;

/// A distinct stack of the run, named.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelStacks {
    /// Shared with the on-CPU samples that have them.
    #[serde(with = "entries")]
    pub frames: HashMap<i32, Frames>,
    /// Distinct addresses no symbol covers.
    pub unresolved: u64,
}

/// The run's stacks and locks, named.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Named {
    /// Each distinct stack of the tally (`SampleTally::stacks`).
    #[serde(with = "entries")]
    pub stacks: HashMap<StackId, NamedStack>,
    /// Each lock the kernel counted.
    #[serde(with = "entries")]
    pub lock_names: HashMap<LockKey, LockName>,
    /// Distinct user frames that got no function name.
    pub unresolved_frames: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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

/// What a recording file says it is, first.
pub const FORMAT: &str = "kerntax recording";
/// The recording format this kerntax writes and reads. A change to what
/// the analysis reads is a new version.
pub const VERSION: u32 = 1;

/// Everything the analysis reads of one run: what `kerntax record` writes
/// and `kerntax report` analyses with the current rules. No raw memory of
/// the target: stacks are named, and the only bytes are the code around
/// sampled instructions (`Samples::code`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Recording {
    /// `FORMAT`.
    pub format: String,
    /// `VERSION` when written.
    pub version: u32,
    /// The kerntax that recorded it.
    pub kerntax_version: String,
    pub run: RunFacts,
    pub kernel: KernelCounters,
    pub threads: Vec<ThreadUsage>,
    pub samples: Samples,
    pub named: Named,
    pub kernel_stacks: KernelStacks,
    /// The scheduling records, when recorded with them (`--perfetto`,
    /// `record --sched-trace`); their lock names are the analysis's.
    pub sched_trace: Option<SchedTrace>,
}

/// The run's facts: what, where, how long, how it ended, and what kerntax
/// itself saw of its collection.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunFacts {
    pub mode: Mode,
    pub command: Option<Vec<String>>,
    pub target_pid: u32,
    pub exit: Option<ExitStatus>,
    pub end_reason: EndReason,
    pub duration_ns: u64,
    /// CLOCK_MONOTONIC at the window's start, ns: where the timeline and
    /// the sampled sleeps' times begin.
    pub start_mono_ns: u64,
    /// CPUs the target may use.
    pub cpus: u32,
    /// On-CPU samples per second on each CPU.
    pub cpu_hz: u64,
    /// The timeline's cells as counted, before the analysis adds its
    /// contended sleeps.
    pub timeline: Timeline,
    pub sampling: Sampling,
    pub loss: Loss,
    pub profiler: Profiler,
    /// The rest of the host's CPU use over the window (collect/host.rs);
    /// absent in recordings made before it was kept.
    #[serde(default)]
    pub host: HostUsage,
}
