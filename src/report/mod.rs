//! The report: the versioned JSON contract that every renderer and later tool
//! (`kerntax diff`, HTML, pprof) reads. Renderers read only this.
//!
//! Compatibility rule: within a `schema_version`, fields are only added; a
//! removal or a change of meaning bumps the version.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// 2 added `findings` and `loss.kernel_stack_lost`; version 1 reports are
/// still read (their findings are worked out again on reading).
pub const SCHEMA_VERSION: u32 = 2;
/// The oldest version `kerntax diff` and friends read.
pub const OLDEST_SCHEMA_VERSION: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Run,
    Attach,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The target (the command, or the attached process) exited.
    TargetExited,
    /// `--duration` elapsed.
    Duration,
    /// kerntax got SIGINT (Ctrl-C) or SIGTERM.
    Interrupted,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub kerntax_version: String,
    pub mode: Mode,
    /// argv of the profiled command; null for `attach`.
    pub command: Option<Vec<String>>,
    pub target_pid: u32,
    /// Shell-style exit status (code, or 128 + signal) if the target ended.
    pub exit_status: Option<i32>,
    /// Signal that killed the target, if one did.
    pub exit_signal: Option<String>,
    pub end_reason: EndReason,
    /// Wall time profiled.
    pub duration_ns: u64,
    pub summary: Summary,
    /// What kerntax concluded, most at stake first (src/findings/).
    #[serde(default)]
    pub findings: Vec<Finding>,
    pub processes: Vec<ProcessReport>,
    pub threads: Vec<ThreadReport>,
    /// Aggregated over the whole target, most total time first.
    pub syscalls: Vec<SyscallReport>,
    /// Locks (futex words and SysV semaphores), contention first, ranked by
    /// the time they cost; then what threads waited on for work.
    pub locks: Vec<LockReport>,
    /// Where the target's threads wait, grouped by the program's own code
    /// they wait in, over all threads and processes, each classified from
    /// the run's evidence (contention first, by time).
    #[serde(default)]
    pub waits: Vec<WaitSite>,
    /// Time each thread spent off CPU, by reason; the threads that wanted
    /// to run and could not (run queue, contention) first.
    pub offcpu: Vec<OffCpuThread>,
    /// Who ended whose sleep, and how: the wake-up graph, most wait ended
    /// first.
    pub wakeups: Vec<WakeupReport>,
    /// Threads of the target whose wake-ups ended the most waiting by
    /// others: what the rest wait on (from the wake-up graph; exits, timers
    /// and other processes aside).
    pub blockers: Vec<Blocker>,
    /// poll/select/epoll efficiency per process and syscall, most system
    /// time first.
    pub polls: Vec<PollReport>,
    /// Where the CPU time went: sampled user and kernel stacks.
    pub cpu_samples: CpuProfile,
    /// CPU burned spinning and sched_yield storms.
    pub spin: SpinReport,
    /// The run over time.
    pub timeline: Timeline,
    pub sampling: Sampling,
    pub loss: Loss,
    pub profiler: Profiler,
    /// The rest of the host during the run: its busy CPUs and the other
    /// processes that used them. Absent in older reports.
    #[serde(default)]
    pub host: HostUsage,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub user_ns: u64,
    pub sys_ns: u64,
    /// Shares of on-CPU time, 0..100.
    pub user_percent: f64,
    pub sys_percent: f64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub voluntary_switches_per_s: f64,
    pub involuntary_switches_per_s: f64,
    pub syscalls: u64,
    pub syscall_errors: u64,
    pub syscalls_per_s: f64,
    /// CPUs the target may run on (its affinity at the start).
    #[serde(default)]
    pub cpus: u32,
    /// CPU time used per wall second, all threads: how many CPUs it kept busy.
    #[serde(default)]
    pub cpus_used: f64,
}

/// A problem recognised in the figures, with the remedy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The rule, e.g. `lock.exclusive-hot`: stable across versions.
    pub id: String,
    pub title: String,
    /// Share of the target's wall or CPU time at stake, 0..1.
    pub severity: f64,
    /// The figures that triggered it, each next to its threshold.
    pub evidence: Vec<Evidence>,
    pub culprit: Culprit,
    /// What to change and why, with a short example.
    pub remedy: String,
    pub expected_gain: ExpectedGain,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// What was measured, with its unit in the name (`wait_share`, `calls_per_s`).
    pub metric: String,
    pub value: f64,
    pub threshold: f64,
    /// Whether `value` must be at least (`min`) or at most (`max`) the threshold.
    pub bound: Bound,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    Min,
    Max,
}

impl Evidence {
    pub fn holds(&self) -> bool {
        match self.bound {
            Bound::Min => self.value >= self.threshold,
            Bound::Max => self.value <= self.threshold,
        }
    }
}

/// What the finding is about: a lock, a syscall, a call site or a thread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Culprit {
    pub kind: CulpritKind,
    /// A lock's symbol (or address, or SysV key), a syscall's name, a thread
    /// as `comm (tid N)`.
    pub name: String,
    /// Its symbolized stack, innermost first: the call site, or the waiters'
    /// top stack.
    pub frames: Vec<crate::frame::Frame>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CulpritKind {
    Lock,
    Syscall,
    Thread,
    Process,
}

/// What the remedy may win, derived from the evidence: an estimate (the
/// time the finding's cost took; a fix can win less, or more when removing
/// the cost speeds up the rest), unless `estimate` is false, when it is an
/// upper bound.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExpectedGain {
    pub time_ns: u64,
    /// `time_ns` as a share of the run's wall time (or of its CPU time, as
    /// `basis` says), 0..1.
    pub share: f64,
    /// How it was derived.
    pub basis: String,
    /// An estimate, not a bound (true for every rule today: the lab's own
    /// fixes won more than the cost they removed in 4 of 5 stories).
    #[serde(default = "estimate")]
    pub estimate: bool,
    /// The range the prediction allows, low and high shares (issue 39):
    /// what the model does not explain of the run's time and the sampling
    /// error of the CPU it removes. Absent in older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<[f64; 2]>,
    /// What the prediction assumes the fix does, in a line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assumes: Option<String>,
    /// Why the run cannot support a number: the range is all there is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_estimate: Option<String>,
}

fn estimate() -> bool {
    true
}

impl ExpectedGain {
    /// "about 1.2 s (40%)" for an estimate, "up to ..." for a bound.
    pub fn words(&self, of: &str) -> String {
        let range = self
            .range
            .map(|[low, high]| format!(", {:.0}-{:.0}%", low * 100.0, high * 100.0))
            .unwrap_or_default();
        if let (Some(why), Some([low, high])) = (&self.no_estimate, self.range) {
            return format!(
                "no single estimate ({why}): a gain of {:.0}-{:.0}%{of}{}",
                low * 100.0,
                high * 100.0,
                self.assumes
                    .as_ref()
                    .map(|a| format!(", {a}"))
                    .unwrap_or_default()
            );
        }
        let (how, what) = if self.estimate {
            ("about", "estimated")
        } else {
            ("up to", "at most")
        };
        let assumes = self
            .assumes
            .as_ref()
            .map(|a| format!(", {a}"))
            .unwrap_or_default();
        format!(
            "{what} gain {how} {} ({:.0}%{of}{range}){assumes}",
            crate::units::duration(self.time_ns),
            self.share * 100.0
        )
    }

    /// The gain as a share, for ranking and tables: the point, or the
    /// middle of the range where there is no single estimate.
    pub fn point(&self) -> f64 {
        match (&self.no_estimate, self.range) {
            (Some(_), Some([low, high])) => (low + high) / 2.0,
            _ => self.share,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessReport {
    pub pid: u32,
    pub ppid: u32,
    pub comm: String,
    pub thread_count: u32,
    /// Shell-style exit status if it exited while profiled.
    pub exit_status: Option<i32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadReport {
    pub tid: u32,
    pub pid: u32,
    pub comm: String,
    pub user_ns: u64,
    pub sys_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// sched_yield calls.
    pub yields: u64,
    /// Syscalls entered (0 in reports older than `kerntax top`).
    #[serde(default)]
    pub syscalls: u64,
    pub exited: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyscallReport {
    pub name: String,
    pub nr: u32,
    /// Exact: counted in the kernel at every entry.
    pub calls: u64,
    pub errors: u64,
    /// errno name -> count.
    pub errnos: BTreeMap<String, u64>,
    /// Time from entry to return, summed over the calls that returned;
    /// scaled from the timed calls when fewer than all were timed
    /// (`timed_calls`), as are `hist_log2_ns` (still adding up to the
    /// returns) and the average.
    pub total_ns: u64,
    /// Calls whose latency the kernel measured: all that returned until a
    /// CPU has seen KT_TIME_ALL of this syscall, then one in KT_TIME_PERIOD
    /// (`sampling.latency_policy`). Counts, errors and bytes are exact
    /// either way. Absent in older reports (every call timed).
    #[serde(default)]
    pub timed_calls: Option<u64>,
    /// Bytes moved, for calls that move data (read, write, send, recv...):
    /// their positive return values summed.
    #[serde(default)]
    pub bytes: u64,
    /// Bytes asked for (the length argument), for read, write, pread64,
    /// pwrite64, sendto and recvfrom; 0 for the others.
    #[serde(default)]
    pub bytes_requested: u64,
    /// The longest timed call (when not all were timed, the longest of
    /// those: a lower bound).
    pub max_ns: u64,
    /// Entry i counts calls with 2^i <= latency_ns < 2^(i+1) (i = 0 also
    /// holds 0 ns); trailing empty buckets are omitted.
    pub hist_log2_ns: Vec<u64>,
    /// Calls still inside the kernel when profiling stopped, or that never
    /// return (exit_group).
    pub unfinished: u64,
    /// Most calls first.
    pub callsites: Vec<Callsite>,
    /// For a file syscall (open, stat, access, readlink, ...): the paths its
    /// sampled calls named, most calls first, calls estimated (scaled to the
    /// exact count; calls whose path was not sampled are in none).
    #[serde(default)]
    pub paths: Vec<PathCount>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathCount {
    pub path: String,
    pub calls: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Callsite {
    /// Symbolized user stack, innermost first.
    pub frames: Vec<crate::frame::Frame>,
    pub calls: u64,
    /// True when `calls` is estimated from weighted samples (it then still
    /// adds up, over all call sites, to the syscall's exact `calls`).
    pub calls_estimated: bool,
    /// Stack samples behind this call site.
    pub samples: u64,
}

mod host;
mod kinds;
pub use host::{HostProcess, HostUsage};
pub use kinds::{LockKind, WaitPrior};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockReport {
    pub kind: LockKind,
    /// False for condition variables and joins: threads wait there for work
    /// or for another thread, which is not contention.
    pub contention: bool,
    /// The variable the lock lives in (`g_lock`, `g_table+0x10`), if named.
    pub symbol: Option<String>,
    /// The program's function that waits on it (from its waiters' stacks):
    /// what names a lock on the heap or the stack.
    #[serde(default)]
    pub role: Option<String>,
    /// The standard runtime's well-known lock it is (CPython's GIL, Ruby's
    /// GVL, glibc malloc's arena lock), if it is one.
    #[serde(default)]
    pub runtime_lock: Option<String>,
    /// Its address (hex) in the process (for a shared futex, the offset in
    /// the shared memory); null for a SysV semaphore.
    pub address: Option<String>,
    /// The binary or library holding it, or [heap], [stack], [anon],
    /// [shared anon].
    pub mapping: Option<String>,
    /// Processes that used it.
    pub pids: Vec<u32>,
    pub semid: Option<u32>,
    pub semnum: Option<u16>,
    /// Calls that asked to wait.
    pub waits: u64,
    /// Waits during which the thread really slept.
    pub blocked: u64,
    /// Waits that returned at once (EAGAIN): the lock changed meanwhile.
    pub futile: u64,
    pub timeouts: u64,
    /// Time inside the wait calls.
    pub wait_ns: u64,
    /// Time inside the waits that slept.
    pub blocked_ns: u64,
    pub max_wait_ns: u64,
    pub hist_log2_ns: Vec<u64>,
    /// On-CPU (system) time inside all calls on it: what the handoffs cost.
    pub cpu_ns: u64,
    /// Wake calls, and the threads they woke (futex only).
    pub wakes: u64,
    pub woken: u64,
    pub wakes_per_s: f64,
    pub futile_per_s: f64,
    /// Distinct threads that waited on it.
    pub threads: u32,
    /// Where threads waited, most waits first.
    pub waiter_stacks: Vec<LockStack>,
    /// Where threads released it (the wake calls), most first.
    pub waker_stacks: Vec<LockStack>,
}

impl Report {
    /// Time waiters spent in the calls of all contended locks.
    pub fn contended_wait_ns(&self) -> f64 {
        self.locks
            .iter()
            .filter(|l| l.contention)
            .map(|l| l.wait_ns as f64)
            .sum()
    }
}

impl LockReport {
    /// `mutex g_lock`: its kind, then its symbol, else its SysV id, else
    /// its address.
    pub fn display_name(&self) -> String {
        let kind = self.kind.name();
        let memory = self.mapping.as_deref().unwrap_or("?");
        if let Some(role) = &self.runtime_lock {
            let at = self.symbol.as_deref().unwrap_or(memory);
            return format!("{role} ({kind}, {at})");
        }
        match (&self.symbol, &self.address, self.semid, &self.role) {
            (Some(s), _, _, _) => format!("{kind} {s}"),
            (None, _, Some(id), _) => {
                format!("{kind} semid {id}, sem {}", self.semnum.unwrap_or(0))
            }
            (None, _, None, Some(role)) => format!("{kind} in {role} ({memory})"),
            (None, Some(a), None, None) => format!("{kind} {a}"),
            (None, None, None, None) => format!("{kind} (unnamed)"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockStack {
    /// Symbolized user stack, innermost first.
    pub frames: Vec<crate::frame::Frame>,
    /// Calls from this stack.
    pub count: u64,
    /// Time inside those calls.
    pub wait_ns: u64,
    /// Stack samples behind it.
    pub samples: u64,
    /// True when `count` and `wait_ns` are estimated from weighted samples.
    pub estimated: bool,
}

/// What a wait site's threads wait for, decided from the run's evidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitClass {
    /// Threads that have work queue for something one of theirs holds.
    Contention,
    /// Idle threads waiting to be handed work (a pool, a consumer).
    WaitingForWork,
    /// Waiting for I/O, a client, a peer process or a child.
    IoOrPeer,
    /// Sleeping on purpose (a timer, a sleep call).
    Timer,
    /// Threads parked once until the run's start or end (joins, start-up).
    StartupTeardown,
    /// Giving the CPU up and taking it straight back (sched_yield): a
    /// busy-wait, never I/O.
    Spin,
}

impl WaitClass {
    pub fn name(self) -> &'static str {
        match self {
            WaitClass::Contention => "contention",
            WaitClass::WaitingForWork => "waiting for work",
            WaitClass::IoOrPeer => "I/O or peer",
            WaitClass::Timer => "timer",
            WaitClass::StartupTeardown => "start-up/teardown",
            WaitClass::Spin => "spinning",
        }
    }
}

/// One place in the program's own code where its threads wait.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WaitSite {
    /// The program's function the threads wait in: the first frame above
    /// the runtime's wait primitives and the program's own wait wrappers.
    pub function: String,
    /// Those wrappers, innermost first (`PGSemaphoreLock`, `Mutex::Lock`).
    pub via: Vec<String>,
    pub class: WaitClass,
    /// The evidence that decided the class, in words with figures.
    pub evidence: Vec<String>,
    /// What the standard runtime's frames say the threads do here (a lock
    /// acquisition, a condition wait, ...): the prior the evidence weighs.
    #[serde(default)]
    pub prior: WaitPrior,
    /// Sleeps (estimated from samples scaled to the exact per-thread counts).
    pub waits: u64,
    /// Wait calls that returned at once because the lock word had changed
    /// (EAGAIN): contention that cost a syscall but no sleep.
    pub futile: u64,
    /// Sleeps that ended by timing out, by a wake-up, by a signal.
    pub timed_out: u64,
    pub woken: u64,
    pub interrupted: u64,
    /// Time asleep here.
    pub wait_ns: u64,
    /// Threads asleep here on average over the run.
    pub waiting_threads: f64,
    /// Distinct threads (and processes) that slept here.
    pub waiters: u32,
    /// Their thread ids.
    #[serde(default)]
    pub waiter_tids: Vec<u32>,
    pub processes: u32,
    /// The waiters' CPU time over the run: whether they have work between
    /// waits (busy) or idle.
    pub waiter_cpu_share: f64,
    /// The waiters' time running or runnable over their time between waits
    /// here (their waits for work elsewhere left out): whether they come to
    /// wait with work in hand.
    #[serde(default)]
    pub waiter_between_busy_share: f64,
    /// Share of the waiting here at the waiters' loop's own wait (their
    /// shallowest, when they also wait deeper): between units of work.
    #[serde(default)]
    pub loop_share: f64,
    /// Share of the waiting here nested deeper than the waiters' loop's
    /// wait: inside a unit of work, with work in hand.
    #[serde(default)]
    pub nested_share: f64,
    /// Time asleep by syscall.
    pub syscalls: BTreeMap<String, u64>,
    /// Distinct futex words or semaphores waited on (one per waiter for a
    /// per-thread parker or a semaphore per process).
    pub lock_words: u32,
    /// The locks of `locks[]` waited on here (their display names), most
    /// waiting first.
    #[serde(default)]
    pub locks: Vec<String>,
    /// Share of the woken waiting ended by threads that themselves wait
    /// here: threads taking turns. (Not threads waiting behind the same
    /// wrapper elsewhere: a pipeline's stages wait in one `wait_for` for
    /// different things and wake each other without contending.)
    pub turns_share: f64,
    /// The standard runtime's well-known lock these waits are (CPython's
    /// GIL, Ruby's GVL, the JVM's safepoint, glibc malloc's arena lock):
    /// one lock however many sites and words its waits use.
    #[serde(default)]
    pub runtime_lock: Option<String>,
    /// Share of the woken waiting passed on by waiters just woken
    /// themselves, from their own wait path (a queue's consumers signalling
    /// the next): relays, which hand over nothing held and are not turns.
    #[serde(default)]
    pub relay_share: f64,
    /// Who ended the waits, and how, most waiting ended first.
    pub releases: Vec<Release>,
    /// Where the threads waited, most time first.
    pub stacks: Vec<TimedStack>,
    /// Figures estimated from samples.
    pub estimated: bool,
}

/// The release side of a wait site: what ended its sleeps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Release {
    /// futex, signal, write (pipe, socket, eventfd), sysv semaphore, exit,
    /// kernel (timer, interrupt), another process, ...
    pub mechanism: String,
    /// The wakers' own function, when their stacks were sampled.
    pub site: Option<String>,
    /// Wakers that also wait at this site ended most of these sleeps.
    pub from_waiters: bool,
    /// The wakers are part of the target.
    pub in_target: bool,
    /// Distinct waking threads.
    pub wakers: u32,
    /// Sleeps ended, and their time.
    pub count: u64,
    pub wait_ns: u64,
    /// The wakers' stacks where they woke them, most first.
    pub stacks: Vec<CountedStack>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OffCpuReason {
    /// Asleep in a lock wait (futex, SysV semaphore).
    Lock,
    /// Asleep on a condition variable or a join: waiting for work.
    WaitingForWork,
    /// Asleep in poll, select or epoll_wait.
    IoMultiplexing,
    /// Asleep in another syscall (read, write, accept, wait4, ...).
    BlockingSyscall,
    /// Asleep uninterruptibly, in a syscall or a page fault (D state): the
    /// disk (a flush, a file's pages read in, a journal commit) or a lock of
    /// the kernel's, never an event another thread or a peer sends.
    Io,
    /// Asleep in nanosleep, clock_nanosleep, pause, sigsuspend.
    Sleep,
    /// Runnable but not running: preempted, or woken and waiting for a CPU.
    Involuntary,
    /// Asleep outside any syscall (page-fault I/O, ...).
    Other,
}

impl OffCpuReason {
    /// The reason in a few words, as every output writes it.
    pub fn name(self) -> &'static str {
        match self {
            OffCpuReason::Lock => "lock",
            OffCpuReason::WaitingForWork => "waiting for work",
            OffCpuReason::IoMultiplexing => "poll/select/epoll",
            OffCpuReason::BlockingSyscall => "blocking syscall",
            OffCpuReason::Io => "uninterruptible I/O",
            OffCpuReason::Sleep => "sleep",
            OffCpuReason::Involuntary => "involuntary",
            OffCpuReason::Other => "other",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OffCpuThread {
    pub tid: u32,
    pub pid: u32,
    pub comm: String,
    pub total_ns: u64,
    /// Of it, time it wanted to run and could not: on a run queue, or
    /// waiting in contention.
    #[serde(default)]
    pub wanted_ns: u64,
    /// Most time first.
    pub reasons: Vec<OffCpuReasonReport>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OffCpuReasonReport {
    pub reason: OffCpuReason,
    pub ns: u64,
    /// Sleeps (or run-queue waits).
    pub count: u64,
    /// Time by syscall, for sleeps inside syscalls.
    pub syscalls: BTreeMap<String, u64>,
    /// Where it slept, most time first (sampled at the syscall's exit).
    pub stacks: Vec<TimedStack>,
}

/// A stack and the time it stands for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimedStack {
    /// Symbolized user stack, innermost first.
    pub frames: Vec<crate::frame::Frame>,
    pub ns: u64,
    pub samples: u64,
    /// True when `ns` is scaled from time-weighted samples.
    pub estimated: bool,
}

/// `WakeupReport::waker_comm` of a wake-up by a timer's expiry (a timed
/// wait that timed out), as the BPF side names it.
pub const TIMER_WAKER: &str = "[timer]";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WakeupReport {
    pub waker_pid: u32,
    pub waker_tid: u32,
    /// The waker's name; `TIMER_WAKER` for a timer.
    pub waker_comm: String,
    /// The waker is part of the profiled target.
    pub waker_in_target: bool,
    pub woken_pid: u32,
    pub woken_tid: u32,
    pub woken_comm: String,
    /// How: futex, signal, write (pipe, socket, eventfd), sysv semaphore,
    /// exit, syscall NAME, kernel (timer, interrupt, kernel thread), ...
    pub mechanism: String,
    pub count: u64,
    /// Sleep of the woken thread that these wake-ups ended.
    pub wait_ns: u64,
    /// The waker's stacks where it woke them (tracked wakers in a syscall).
    pub waker_stacks: Vec<CountedStack>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CountedStack {
    /// Symbolized user stack, innermost first.
    pub frames: Vec<crate::frame::Frame>,
    pub count: u64,
    pub samples: u64,
    pub estimated: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Blocker {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub in_target: bool,
    /// Sleep of other threads its wake-ups ended.
    pub wait_ns: u64,
    /// Distinct threads it woke.
    pub threads_woken: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PollReport {
    pub pid: u32,
    pub syscall: String,
    /// Exact, like the figures below.
    pub calls: u64,
    /// Fds passed per call (epoll: the interest set's size, from the
    /// epoll_ctl calls seen while profiling).
    pub fds_per_call: f64,
    pub max_fds: u64,
    /// Ready fds returned per call.
    pub ready_per_call: f64,
    /// ready_per_call / fds_per_call: the share of the scan that found work.
    pub ready_ratio: Option<f64>,
    /// Calls that returned nothing ready (timeouts).
    pub timeouts: u64,
    pub errors: u64,
    pub calls_per_s: f64,
    pub total_ns: u64,
    /// System time: on CPU inside the calls.
    pub cpu_ns: u64,
    /// By call site, most calls first; figures from weighted samples.
    pub callsites: Vec<PollSite>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PollSite {
    pub frames: Vec<crate::frame::Frame>,
    pub calls: u64,
    pub fds_per_call: f64,
    pub ready_per_call: f64,
    pub samples: u64,
    pub estimated: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuProfile {
    /// Samples per second on each CPU (0: sampling was off).
    pub frequency_hz: u64,
    pub samples: u64,
    pub user_samples: u64,
    pub kernel_samples: u64,
    /// Folded stacks, outermost frame first, kernel frames marked `[k]`:
    /// what flame graph tools read.
    pub folded: Vec<FoldedStack>,
    /// By function: samples where it was running (self) in user or kernel
    /// mode, and where it was anywhere on the stack (total). Most total first.
    pub functions: Vec<CpuFunction>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FoldedStack {
    pub frames: Vec<crate::frame::Frame>,
    pub count: u64,
    /// The threads the samples were taken on, `[tid, samples]`, most first
    /// (the gain model charges the CPU a fix removes to the threads that
    /// spend it). Empty in reports written before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<(u32, u64)>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuFunction {
    pub name: String,
    pub self_user: u64,
    pub self_kernel: u64,
    pub total: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpinReport {
    /// On-CPU samples in user code at a spin-wait loop: at a PAUSE, or
    /// just after a compare-and-swap retried in a loop by several threads.
    pub spin_samples: u64,
    /// Of those, the samples at a compare-and-swap loop with no PAUSE.
    #[serde(default)]
    pub cas_spin_samples: u64,
    /// Of those, the samples in a busy-wait loop of plain loads (no PAUSE,
    /// no CAS, no syscall: a flag polled until another thread sets it).
    #[serde(default)]
    pub load_spin_samples: u64,
    /// Each spin loop, by the function it spins in, most samples first.
    #[serde(default)]
    pub loops: Vec<SpinLoop>,
    /// Their share of all on-CPU samples of the target, 0..1.
    pub spin_share: f64,
    /// Where it spun, most samples first.
    pub spin_stacks: Vec<FoldedStack>,
    /// sched_yield calls by thread, most first (threads that made some).
    pub yields: Vec<ThreadYields>,
}

/// One busy-wait loop: the function it spins in and how.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpinLoop {
    pub function: String,
    /// How it spins: `pause` (a PAUSE in the loop), `cas` (a
    /// compare-and-swap retried at once) or `plain-loads` (loads and
    /// compares only).
    pub kind: String,
    pub samples: u64,
    /// Its share of all on-CPU samples of the target, 0..1.
    pub share: f64,
    /// Threads sampled spinning there.
    pub threads: u32,
    /// Its top stack, outermost first.
    pub frames: Vec<crate::frame::Frame>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadYields {
    pub tid: u32,
    pub pid: u32,
    pub comm: String,
    pub calls: u64,
    pub calls_per_s: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// Length of an interval.
    pub interval_ns: u64,
    pub buckets: Vec<TimelineBucket>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelineBucket {
    /// Start, from the start of profiling.
    pub t_ns: u64,
    pub duration_ns: u64,
    pub user_ns: u64,
    pub sys_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub syscalls: u64,
    /// Time threads spent waiting at the wait sites classed contention
    /// (any form: futex words, semaphores, per-waiter parkers, latches) in
    /// this interval, estimated from the sampled sleeps.
    pub lock_wait_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    pub stack_samples: u64,
    /// Syscall samples put off while user space was behind on the ring
    /// buffer; the next sample of the syscall carried their weight, so
    /// only resolution was lost. A syscall whose every sample was put off
    /// (a few calls, all while user space was behind) has no call site.
    pub stack_samples_deferred: u64,
    /// How entries are chosen for a stack.
    pub policy: String,
    /// How syscall latencies are measured (which calls are timed).
    #[serde(default)]
    pub latency_policy: String,
    pub stack_bytes_copied: u64,
    pub unwinder: String,
    /// Processes with JIT-compiled code in their stacks, and how its frames
    /// were named.
    #[serde(default)]
    pub jit: Vec<JitProcess>,
    /// Interpreters whose frames were read at sample time (CPython), and
    /// what became of those frames.
    #[serde(default)]
    pub interpreters: Interpreters,
}

/// Interpreted frames (issue 20): the interpreters seen, one line each
/// ("pid 123: CPython 3.11.2 (/usr/bin/python3.11)", or why its frames
/// cannot be read), and counts of what the frame walk gave.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Interpreters {
    pub seen: Vec<String>,
    /// Samples of those processes whose frame chain was read.
    pub samples: u64,
    /// ... of threads with no interpreter state (threads it never ran on).
    pub samples_no_thread: u64,
    /// ... where a read failed midway (the frames before it kept).
    pub samples_fault: u64,
    /// ... deeper than the frames recorded per sample.
    pub samples_truncated: u64,
    /// Interpreted frames put into stacks, and of those, whose code could
    /// not be read (gone, or not code): shown unnamed.
    pub frames: u64,
    pub frames_unreadable: u64,
    /// Samples whose eval-loop frames and runs of interpreted frames did
    /// not pair up one to one.
    pub merge_mismatches: u64,
    pub registrations_failed: u64,
}

impl Interpreters {
    /// A sample whose frame chain the BPF walk read, counted with what
    /// became of the walk.
    pub fn walked(&mut self, no_thread: bool, fault: bool, truncated: bool) {
        self.samples += 1;
        self.samples_no_thread += u64::from(no_thread);
        self.samples_fault += u64::from(fault);
        self.samples_truncated += u64::from(truncated);
    }

    /// Another interpreter's counts added to these (`seen` left alone).
    pub fn add(&mut self, o: &Interpreters) {
        self.samples += o.samples;
        self.samples_no_thread += o.samples_no_thread;
        self.samples_fault += o.samples_fault;
        self.samples_truncated += o.samples_truncated;
        self.frames += o.frames;
        self.frames_unreadable += o.frames_unreadable;
        self.merge_mismatches += o.merge_mismatches;
        self.registrations_failed += o.registrations_failed;
    }
}

/// One process's JIT code (a JVM, Node, CPython's perf trampolines): where
/// its frames' names came from, and what kept some of them unnamed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JitProcess {
    pub pid: u32,
    pub comm: String,
    /// Entries of its perf map read (0 when there was none).
    pub perf_map_entries: u64,
    /// JIT frames (distinct addresses) in its stacks, and of those named.
    pub frames: u64,
    pub frames_named: u64,
    /// Whether its JIT code keeps frame pointers, the one way to walk a
    /// stack through it (null: not known).
    pub frame_pointers: Option<bool>,
    /// What went wrong, in words, with what to do; null when nothing did.
    pub problem: Option<String>,
}

/// Everything dropped or not resolved; all zero in a clean run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loss {
    /// Stack samples or process events lost to a full ring buffer.
    pub ringbuf_full: u64,
    /// Stack samples of which no page from sp on could be copied (not
    /// counted: a thread exiting, or inside execve past its point of no
    /// return, which has no user stack to show).
    pub stack_read_failed: u64,
    /// Threads that could not be tracked (task storage allocation failed).
    pub task_storage_failed: u64,
    /// Exited threads whose counters did not fit the map.
    pub thread_map_full: u64,
    pub errno_map_full: u64,
    pub syscall_nr_out_of_range: u64,
    pub events_undecodable: u64,
    /// Samples from processes whose memory map could not be read in time.
    pub maps_unavailable: u64,
    /// Stacks deeper than the user stack bytes copied per sample.
    pub stacks_truncated: u64,
    /// Distinct frames left without a function name.
    pub frames_unsymbolized: u64,
    /// Mapped files that could not be read for unwinding.
    pub modules_unreadable: u64,
    /// Threads present at the start with no final counters.
    pub threads_unaccounted: u64,
    /// Lock operations on locks the lock map had no room for.
    pub lock_map_full: u64,
    /// Waiting threads not counted as distinct (map full).
    pub lock_thread_map_full: u64,
    /// Off-CPU or wake-up time with no room in its map.
    pub sched_map_full: u64,
    /// Poll-family calls with no room in their map.
    pub poll_map_full: u64,
    /// CPU samples in the kernel whose kernel stack was lost (map full).
    #[serde(default)]
    pub kernel_stack_lost: u64,
    /// Threads switched out again with no switch-in reported for them
    /// since the last time (some kernel builds put a thread back on a CPU
    /// without a sched_switch event): that off-CPU interval and its sleep
    /// are not counted.
    #[serde(default)]
    pub switch_in_unseen: u64,
    /// Hook runs the kernel skipped because one of kerntax's programs was
    /// already running on that CPU (a syscall, switch or wake-up unseen).
    #[serde(default)]
    pub bpf_recursion_misses: u64,
    /// Distinct frames in JIT code that no perf map named.
    #[serde(default)]
    pub jit_frames_unnamed: u64,
    /// Distinct stacks that end in JIT code of a JVM running without frame
    /// pointers: cut there, their callers unseen.
    #[serde(default)]
    pub jit_stacks_cut: u64,
    /// Interpreted frames shown unnamed: their code object was gone before
    /// it was read, or was not one (`sampling.interpreters`).
    #[serde(default)]
    pub interpreted_frames_unreadable: u64,
    /// Samples whose interpreter frame chain could not be read to its end
    /// (a read faulted; the frames before it kept).
    #[serde(default)]
    pub interpreted_chains_faulted: u64,
    /// On-CPU samples counted without their stacks: past
    /// `tally::MAX_CPU_KEYS` keys the keys with fewest samples gave way
    /// (shown as `[stacks not kept]`).
    #[serde(default)]
    pub cpu_stacks_unkept: u64,
    /// Exited processes whose memory maps were let go (past the last
    /// 4,096 exited): their lock addresses are named without them.
    #[serde(default)]
    pub process_maps_forgotten: u64,
    /// `--perfetto`'s scheduling records lost to their full ring buffer
    /// (the trace lacks those switches or wake-ups).
    #[serde(default)]
    pub trace_ringbuf_full: u64,
    /// `--perfetto`'s records past `sched_trace::MAX_RECORDS`, not kept:
    /// the trace ends early.
    #[serde(default)]
    pub trace_records_unkept: u64,
    /// Changes of a process's executable file mappings (a library loaded
    /// or unloaded) whose new mappings could not be read (its memory map
    /// was busy): its samples until /proc/PID/maps is read again may be
    /// named in the mappings before the change.
    #[serde(default)]
    pub map_changes_unread: u64,
    /// Processes whose lost mapping changes (a full ring buffer, a busy
    /// memory map) the kernel could not keep for their samples (its table
    /// of them full): their frames may be named in code that was no longer
    /// mapped where they ran.
    #[serde(default)]
    pub maps_lost_untracked: u64,
    /// Frames left unnamed ("[unknown]") because they lay where a change of
    /// their process's executable mappings was lost and none had come
    /// since: what code was there is not known, and a later read of /proc
    /// may show another library at that address.
    #[serde(default)]
    pub frames_in_lost_maps: u64,
}

impl Loss {
    /// (name, count) of the non-zero counters, by name.
    pub fn nonzero(&self) -> Vec<(String, u64)> {
        let value = serde_json::to_value(self).expect("loss counters serialize");
        let fields = value.as_object().cloned().unwrap_or_default();
        fields
            .into_iter()
            .filter_map(|(k, v)| v.as_u64().filter(|&c| c > 0).map(|c| (k, c)))
            .collect()
    }

    pub fn total(&self) -> u64 {
        self.nonzero().iter().map(|(_, c)| c).sum()
    }

    /// What was lost between `earlier` and `self`, two reads of one run's
    /// counters (they only grow): every counter's growth.
    pub fn since(&self, earlier: &Loss) -> Loss {
        let mut now = serde_json::to_value(self).expect("loss counters serialize");
        let before = serde_json::to_value(earlier).expect("loss counters serialize");
        if let Some(fields) = now.as_object_mut() {
            for (k, v) in fields {
                if let (Some(n), Some(b)) = (v.as_u64(), before[k.as_str()].as_u64()) {
                    *v = n.saturating_sub(b).into();
                }
            }
        }
        serde_json::from_value(now).expect("loss counters deserialize")
    }
}

#[cfg(test)]
mod loss_tests {
    use super::Loss;

    #[test]
    fn losses_since_an_earlier_read_are_each_counters_growth() {
        let earlier = Loss {
            ringbuf_full: 3,
            stacks_truncated: 10,
            ..Loss::default()
        };
        let later = Loss {
            ringbuf_full: 5,
            stacks_truncated: 10,
            maps_unavailable: 1,
            ..Loss::default()
        };
        assert_eq!(
            later.since(&earlier),
            Loss {
                ringbuf_full: 2,
                maps_unavailable: 1,
                ..Loss::default()
            }
        );
        assert_eq!(later.since(&later).total(), 0);
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profiler {
    /// How syscalls are observed.
    pub mechanism: String,
    /// From kerntax's start until the target ran with probes attached.
    pub attach_ns: u64,
    /// kerntax's own peak resident memory.
    pub peak_rss_bytes: u64,
    pub kernel: String,
    /// What this kernel lacks of what kerntax's programs can use, how
    /// kerntax copes and what it costs (collect/features.rs); empty on the
    /// newest kernels.
    #[serde(default)]
    pub kernel_lacks: Vec<crate::collect::features::KernelGap>,
    /// kerntax's own CPU time (user + system, its user-space side) while it
    /// profiled: what it took from the machine besides its BPF programs.
    #[serde(default)]
    pub window_cpu_ns: u64,
    /// What each BPF program cost in the kernel, most first; counted only
    /// while `kernel.bpf_stats_enabled` is 1 (else empty).
    #[serde(default)]
    pub programs: Vec<crate::model::ProgramCost>,
    /// What kerntax held when profiling ended, by kind (distinct stacks,
    /// each tally's keys...): what its memory grows with on a long attach.
    #[serde(default)]
    pub held: BTreeMap<String, u64>,
    /// When profiling began, ns since the Unix epoch (0: not known, as in
    /// reports written before it was kept): the time a pprof is stamped
    /// with, which continuous-profiling backends file it under.
    #[serde(default)]
    pub started_unix_ns: u64,
}
