//! The first signal: what the standard runtime's own frames say a wait is
//! for. glibc, the JVM, Rust's std, Ruby and Go name their primitives, and
//! a thread inside `pthread_mutex_lock` or `AbstractQueuedSynchronizer.
//! acquire` is taking a lock, one inside `pthread_cond_wait` or
//! `ConditionObject.await` waits for a condition (work, an event, or a lock
//! built from a condition, like an interpreter's global lock). It is a
//! prior: a lock acquisition means whoever wakes the waiter released what
//! it held, a condition wait says nothing by itself and the evidence
//! (turns, relays, work in hand) decides.
//!
//! Why the outermost primitive wins: a VM builds its primitives from the C
//! library's (HotSpot's parker waits on a pthread condition variable under
//! a Java lock acquisition), so the primitive nearest the program's code
//! states the semantics. One exception: glibc re-takes a condition
//! variable's mutex inside `pthread_cond_wait`, and a sleep there is a
//! mutex wait.

use crate::frame::function;

pub use crate::report::WaitPrior;

/// Frames (parts of function names) of the standard runtimes' lock
/// acquisitions: glibc, Rust's std, the JDK and HotSpot, Ruby.
const ACQUIRE: &[&str] = &[
    "__lll_lock_wait",
    "pthread_mutex_lock",
    "pthread_mutex_timedlock",
    "pthread_mutex_clocklock",
    "pthread_mutex_cond_lock",
    "lll_mutex_lock",
    "pthread_rwlock_rdlock",
    "pthread_rwlock_wrlock",
    "pthread_rwlock_timedrdlock",
    "pthread_rwlock_timedwrlock",
    "pthread_rwlock_clockrdlock",
    "pthread_rwlock_clockwrlock",
    "::Mutex::lock_contended",
    "::RwLock::read_contended",
    "::RwLock::write_contended",
    "AbstractQueuedSynchronizer.acquire",
    "locks.ReentrantLock",
    "locks.ReentrantReadWriteLock",
    "locks.StampedLock.acquire",
    "ObjectMonitor::enter",
    "ObjectMonitor::EnterI",
    "ObjectSynchronizer::enter",
    "JVM_MonitorEnter",
    "InterpreterRuntime::monitorenter",
    "SharedRuntime::complete_monitor_locking",
    "Runtime1::monitorenter",
    "rb_mutex_lock",
];

/// Frames of the standard runtimes' condition waits: glibc's condition
/// variables and semaphores, Rust's Condvar, the JDK's conditions and
/// Object.wait, HotSpot's own monitors and semaphores, Ruby's native
/// condition variables, Go's scheduler notes.
const CONDITION: &[&str] = &[
    "pthread_cond_wait",
    "pthread_cond_timedwait",
    "pthread_cond_clockwait",
    "__pthread_cond_wait_common",
    "sem_wait",
    "sem_timedwait",
    "sem_clockwait",
    "__new_sem_wait",
    "::Condvar::wait",
    "ConditionObject.await",
    "java.lang.Object.wait",
    "JVM_MonitorWait",
    "ObjectMonitor::wait",
    "Monitor::wait",
    "PosixSemaphore::wait",
    "rb_native_cond_wait",
    "rb_native_cond_timedwait",
    "runtime.notesleep",
    "runtime.notetsleep",
];

/// Frames of the JDK's blocking queues' takes and its executors' task
/// fetches: a consumer waiting for an item.
const QUEUE_TAKE: &[&str] = &[
    "BlockingQueue.take",
    "BlockingQueue.poll",
    "BlockingDeque.take",
    "BlockingDeque.poll",
    "java.util.concurrent.SynchronousQueue",
    "java.util.concurrent.LinkedTransferQueue",
    "java.util.concurrent.DelayQueue.take",
    "java.util.concurrent.DelayQueue.poll",
    "DelayedWorkQueue.take",
    "DelayedWorkQueue.poll",
    "ThreadPoolExecutor.getTask",
    "ForkJoinPool.awaitWork",
];

/// Frames of the JDK's waits for a result another thread completes: its
/// futures, latches and barriers, and AQS's shared acquisitions under
/// them (a latch's await and a semaphore's acquire go through
/// `acquireShared*`/`tryAcquireSharedNanos`; a read lock's outer frame,
/// `ReentrantReadWriteLock`, is met first and names a lock). Checked on
/// each frame before ACQUIRE, whose `AbstractQueuedSynchronizer.acquire`
/// is a prefix of them.
const RESULT: &[&str] = &[
    "AbstractQueuedSynchronizer.acquireShared",
    "AbstractQueuedSynchronizer.tryAcquireSharedNanos",
    "java.util.concurrent.CountDownLatch.await",
    "java.util.concurrent.Semaphore.acquire",
    "java.util.concurrent.Semaphore.tryAcquire",
    "java.util.concurrent.CompletableFuture.get",
    "java.util.concurrent.CompletableFuture.join",
    "java.util.concurrent.CompletableFuture.timedGet",
    "java.util.concurrent.CompletableFuture.waitingGet",
    "java.util.concurrent.FutureTask.get",
    "java.util.concurrent.FutureTask.awaitDone",
    "java.util.concurrent.Phaser.",
];

const JOIN: &[&str] = &[
    "pthread_join",
    "pthread_clockjoin",
    "pthread_timedjoin",
    "java.lang.Thread.join",
];

/// glibc re-taking a condition variable's mutex inside pthread_cond_wait.
const COND_MUTEX: &str = "pthread_mutex_cond_lock";

fn matches(name: &str, table: &[&str]) -> bool {
    table.iter().any(|t| name.contains(t))
}

/// The prior of a sleep in syscall `syscall` with `frames` (innermost
/// first), up to and including `site` (the function the site is named by).
pub fn prior_of(syscall: &str, frames: &[String], site: &str) -> WaitPrior {
    match syscall {
        "nanosleep" | "clock_nanosleep" | "pause" => return WaitPrior::Sleep,
        "sched_yield" => return WaitPrior::Yield,
        "semop" | "semtimedop" => return WaitPrior::LockAcquire,
        "futex" | "futex_waitv" => {}
        _ => return WaitPrior::Io,
    }
    let end = frames
        .iter()
        .position(|f| function(f) == site)
        .unwrap_or(frames.len());
    let chain = &frames[..end];
    if chain.iter().any(|f| function(f).contains(COND_MUTEX)) {
        return WaitPrior::LockAcquire;
    }
    // The queue's take is the site (or on its way out): look one frame past.
    let outer = frames.get(end).into_iter().chain(chain.iter().rev());
    for f in outer {
        let name = function(f);
        if crate::analyze::go_runtime::is_idle_park(name) {
            return WaitPrior::RuntimeIdle;
        }
        if crate::analyze::go_runtime::is_runtime_lock(name) {
            return WaitPrior::LockAcquire;
        }
        if matches(name, QUEUE_TAKE) {
            return WaitPrior::QueueTake;
        }
        if matches(name, JOIN) {
            return WaitPrior::Join;
        }
        if matches(name, RESULT) {
            return WaitPrior::Result;
        }
        if matches(name, ACQUIRE) {
            return WaitPrior::LockAcquire;
        }
        if matches(name, CONDITION) {
            return WaitPrior::Condition;
        }
    }
    WaitPrior::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(f: &[&str]) -> Vec<String> {
        f.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_primitive_nearest_the_programs_code_states_the_prior() {
        // A Java lock: HotSpot's parker waits on a condvar underneath.
        let java_lock = v(&[
            "___pthread_cond_wait (pthread_cond_wait.c:618)",
            "Parker::park(bool, long) (libjvm.so)",
            "jdk.internal.misc.Unsafe.park (jit)",
            "java.util.concurrent.locks.AbstractQueuedSynchronizer.acquire (jit)",
            "java.util.concurrent.locks.ReentrantLock.lock (jit)",
            "Server.handle (jit)",
        ]);
        assert_eq!(
            prior_of("futex", &java_lock, "Server.handle"),
            WaitPrior::LockAcquire
        );
        let queue = v(&[
            "___pthread_cond_wait (pthread_cond_wait.c:618)",
            "Parker::park(bool, long) (libjvm.so)",
            "java.util.concurrent.locks.AbstractQueuedSynchronizer$ConditionObject.await (jit)",
            "java.util.concurrent.LinkedBlockingQueue.take (jit)",
            "java.util.concurrent.ThreadPoolExecutor.getTask (jit)",
        ]);
        assert_eq!(
            prior_of(
                "futex",
                &queue,
                "java.util.concurrent.LinkedBlockingQueue.take"
            ),
            WaitPrior::QueueTake
        );
        // C2 inlined take and await into getTask.
        let inlined = v(&[
            "___pthread_cond_wait (pthread_cond_wait.c:618)",
            "Parker::park(bool, long) (libjvm.so)",
            "jdk.internal.misc.Unsafe.park (jit)",
            "java.util.concurrent.ThreadPoolExecutor.getTask (jit)",
            "Interpreter (jit)",
        ]);
        assert_eq!(
            prior_of(
                "futex",
                &inlined,
                "java.util.concurrent.ThreadPoolExecutor.getTask"
            ),
            WaitPrior::QueueTake
        );
        // glibc re-taking the condvar's mutex: a mutex wait.
        let retake = v(&[
            "__GI___lll_lock_wait (lowlevellock.c:49)",
            "__pthread_mutex_cond_lock (pthread_mutex_lock.c:93)",
            "___pthread_cond_timedwait64 (pthread_cond_wait.c:643)",
            "take_gil (ceval_gil.h:256)",
        ]);
        assert_eq!(
            prior_of("futex", &retake, "take_gil"),
            WaitPrior::LockAcquire
        );
        let join = v(&[
            "__futex_abstimed_wait_common (futex-internal.c:57)",
            "___pthread_clockjoin_ex (pthread_join_common.c:105)",
            "main (a.c:3)",
        ]);
        assert_eq!(prior_of("futex", &join, "main"), WaitPrior::Join);
        // Issue 37: a client's wait for its RPC's reply, a semaphore's
        // permits under AQS's shared acquire, is no lock's acquisition; a
        // read lock over the same shared acquire is.
        let reply = v(&[
            "jdk.internal.misc.Unsafe.park (jit)",
            "java.util.concurrent.locks.AbstractQueuedSynchronizer.acquire (jit)",
            "java.util.concurrent.locks.AbstractQueuedSynchronizer.tryAcquireSharedNanos (jit)",
            "org.apache.rocketmq.remoting.netty.NettyRemotingAbstract.invokeImpl (jit)",
        ]);
        assert_eq!(
            prior_of(
                "futex",
                &reply,
                "org.apache.rocketmq.remoting.netty.NettyRemotingAbstract.invokeImpl"
            ),
            WaitPrior::Result
        );
        let future = v(&[
            "jdk.internal.misc.Unsafe.park (jit)",
            "java.util.concurrent.CompletableFuture.timedGet (jit)",
        ]);
        assert_eq!(
            prior_of(
                "futex",
                &future,
                "java.util.concurrent.CompletableFuture.timedGet"
            ),
            WaitPrior::Result
        );
        let read_lock = v(&[
            "jdk.internal.misc.Unsafe.park (jit)",
            "java.util.concurrent.locks.AbstractQueuedSynchronizer.acquireShared (jit)",
            "java.util.concurrent.locks.ReentrantReadWriteLock$ReadLock.lock (jit)",
            "Cache.get (jit)",
        ]);
        assert_eq!(
            prior_of("futex", &read_lock, "Cache.get"),
            WaitPrior::LockAcquire
        );
        assert_eq!(
            prior_of("futex", &v(&["raw_wait (a.c:1)"]), "raw_wait"),
            WaitPrior::Unknown
        );
        assert_eq!(prior_of("epoll_wait", &[], "x"), WaitPrior::Io);
        assert_eq!(prior_of("sched_yield", &[], "x"), WaitPrior::Yield);
        assert_eq!(prior_of("clock_nanosleep", &[], "x"), WaitPrior::Sleep);
        assert_eq!(prior_of("semop", &[], "x"), WaitPrior::LockAcquire);
    }
}
