//! What a live view (`kerntax top`) sees of a session while it runs: the
//! event loop wakes its `Watcher`, which reads windows through `Live`.

use std::time::Instant;

use anyhow::Result;

use crate::collect::Collector;
use crate::report::EndReason;
use crate::stacks::kallsyms::LazyKallsyms;
use crate::stacks::unwind::Unwinding;
use crate::tally::SampleTally;

use super::own::monotonic_ns;

/// A live view of a session (`kerntax top`): woken with the event loop,
/// it reads windows of the run as it goes.
pub trait Watcher {
    /// Fds that should wake the loop (a terminal's input).
    fn fds(&self) -> Vec<i32>;
    /// When it next wants `tick` at the latest.
    fn next_due(&self) -> Instant;
    /// Called after each wake-up of the loop; false stops profiling.
    fn tick(&mut self, live: &mut Live<'_, '_>) -> Result<bool>;
    /// The profiling ended for `why` (not by `tick`); a view may show it
    /// before the session reports.
    fn ended(&mut self, why: EndReason, live: &mut Live<'_, '_>) -> Result<()>;
}

/// What a watcher may read of the running session.
pub struct Live<'a, 'obj> {
    pub collector: &'a mut Collector<'obj>,
    pub unwinding: &'a mut Unwinding,
    /// Samples since the watcher last took them (`take_window`).
    pub(super) window: &'a mut SampleTally,
    pub kallsyms: &'a mut LazyKallsyms,
    /// When the session's window began.
    pub t0: Instant,
    pub target_pid: u32,
    /// CPUs the target may use.
    pub cpus: u32,
}

impl Live<'_, '_> {
    /// The samples since the last call, for a window that starts now
    /// (`start_mono_ns`: CLOCK_MONOTONIC at its start).
    pub fn take_window(&mut self) -> SampleTally {
        let next = SampleTally {
            start_mono_ns: monotonic_ns(),
            ..Default::default()
        };
        std::mem::replace(self.window, next)
    }
}
