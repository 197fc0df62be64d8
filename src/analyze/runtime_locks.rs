//! Which of the standard runtimes' well-known locks a wait is on (CPython's
//! GIL, Ruby's GVL, the JVM's safepoints and heap lock, glibc malloc's
//! arena locks), by the signs each runtime's data states (`crate::runtime`).
//! Their waits spread over several sites and lock words (a GIL's condvar,
//! its mutex and its switch condvar; a GVL's per-thread condition variables
//! and its timer's timed wait), often in static functions a stripped
//! distribution build does not name; what identifies them is what the
//! runtime exports: the variable the lock lives in (`_PyRuntime`), or the
//! named functions of the runtime the waits are reached through. This
//! module reads those signs off a wait's stack; it names no runtime's
//! function itself.

use crate::frame::{Frame, function};
use crate::runtime::jvm;
pub use crate::runtime::{LockRole, RuntimeLock, Sign};

/// Whether a function is the JVM's safepoint wait: a thread stopped for a VM
/// operation (its caller, `SafepointMechanism::process`, is only the poll).
pub fn is_safepoint(function: &str) -> bool {
    function.starts_with(jvm::SAFEPOINT_BLOCK)
}

/// Whether frame `i` of a wait's stack (innermost first) is libjvm's: named
/// so, or with compiled Java methods on the stack.
fn in_libjvm(frames: &[Frame], i: usize) -> bool {
    frames[i].contains(jvm::VM_LIBRARY) || frames.iter().any(|f| f.is_jit())
}

/// The index of `VMThread::execute` on a wait's stack (innermost first): the
/// thread waits for a VM operation it asked for, whatever method asked
/// (RocketMQ's allocations waiting for the collection they asked for read
/// as "waiting for work" at a dozen of its methods, CommitLog's up to 126
/// ms a run). A program's own VMThread class is told apart as HotSpot's
/// locks are.
pub fn vm_operation_wait(frames: &[Frame]) -> Option<usize> {
    frames
        .iter()
        .position(|f| f.function().starts_with(jvm::VM_OPERATION_FRAME))
        .filter(|&i| in_libjvm(frames, i))
}

/// The index of the VM function on a wait's stack (innermost first) that
/// takes one of HotSpot's own locks (`G1CollectedHeap::attempt_allocation_slow`
/// past `Mutex::lock_contended` and `Mutex::lock`): a Java thread queued
/// there waits for the VM, whatever method it was in. HotSpot's frames are
/// told from a program's own `Mutex::lock` by libjvm's name on them or by
/// the Java frames on the stack.
pub fn hotspot_lock_taker(frames: &[Frame]) -> Option<usize> {
    let is_lock = |f: &str| {
        let n = function(f);
        jvm::LOCK_FRAMES.iter().any(|p| {
            n.strip_prefix(p)
                .is_some_and(|r| r.starts_with('(') || r.starts_with('_'))
        })
    };
    let first = frames.iter().position(|f| is_lock(f))?;
    let jvm = in_libjvm(frames, first);
    let taker = first + frames[first..].iter().take_while(|f| is_lock(f)).count();
    (jvm && taker < frames.len()).then_some(taker)
}

/// Whether a frame is unnamed (`libfoo.so+0x1234`).
pub fn unnamed(frame: &str) -> bool {
    let f = function(frame);
    f.rsplit_once("+0x").is_some_and(|(m, off)| {
        !m.is_empty() && !m.contains(' ') && off.chars().all(|c| c.is_ascii_hexdigit())
    })
}

/// The first named frame outward from the runtime's first unnamed (static)
/// function in `lib` on the wait's stack: the exported entry the static
/// wait code was reached through.
fn nearest_named_in(frames: &[Frame], lib: &str) -> Option<String> {
    let start = frames
        .iter()
        .position(|f| unnamed(f) && f.function().starts_with(lib))?;
    frames[start..]
        .iter()
        .find(|f| !unnamed(f))
        .map(|f| f.function().to_string())
}

/// The runtime lock a wait with `frames` (innermost first) on a lock named
/// `symbol` (the variable it lives in, if known) is, if any: the first of
/// the runtimes' locks (`crate::runtime::locks`) one of whose signs holds.
pub fn identify(frames: &[Frame], symbol: Option<&str>) -> Option<&'static RuntimeLock> {
    let names: Vec<&str> = frames.iter().map(|f| f.function()).collect();
    let wait = Wait {
        frames,
        names: &names,
        symbol,
    };
    crate::runtime::locks().find(|l| l.signs.iter().any(|s| wait.shows(s)))
}

/// A wait as its signs are read off it.
struct Wait<'a> {
    frames: &'a [Frame],
    names: &'a [&'a str],
    symbol: Option<&'a str>,
}

impl Wait<'_> {
    fn shows(&self, sign: &Sign) -> bool {
        match sign {
            Sign::Frame(parts) => self
                .names
                .iter()
                .any(|n| parts.iter().any(|p| n.contains(p))),
            Sign::FrameNamed(whole) => self.names.iter().any(|n| {
                whole
                    .iter()
                    .any(|m| n.trim_start_matches('_') == m.trim_start_matches('_'))
            }),
            Sign::Variable(prefix) => self.symbol.is_some_and(|s| s.starts_with(prefix)),
            Sign::ReachedThrough { libraries, callers } => libraries.iter().any(|lib| {
                nearest_named_in(self.frames, lib).is_some_and(|n| callers.contains(&n.as_str()))
            }),
            Sign::VmOperation => vm_operation_wait(self.frames).is_some(),
            Sign::VmLockTakenBy(takers) => hotspot_lock_taker(self.frames)
                .is_some_and(|i| takers.iter().any(|t| self.names[i].starts_with(t))),
            Sign::All(signs) => signs.iter().all(|s| self.shows(s)),
        }
    }
}

/// An interpreter's global lock (CPython's GIL, Ruby's GVL): a thread
/// waits for it only to run the language's code.
pub fn only_for_work(lock: &RuntimeLock) -> bool {
    lock.role == LockRole::Interpreter
}

/// A lock a thread takes only inside an allocation (the JVM's heap lock, in
/// a collector's slow path; a glibc malloc arena's, in malloc and free): its
/// waiters are in the middle of their work whatever they do between.
pub fn only_in_allocation(lock: &RuntimeLock) -> bool {
    lock.role == LockRole::Allocation
}

/// The runtime lock the same name (`CPython's GIL`) stands for.
pub fn by_name(name: &str) -> Option<&'static RuntimeLock> {
    crate::runtime::locks().find(|l| l.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::cpython::GIL as CPYTHON_GIL;
    use crate::runtime::cruby::GVL as RUBY_GVL;
    use crate::runtime::glibc::MALLOC_ARENA;
    use crate::runtime::jvm::{HEAP_LOCK as JVM_HEAP_LOCK, SAFEPOINT as JVM_SAFEPOINT};

    #[test]
    fn only_an_interpreters_global_lock_is_waited_for_only_to_run() {
        assert!(only_for_work(&CPYTHON_GIL) && only_for_work(&RUBY_GVL));
        assert!(!only_for_work(&JVM_SAFEPOINT) && !only_for_work(&MALLOC_ARENA));
        assert!(only_in_allocation(&JVM_HEAP_LOCK) && only_in_allocation(&MALLOC_ARENA));
        assert!(!only_in_allocation(&JVM_SAFEPOINT) && !only_in_allocation(&RUBY_GVL));
    }

    fn v(f: &[&str]) -> Vec<Frame> {
        f.iter().map(|s| Frame::new(*s)).collect()
    }

    /// A RocketMQ send thread's allocation waiting on G1's heap lock (suite
    /// run 8, issue 19).
    fn g1(taker: &str) -> Vec<Frame> {
        v(&[
            "__GI___lll_lock_wait (lowlevellock.c:49)",
            "___pthread_mutex_lock (pthread_mutex_lock.c:93)",
            "Mutex::lock_contended(Thread*) (libjvm.so)",
            "Mutex::lock() (libjvm.so)",
            taker,
            "MemAllocator::allocate() const (libjvm.so)",
            "Runtime1::new_object_array(JavaThread*, Klass*, int) (libjvm.so)",
            "java.util.HashMap.resize (jit)",
        ])
    }

    #[test]
    fn a_java_thread_on_hotspots_heap_lock_waits_for_the_vm() {
        let slow = g1("G1CollectedHeap::attempt_allocation_slow(unsigned long) (libjvm.so)");
        assert_eq!(hotspot_lock_taker(&slow), Some(4));
        assert_eq!(
            identify(&slow, None).map(|l| l.name),
            Some("the JVM's heap lock")
        );
        // Another of HotSpot's locks is the VM's, but not the heap lock.
        let other = g1("CompileBroker::compile_method(methodHandle const&) (libjvm.so)");
        assert_eq!(hotspot_lock_taker(&other), Some(4));
        assert!(identify(&other, None).is_none());
        // Rust's std Mutex and a program's own Mutex::lock are not HotSpot's.
        let rust = v(&[
            "syscall (syscall.S:38)",
            "std::sys::sync::mutex::futex::Mutex::lock_contended (futex.rs:68)",
            "app::work (main.rs:3)",
        ]);
        assert_eq!(hotspot_lock_taker(&rust), None);
        let cpp = v(&[
            "__lll_lock_wait (lowlevellock.c:49)",
            "Mutex::lock() (mutex.cc:10)",
            "Cache::get(int) (cache.cc:40)",
        ]);
        assert_eq!(hotspot_lock_taker(&cpp), None);
        // A lock frame with nothing past it names no taker.
        assert_eq!(hotspot_lock_taker(&slow[..4]), None);
    }

    /// A RocketMQ thread whose allocation asked for a collection, waiting
    /// for the VM thread to run it (suite runs on b94c3bb: 126 ms "at"
    /// CommitLog.checkMessageAndReturnSize).
    fn gc_request(libjvm: &str, method: &str) -> Vec<Frame> {
        v(&[
            "___pthread_cond_wait (pthread_cond_wait.c:618)",
            &format!("os::PlatformMonitor::wait(long){libjvm}"),
            &format!("Monitor::wait(long){libjvm}"),
            &format!("VMThread::wait_until_executed(VM_Operation*){libjvm}"),
            &format!("VMThread::execute(VM_Operation*){libjvm}"),
            &format!("G1CollectedHeap::attempt_allocation_slow(unsigned long){libjvm}"),
            &format!("MemAllocator::allocate() const{libjvm}"),
            method,
        ])
    }

    #[test]
    fn a_java_thread_that_asked_for_a_vm_operation_waits_for_the_vm() {
        let jit = "org.apache.rocketmq.store.CommitLog.checkMessageAndReturnSize (jit)";
        let asked = gc_request(" (libjvm.so)", jit);
        assert_eq!(vm_operation_wait(&asked), Some(4));
        assert_eq!(
            identify(&asked, None).map(|l| l.name),
            Some("the JVM's safepoint")
        );
        // A JVM thread of its own (no Java frame) is told by libjvm's name.
        let own = gc_request(" (libjvm.so)", "thread_native_entry(Thread*) (libjvm.so)");
        assert_eq!(vm_operation_wait(&own), Some(4));
        // Neither libjvm nor Java: a program's own VMThread class.
        let cpp = gc_request(" (vm.cc:10)", "main (main.cc:3)");
        assert_eq!(vm_operation_wait(&cpp), None);
        assert!(identify(&cpp, None).is_none());
    }

    #[test]
    fn interpreters_global_locks_are_known_by_what_the_runtime_exports() {
        // Ruby 3.1, stripped libruby: gvl_acquire_common reached from the
        // timer interrupt's yield, and at a thread's start.
        let gvl = v(&[
            "___pthread_cond_wait (pthread_cond_wait.c:618)",
            "rb_native_cond_wait (libruby-3.1.so.3.1.7)",
            "libruby-3.1.so.3.1.7+0x20fe82",
            "libruby-3.1.so.3.1.7+0x211831",
            "rb_threadptr_execute_interrupts (libruby-3.1.so.3.1.7)",
            "rb_vm_exec (libruby-3.1.so.3.1.7)",
        ]);
        assert_eq!(identify(&gvl, None).map(|l| l.name), Some("Ruby's GVL"));
        let start = v(&[
            "___pthread_cond_wait (pthread_cond_wait.c:618)",
            "rb_native_cond_wait (libruby-3.1.so.3.1.7)",
            "libruby-3.1.so.3.1.7+0x20fe82",
            "libruby-3.1.so.3.1.7+0x213975",
            "start_thread (pthread_create.c:442)",
        ]);
        assert_eq!(identify(&start, None).map(|l| l.name), Some("Ruby's GVL"));
        // A join waits through rb_ensure: not the GVL.
        let join = v(&[
            "___pthread_cond_wait (pthread_cond_wait.c:618)",
            "libruby-3.1.so.3.1.7+0x2149e3",
            "rb_ensure (libruby-3.1.so.3.1.7)",
        ]);
        assert!(identify(&join, None).is_none());
        // CPython: by the variable, and by take_gil's caller when unknown.
        assert_eq!(
            identify(&[], Some("_PyRuntime+0x1b0")).map(|l| l.name),
            Some("CPython's GIL")
        );
        let take = v(&[
            "___pthread_cond_timedwait64 (pthread_cond_wait.c:643)",
            "python3.11+0x4f94ed",
            "_PyEval_EvalFrameDefault (python3.11)",
        ]);
        assert_eq!(identify(&take, None).map(|l| l.name), Some("CPython's GIL"));
        let arena = v(&[
            "__lll_lock_wait_private (lowlevellock.c:34)",
            "_int_free (malloc.c:4567)",
            "worker (a.c:3)",
        ]);
        assert_eq!(
            identify(&arena, None).map(|l| l.name),
            Some("glibc malloc's arena lock")
        );
        let app = v(&["__lll_lock_wait (lowlevellock.c:49)", "handle (a.c:1)"]);
        assert!(identify(&app, Some("g_lock")).is_none());
    }

    #[test]
    fn unnamed_frames_are_a_module_and_an_offset() {
        assert!(unnamed("libruby-3.1.so.3.1.7+0x20fe82"));
        assert!(unnamed("mariadbd+0xd5b023"));
        assert!(!unnamed("rb_vm_exec (libruby-3.1.so.3.1.7)"));
        assert!(!unnamed("operator+ (a.cc:3)"));
    }
}
