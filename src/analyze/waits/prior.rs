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

use crate::frame::Frame;
use crate::runtime::{Waits, waits_in};

pub use crate::report::WaitPrior;

/// What each kind of a runtime's wait primitives says, checked on each
/// frame in this order: a result's waits before the lock acquisitions some
/// of them are a prefix of, conditions last (a VM's primitives are built
/// on them).
type Kind = fn(&Waits) -> &'static [&'static str];
const KINDS: &[(Kind, WaitPrior)] = &[
    (|w| w.idle, WaitPrior::RuntimeIdle),
    (|w| w.queue_take, WaitPrior::QueueTake),
    (|w| w.join, WaitPrior::Join),
    (|w| w.result, WaitPrior::Result),
    (|w| w.acquire, WaitPrior::LockAcquire),
    (|w| w.condition, WaitPrior::Condition),
];

/// The prior of a sleep in syscall `syscall` with `frames` (innermost
/// first), up to and including `site` (the function the site is named by).
pub fn prior_of(syscall: &str, frames: &[Frame], site: &str) -> WaitPrior {
    match syscall {
        "nanosleep" | "clock_nanosleep" | "pause" => return WaitPrior::Sleep,
        "sched_yield" => return WaitPrior::Yield,
        "semop" | "semtimedop" => return WaitPrior::LockAcquire,
        "futex" | "futex_waitv" => {}
        _ => return WaitPrior::Io,
    }
    let end = frames
        .iter()
        .position(|f| f.function() == site)
        .unwrap_or(frames.len());
    let chain = &frames[..end];
    if chain
        .iter()
        .any(|f| waits_in(f.function(), |w| w.reacquire))
    {
        return WaitPrior::LockAcquire;
    }
    // The queue's take is the site (or on its way out): look one frame past.
    let outer = frames.get(end).into_iter().chain(chain.iter().rev());
    for f in outer {
        let name = f.function();
        if let Some((_, prior)) = KINDS.iter().find(|(kind, _)| waits_in(name, kind)) {
            return *prior;
        }
    }
    WaitPrior::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(f: &[&str]) -> Vec<crate::frame::Frame> {
        f.iter().map(|s| crate::frame::Frame::new(*s)).collect()
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

    /// caddy-serve's idle thread, as its `.gopclntab` names it: the site is
    /// where the scheduler parks it, past the runtime's primitives, and the
    /// runtime's frames say what it is; its waker wakes it from startm.
    #[test]
    fn an_idle_go_thread_waits_at_stopm_as_the_runtimes_own() {
        let park = v(&[
            "runtime.futex (caddy)",
            "runtime.futexsleep (caddy)",
            "runtime.notesleep (caddy)",
            "runtime.stopm (caddy)",
            "runtime.findRunnable (caddy)",
            "runtime.schedule (caddy)",
            "runtime.park_m (caddy)",
            "runtime.mcall (caddy)",
        ]);
        let (site, via) =
            crate::analyze::waits::site_of(&park, 0, crate::analyze::waits::WAIT_WORDS);
        assert_eq!(site, "runtime.stopm");
        assert_eq!(via.last().map(String::as_str), Some("runtime.notesleep"));
        assert_eq!(prior_of("futex", &park, &site), WaitPrior::RuntimeIdle);
        let wake = v(&[
            "runtime.futex (caddy)",
            "runtime.futexwakeup (caddy)",
            "runtime.notewakeup (caddy)",
            "runtime.startm (caddy)",
            "runtime.wakep (caddy)",
        ]);
        assert_eq!(
            crate::analyze::waits::site_of(&wake, 0, crate::analyze::waits::WAKE_WORDS).0,
            "runtime.startm"
        );
        // The runtime's own mutex is a lock, not its idle parking.
        let lock = v(&[
            "runtime.futex (caddy)",
            "runtime.futexsleep (caddy)",
            "runtime.lock2 (caddy)",
            "runtime.sysmon (caddy)",
        ]);
        let (site, _) = crate::analyze::waits::site_of(&lock, 0, crate::analyze::waits::WAIT_WORDS);
        assert_eq!(site, "runtime.lock2");
        assert_eq!(prior_of("futex", &lock, &site), WaitPrior::LockAcquire);
    }
}
