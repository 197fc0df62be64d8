//! The per-event scheduling records `--perfetto` streams (switches,
//! wake-ups, new tasks and exits of the target's threads): plain types
//! shared by `collect` (which decodes them from the BPF ring buffer) and
//! `render::perfetto` (which writes them as a trace). Everything else
//! kerntax measures is summed in the kernel; a timeline needs each event
//! with its time, so these are kept one by one, up to a bound.

use crate::model::LockKey;

/// Records kept per run, at most: ~100 bytes each in memory, ~70 in the
/// trace (100 MB of memory, 70 MB of trace). Past it records are counted
/// in `loss.trace_records_unkept`, not kept: a long attach to a busy
/// server still ends with a trace of its first part and a report.
pub const MAX_RECORDS: usize = 1_000_000;

/// A task's name as the kernel keeps it: up to 15 bytes, NUL-padded.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Comm(pub [u8; 16]);

impl Comm {
    pub fn new(name: &str) -> Comm {
        let mut c = [0u8; 16];
        let n = name.len().min(15);
        c[..n].copy_from_slice(&name.as_bytes()[..n]);
        Comm(c)
    }

    /// The name, lossily decoded (a task may name itself any bytes).
    pub fn to_str(&self) -> String {
        crate::collect::c_string(&self.0)
    }
}

/// One side of an event: a thread, its process, its priority and name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    pub pid: u32,
    pub tid: u32,
    /// `task->prio` (120 for a normal nice-0 thread), as ftrace shows it.
    pub prio: i32,
    pub comm: Comm,
}

/// Why a target thread left the CPU at a switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Left {
    /// Preempted (or yielded) while runnable.
    Preempted,
    /// Asleep inside syscall `nr`, waiting on `lock` if it was a futex or
    /// semop wait.
    Syscall { nr: u32, lock: Option<LockKey> },
    /// Asleep outside any syscall (a page fault's I/O, ...).
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Kind {
    /// `prev` left the CPU for `next`; at least one is a target thread.
    Switch {
        prev: Task,
        next: Task,
        /// prev's state as ftrace's sched_switch reports it (1 S, 2 D,
        /// ... 0x100 preempted; `ftrace_prev_state`).
        prev_state: i64,
        /// Why prev left, when prev is a target thread.
        left: Option<Left>,
        next_tracked: bool,
    },
    /// `woken` (a target thread) is woken by `waker`, the task running
    /// then; `in_timer`: from a timer's expiry that interrupted `waker`,
    /// which then woke no one itself.
    Waking {
        woken: Task,
        waker: Task,
        in_timer: bool,
        waker_tracked: bool,
        target_cpu: i32,
    },
    /// A new thread or process forked by a target thread.
    New { task: Task, parent: Task },
    /// A new task's first wake-up, by `waker` (its parent).
    WakeupNew {
        task: Task,
        waker: Task,
        target_cpu: i32,
    },
    /// A target thread exits.
    Exit { task: Task },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    /// CLOCK_MONOTONIC, ns (bpf_ktime_get_ns).
    pub ts_ns: u64,
    pub cpu: u32,
    pub kind: Kind,
}

/// A run's records and what the writer needs besides the report.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct SchedTrace {
    pub records: Vec<Record>,
    /// Records past `MAX_RECORDS`, not kept.
    pub unkept: u64,
    /// The profiled window on CLOCK_MONOTONIC, ns: the report's timeline
    /// starts at `start_mono_ns`.
    pub start_mono_ns: u64,
    pub end_mono_ns: u64,
    /// CLOCK_BOOTTIME - CLOCK_MONOTONIC (time suspended since boot), ns:
    /// added to every timestamp, as traces are on BOOTTIME.
    pub boottime_offset_ns: u64,
    /// CLOCK_REALTIME at `start_mono_ns`, ns: for the trace's clock
    /// snapshot (wall-clock time in the UI).
    pub start_realtime_ns: u64,
    /// uname's release, for the kernel version the trace states.
    pub kernel_release: String,
    pub cpus: u32,
    /// The report's name of each lock key waited on (`LockReport::
    /// display_name`), as the lock analysis gave them.
    pub lock_names: Vec<(LockKey, String)>,
}

impl SchedTrace {
    /// The records with the report's name of each lock waited on.
    pub fn with_lock_names(&self, lock_names: &[(LockKey, String)]) -> SchedTrace {
        SchedTrace {
            lock_names: lock_names.to_vec(),
            ..self.clone()
        }
    }

    /// Keeps `records`, up to `MAX_RECORDS` in all.
    pub fn add(&mut self, records: Vec<Record>) {
        let room = MAX_RECORDS.saturating_sub(self.records.len());
        if records.len() > room {
            self.unkept += (records.len() - room) as u64;
        }
        self.records.extend(records.into_iter().take(room));
    }
}

/// prev_state as the kernel's sched_switch trace event computes it
/// (`__trace_sched_switch_state`): preempted is TASK_REPORT_MAX (0x100);
/// otherwise one bit for the reported state (1 S, 2 D, 4 T, 8 t, 0x10 X,
/// 0x20 Z, 0x40 P, 0x80 I), 0 for running. Perfetto decodes it with the
/// kernel version of the trace's utsname.
pub fn ftrace_prev_state(preempt: bool, state: u32, exit_state: u32) -> i64 {
    const TASK_REPORT: u32 = 0x7f;
    const TASK_IDLE: u32 = 0x402; // TASK_UNINTERRUPTIBLE | TASK_NOLOAD
    const TASK_REPORT_IDLE: u32 = 0x80;
    const TASK_REPORT_MAX: i64 = 0x100;
    const TASK_UNINTERRUPTIBLE: u32 = 0x2;
    const TASK_RTLOCK_WAIT: u32 = 0x1000;
    const TASK_FROZEN: u32 = 0x8000;
    if preempt {
        return TASK_REPORT_MAX;
    }
    let mut s = (state | exit_state) & TASK_REPORT;
    if state & TASK_IDLE == TASK_IDLE {
        s = TASK_REPORT_IDLE;
    }
    if state & (TASK_RTLOCK_WAIT | TASK_FROZEN) != 0 {
        s = TASK_UNINTERRUPTIBLE;
    }
    // fls(s), then 1 << (fls - 1): the highest bit set.
    if s == 0 {
        0
    } else {
        1i64 << (31 - s.leading_zeros())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prev_state_is_ftraces() {
        assert_eq!(ftrace_prev_state(true, 1, 0), 0x100);
        assert_eq!(ftrace_prev_state(false, 0, 0), 0);
        assert_eq!(ftrace_prev_state(false, 1, 0), 1);
        assert_eq!(ftrace_prev_state(false, 2, 0), 2);
        assert_eq!(ftrace_prev_state(false, 0x402, 0), 0x80);
        // TASK_DEAD (0x80 raw) with EXIT_DEAD: reported X.
        assert_eq!(ftrace_prev_state(false, 0x80, 0x10), 0x10);
        // A killable sleep (TASK_WAKEKILL | D) reports D.
        assert_eq!(ftrace_prev_state(false, 0x102, 0), 2);
    }

    #[test]
    fn records_past_the_bound_are_counted_not_kept() {
        let r = Record {
            ts_ns: 1,
            cpu: 0,
            kind: Kind::Exit {
                task: Task::default(),
            },
        };
        let mut t = SchedTrace::default();
        t.add(vec![r; MAX_RECORDS - 1]);
        t.add(vec![r; 3]);
        assert_eq!((t.records.len(), t.unkept), (MAX_RECORDS, 2));
    }

    #[test]
    fn comm_keeps_fifteen_bytes() {
        assert_eq!(
            Comm::new("a-very-long-thread-name").to_str(),
            "a-very-long-thr"
        );
        assert_eq!(Comm::new("w").to_str(), "w");
    }
}
