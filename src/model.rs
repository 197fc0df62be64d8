//! Plain data handed from the collector to aggregation: what the kernel
//! counted, already out of BPF's per-CPU and byte layouts, so everything after
//! collection is pure and testable without BPF.

/// A named stack, innermost first, shared by every key that has it: the
/// on-CPU keys (thread x kernel stack x user stack) outnumber the distinct
/// stacks tenfold on a server, and a copy per key made the end of a long
/// run its memory peak (issue 21).
pub type Frames = std::sync::Arc<[crate::frame::Frame]>;

/// Adds histogram `b` into `a`, slot by slot.
pub fn add_hist(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// One syscall's counters, for one CPU or summed over all of them.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SyscallCounters {
    pub nr: u32,
    /// Entries (exact).
    pub calls: u64,
    /// Exits observed after a tracked entry.
    pub returns: u64,
    pub errors: u64,
    /// Returns whose latency the kernel measured (syscalls.h, KT_TIME_ALL):
    /// total_ns, max_ns and the histogram are over these alone.
    pub timed: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Stack samples the kernel emitted.
    pub samples: u64,
    /// Samples it put off while the ring buffer was more than half full
    /// (the next one carried their weight).
    pub samples_deferred: u64,
    /// Positive return values summed (bytes moved, for read and write).
    pub ret_sum: u64,
    /// Bytes asked for by the data calls with a length argument (read,
    /// write, pread64, pwrite64, sendto, recvfrom).
    pub req_sum: u64,
    /// Slot i: calls with 2^i <= latency_ns < 2^(i+1).
    pub hist_log2_ns: Vec<u64>,
}

impl SyscallCounters {
    pub fn merge(&mut self, other: &SyscallCounters) {
        self.calls += other.calls;
        self.returns += other.returns;
        self.errors += other.errors;
        self.timed += other.timed;
        self.total_ns += other.total_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
        self.samples += other.samples;
        self.samples_deferred += other.samples_deferred;
        self.ret_sum += other.ret_sum;
        self.req_sum += other.req_sum;
        add_hist(&mut self.hist_log2_ns, &other.hist_log2_ns);
    }
}

/// A thread's kernel counters at one moment (its exit, or a snapshot).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ThreadCounters {
    pub pid: u32,
    pub tid: u32,
    pub ppid: u32,
    pub exited: bool,
    /// Wait status as the kernel keeps it (exit code << 8 | signal), at exit.
    pub exit_code: i32,
    pub comm: String,
    /// Tick-sampled user and system time; only their ratio is trusted.
    pub utime_ns: u64,
    pub stime_ns: u64,
    /// Exact on-CPU time.
    pub runtime_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// Task start (boot-based ns): with `tid`, identifies the thread.
    pub start_ns: u64,
    /// sched_yield calls since tracked.
    pub yields: u64,
    /// Syscalls entered since tracked.
    pub syscalls: u64,
}

impl ThreadCounters {
    pub fn key(&self) -> (u32, u64) {
        (self.tid, self.start_ns)
    }
}

/// What the kernel side dropped or could not do; all zero in a clean run.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelLoss {
    pub ringbuf_full: u64,
    pub stack_read_failed: u64,
    pub task_storage_failed: u64,
    pub thread_map_full: u64,
    pub errno_map_full: u64,
    pub syscall_nr_out_of_range: u64,
    pub lock_map_full: u64,
    pub lock_thread_map_full: u64,
    pub sched_map_full: u64,
    pub poll_map_full: u64,
    pub kernel_stack_lost: u64,
    pub switch_in_unseen: u64,
    pub trace_ringbuf_full: u64,
    pub map_changes_unread: u64,
    pub maps_lost_untracked: u64,
}

/// A process's calls of one poll-family syscall, summed over CPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PollCounters {
    pub pid: u32,
    pub nr: u32,
    pub calls: u64,
    /// Fds passed, summed (epoll: the interest set's size).
    pub fds: u64,
    pub max_fds: u64,
    /// Ready fds returned, summed.
    pub ready: u64,
    pub timeouts: u64,
    pub errors: u64,
    pub total_ns: u64,
    pub cpu_ns: u64,
}

/// What a futex word or SysV semaphore is, as the kernel tells them apart.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum LockKey {
    /// A futex word in one process's memory.
    Private { pid: u32, addr: u64 },
    /// A futex word in memory shared between processes: the file (or shmem)
    /// behind it, `dev` as /proc/PID/maps shows it.
    Shared { dev: u64, ino: u64, offset: u64 },
    /// A SysV semaphore.
    SysV { semid: u32, semnum: u16 },
}

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum LockOp {
    Wait,
    /// Priority-inheritance lock or wait (FUTEX_LOCK_PI*, WAIT_REQUEUE_PI).
    WaitPi,
    Wake,
    Other,
}

impl LockOp {
    pub fn is_wait(self) -> bool {
        matches!(self, LockOp::Wait | LockOp::WaitPi)
    }
}

/// What a lock operation's stack sample carries beyond the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LockSample {
    pub key: LockKey,
    pub op: LockOp,
    /// The thread was switched out during the call.
    pub blocked: bool,
    /// Time inside the call.
    pub wait_ns: u64,
    /// The call's return value (negative errno).
    pub ret: i32,
}

/// Why a thread was off CPU, as the kernel saw it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum OffReason {
    /// Asleep inside syscall `nr` (and inside a wait on `lock`, if one).
    Syscall { nr: u32, lock: Option<LockKey> },
    /// Asleep outside any syscall (page-fault I/O and the like).
    Other,
    /// Runnable but not running: preempted, or woken and queued.
    RunQueue,
}

/// Off-CPU time of one thread for one reason.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OffCpuCounters {
    pub pid: u32,
    pub tid: u32,
    pub reason: OffReason,
    /// Asleep uninterruptibly (D state: the disk, a journal commit, a page
    /// read in, a kernel lock), not waiting for an event. Absent in
    /// recordings made before it was kept: false.
    #[serde(default)]
    pub uninterruptible: bool,
    pub ns: u64,
    pub count: u64,
}

impl OffCpuCounters {
    pub fn key(&self) -> (u32, u32, OffReason, bool) {
        (self.pid, self.tid, self.reason, self.uninterruptible)
    }
}

/// Who ended a sleep (its wake-up's release side), as a sample carries it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Waker {
    pub pid: u32,
    pub tid: u32,
    /// The syscall the waker was in, if it was tracked and in one.
    pub nr: Option<u32>,
    /// The waker is part of the profiled target.
    pub tracked: bool,
    /// A kernel thread or the idle task (timers, interrupts).
    pub kernel: bool,
    /// What the waker (of the target) had run since its own last sleep
    /// ended, as log2 of the nanoseconds plus 1 (0: not known): a thread
    /// that wakes another right after it was woken passes a wake-up on.
    pub ran_log2: u8,
}

impl Waker {
    /// From the BPF form (`kt_waker_ref`): None when no wake-up was seen.
    pub fn from_raw(pid: u32, tid: u32, nr: u32, flags: u32) -> Option<Waker> {
        (tid != 0 || flags & 0xff != 0).then_some(Waker {
            pid,
            tid,
            nr: (nr != u32::MAX).then_some(nr),
            tracked: flags & 1 != 0,
            ran_log2: (flags >> 8) as u8,
            kernel: flags & 2 != 0 || tid == 0,
        })
    }

    /// At most how long the waker had run since its own last sleep ended
    /// (None: not known).
    pub fn ran_at_most_ns(&self) -> Option<u64> {
        (self.ran_log2 > 0).then(|| 1u64 << self.ran_log2.min(63))
    }
}

/// Sleeps of `woken` ended by `waker`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WakeupCounters {
    pub waker_pid: u32,
    pub waker_tid: u32,
    pub waker_comm: String,
    /// The waker is part of the profiled target.
    pub waker_tracked: bool,
    /// A kernel thread or the idle task (timers, interrupts).
    pub waker_kernel: bool,
    /// The syscall the waker was in, if it was tracked and in one.
    pub waker_nr: Option<u32>,
    pub woken_pid: u32,
    pub woken_tid: u32,
    pub count: u64,
    /// Sleep time these wake-ups ended.
    pub wait_ns: u64,
}

/// What tells two wake-up pairs apart (the BPF map's key, less the comm).
pub type WakeupKey = (u32, u32, u32, u32, Option<u32>, bool, bool);

impl WakeupCounters {
    pub fn key(&self) -> WakeupKey {
        (
            self.waker_pid,
            self.waker_tid,
            self.woken_pid,
            self.woken_tid,
            self.waker_nr,
            self.waker_tracked,
            self.waker_kernel,
        )
    }
}

/// One lock's counters, summed over CPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LockCounters {
    pub waits: u64,
    pub blocked: u64,
    pub futile: u64,
    pub timeouts: u64,
    pub wait_ns: u64,
    pub blocked_ns: u64,
    pub max_wait_ns: u64,
    /// On-CPU time inside all calls on the lock.
    pub cpu_ns: u64,
    pub wakes: u64,
    pub woken: u64,
    pub other: u64,
    pub pi: u64,
    pub samples: u64,
    pub hist_log2_ns: Vec<u64>,
}

impl LockCounters {
    pub fn merge(&mut self, o: &LockCounters) {
        self.waits += o.waits;
        self.blocked += o.blocked;
        self.futile += o.futile;
        self.timeouts += o.timeouts;
        self.wait_ns += o.wait_ns;
        self.blocked_ns += o.blocked_ns;
        self.max_wait_ns = self.max_wait_ns.max(o.max_wait_ns);
        self.cpu_ns += o.cpu_ns;
        self.wakes += o.wakes;
        self.woken += o.woken;
        self.other += o.other;
        self.pi += o.pi;
        self.samples += o.samples;
        add_hist(&mut self.hist_log2_ns, &o.hist_log2_ns);
    }
}

/// Everything the kernel counted once collection stopped.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct KernelCounters {
    /// Summed over CPUs, syscalls with at least one call or return.
    pub syscalls: Vec<SyscallCounters>,
    /// (syscall nr, errno, count).
    pub errnos: Vec<(u32, u32, u64)>,
    pub exited_threads: Vec<ThreadCounters>,
    pub locks: Vec<(LockKey, LockCounters)>,
    /// (lock, waiting thread, its wait calls).
    pub lock_waiters: Vec<(LockKey, u32, u64)>,
    pub offcpu: Vec<OffCpuCounters>,
    pub wakeups: Vec<WakeupCounters>,
    pub polls: Vec<PollCounters>,
    pub loss: KernelLoss,
}

/// A user stack unwound while its process was alive: each frame named by the
/// module it lies in and its address as stated in that file, so it can be
/// symbolized after the process is gone.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum FrameLoc {
    /// `module` indexes `ModuleTable`; `svma` is the lookup address (a return
    /// address minus one, so it falls inside the calling instruction).
    InModule { module: usize, svma: u64 },
    /// An address in no file-backed mapping ([vdso], outside any mapping).
    Unmapped { addr: u64, mapping: Option<String> },
    /// An address in anonymous executable memory of process `pid`: JIT code,
    /// named from that process's perf map once profiling stops.
    Jit { pid: u32, addr: u64 },
    /// A Python frame of process `pid`: its code object (its number among
    /// those read: an address may hold another object later) and the line
    /// it was at (0: unknown), named from the code object read while the
    /// process lived (`interp::python::frames`).
    Python { pid: u32, code: u64, line: i32 },
    /// A Ruby frame of process `pid`: its iseq (its number among those
    /// read) and line (0: unknown), named from the iseq read while the
    /// process lived (`interp::ruby::frames`).
    Ruby { pid: u32, iseq: u64, line: i32 },
    /// A Java method running in HotSpot's interpreter in process `pid`:
    /// its number among the methods read and its line (0: unknown), named
    /// from the Method read while the process lived (`interp::hotspot`).
    Java { pid: u32, method: u64, line: i32 },
    /// A JavaScript function's frame in V8 process `pid`: its number among
    /// the functions read, its line (0: unknown) and, for JIT code, its
    /// address (0: interpreted), named from the SharedFunctionInfo read
    /// while the process lived (`interp::v8`).
    Js {
        pid: u32,
        function: u64,
        line: i32,
        addr: u64,
    },
}

#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct UnwoundStack {
    pub frames: Vec<FrameLoc>,
    /// Cut short: the stack went deeper than the bytes copied (or the frame
    /// limit), as opposed to ending where unwind information ends.
    pub truncated: bool,
}

/// Running totals of the target, cumulative since tracking started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Totals {
    pub syscalls: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// Final counters of the threads that exited.
    pub exited_runtime_ns: u64,
    pub exited_utime_ns: u64,
    pub exited_stime_ns: u64,
}

/// One BPF program's cost in the kernel (counted only while
/// `kernel.bpf_stats_enabled` is 1).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProgramCost {
    pub name: String,
    /// Times the program ran.
    pub runs: u64,
    /// Time spent inside it over all runs.
    pub run_ns: u64,
    /// Runs the kernel skipped because the program was already running on
    /// that CPU (an event lost to kerntax).
    pub recursion_misses: u64,
}

/// One thread's usage over the profiled window.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ThreadUsage {
    pub tid: u32,
    pub pid: u32,
    pub ppid: u32,
    pub comm: String,
    pub user_ns: u64,
    pub sys_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub yields: u64,
    /// Syscalls entered.
    pub syscalls: u64,
    pub exited: bool,
    pub exit_code: i32,
}
