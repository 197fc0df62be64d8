//! The report's words for what a lock is and what a wait's frames say the
//! thread was doing: decided by the analysis (`analyze::locks::classify`,
//! `analyze::waits::prior`), stated in the report.

use serde::{Deserialize, Serialize};

/// What kind of lock a futex word is, as the evidence showed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockKind {
    Mutex,
    Rwlock,
    Condvar,
    Semaphore,
    SysvSem,
    PiMutex,
    /// A thread waiting for another to exit (pthread_join).
    ThreadJoin,
    Unknown,
}

impl LockKind {
    /// Whether waiting on it means contention. Condition variables and joins
    /// are waiting for work or for a thread: an idle pool sleeps there.
    pub fn is_contention(self) -> bool {
        !matches!(self, LockKind::Condvar | LockKind::ThreadJoin)
    }

    /// Whether a thread that wakes its waiters is releasing it, so has held
    /// it: a lock, not a semaphore or condition that anyone may post.
    pub fn is_held(self) -> bool {
        matches!(self, LockKind::Mutex | LockKind::Rwlock | LockKind::PiMutex)
    }

    pub fn name(self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::Rwlock => "rwlock",
            LockKind::Condvar => "condvar",
            LockKind::Semaphore => "semaphore",
            LockKind::SysvSem => "sysv-sem",
            LockKind::PiMutex => "pi-mutex",
            LockKind::ThreadJoin => "thread-join",
            LockKind::Unknown => "unknown",
        }
    }
}

/// What the runtime's frames say the threads do at a wait.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum WaitPrior {
    /// Taking a lock (a mutex, a rwlock, a Java lock or monitor, a SysV
    /// semaphore): whoever wakes it released what it held.
    LockAcquire,
    /// Waiting for a condition or a semaphore's post.
    Condition,
    /// Taking from a standard library's blocking queue or an executor's
    /// task queue: waiting for an item. Its consumers wake one another by
    /// design (a take that leaves items behind signals the next taker).
    QueueTake,
    /// Waiting for a result another thread completes: a future's get, a
    /// latch's await, a semaphore's permits. Whoever completes it ends the
    /// wait and holds nothing: who that is (a waiter handing permits back,
    /// a worker, a thread that read a reply) decides the class.
    Result,
    /// A runtime's own scheduler parking a thread it has nothing to run on
    /// (Go's `runtime.stopm`): the runtime's idle threads, nothing held.
    RuntimeIdle,
    /// In an I/O or event call (poll, epoll, read, accept, wait4...).
    Io,
    /// Asleep on purpose (nanosleep, pause).
    Sleep,
    /// Giving the CPU up in sched_yield.
    Yield,
    /// Waiting for a thread to exit.
    Join,
    /// Nothing the runtime's frames say.
    #[default]
    Unknown,
}

impl WaitPrior {
    pub fn name(self) -> &'static str {
        match self {
            WaitPrior::LockAcquire => "lock acquisition",
            WaitPrior::Condition => "condition wait",
            WaitPrior::QueueTake => "taking from a queue",
            WaitPrior::Result => "waiting for a result",
            WaitPrior::RuntimeIdle => "a runtime's idle thread",
            WaitPrior::Io => "I/O or event wait",
            WaitPrior::Sleep => "sleep",
            WaitPrior::Yield => "yield",
            WaitPrior::Join => "join",
            WaitPrior::Unknown => "unknown",
        }
    }
}
