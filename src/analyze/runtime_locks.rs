//! Well-known locks of the standard runtimes, by the role a user knows them
//! by: CPython's GIL, Ruby's GVL, the JVM's safepoints, glibc malloc's
//! arena locks. Their waits spread over several sites and lock words (a
//! GIL's condvar, its mutex and its switch condvar; a GVL's per-thread
//! condition variables and its timer's timed wait), often in static
//! functions a stripped distribution build does not name; what identifies
//! them is what the runtime exports: the variable the lock lives in
//! (`_PyRuntime`), or the named functions of the runtime the waits are
//! reached through.
//!
//! Domain knowledge, kept to what each runtime's own source states; a
//! program's own names are never matched here.

use crate::frame::function;

/// A runtime's well-known lock.
pub struct RuntimeLock {
    /// How people call it (`CPython's GIL`).
    pub name: &'static str,
    /// What to do about it, in the runtime's terms.
    pub remedy: &'static str,
    /// What to do when it changes hands through the kernel at a high rate
    /// for short holds (issue 37: an interpreter's threads that each make
    /// a small blocking call release the lock around every call and take
    /// it back after); None where the general remedy holds.
    pub churn_remedy: Option<&'static str>,
}

pub const CPYTHON_GIL: RuntimeLock = RuntimeLock {
    name: "CPython's GIL",
    remedy: "Only one thread runs Python code at a time: threads doing CPU-bound Python \
        serialise on the GIL and hand it over every switch interval (5 ms). Run the CPU-bound \
        work in processes (multiprocessing, concurrent.futures.ProcessPoolExecutor), move it \
        into native code that releases the GIL (NumPy, a C extension with \
        Py_BEGIN_ALLOW_THREADS), or run fewer threads; threads only pay off for I/O.",
    churn_remedy: Some(
        "Each blocking call (a read, a write, a sleep, a lock) releases the GIL and takes it \
        back after, and with several threads each doing a little Python between small calls, \
        the GIL changes hands at every call: the threads spend their time handing it over \
        (futex calls, context switches), not running. Make the calls fewer and larger \
        (buffer the writes: io.BufferedWriter, one write per batch), do them from one thread \
        that the others hand data to (a queue.Queue), or run the work in processes; more \
        threads than one only pay off when the calls wait for long.",
    ),
};

pub const RUBY_GVL: RuntimeLock = RuntimeLock {
    name: "Ruby's GVL",
    remedy: "Only one thread runs Ruby code at a time: CPU-bound threads serialise on the GVL \
        and hand it over every time slice (100 ms, or whenever one blocks). Run the CPU-bound \
        work in processes (fork, a pool of workers), in Ractors (Ruby 3), or in a native \
        extension that releases the GVL (rb_thread_call_without_gvl); threads only pay off for \
        I/O.",
    churn_remedy: Some(
        "Each blocking call releases the GVL and takes it back after, and with several threads \
        each doing a little Ruby between small calls, the GVL changes hands at every call: the \
        threads spend their time handing it over, not running. Make the calls fewer and larger \
        (buffer the writes, one write per batch), do them from one thread the others hand data \
        to (a Queue), or run the work in processes or Ractors.",
    ),
};

pub const JVM_SAFEPOINT: RuntimeLock = RuntimeLock {
    name: "the JVM's safepoint",
    remedy: "Threads are stopped at safepoints for the VM's operations (garbage collection, \
        deoptimisation, biased-lock revocation, thread dumps), and a thread that asks for one \
        (an allocation that found the heap full asks for a collection) waits in \
        VMThread::execute until it has run: make them rarer and shorter \
        (-Xlog:safepoint shows which operation and how long; a larger young generation or a \
        concurrent collector for GC pauses).",
    churn_remedy: None,
};

pub const MALLOC_ARENA: RuntimeLock = RuntimeLock {
    name: "glibc malloc's arena lock",
    remedy: "Threads allocate or free from one glibc malloc arena at once (memory freed by \
        another thread than the one that allocated it goes back to the owner's arena, under its \
        lock). Let each thread free what it allocates, allocate less in the hot path (reuse \
        buffers, pools), raise the arenas (MALLOC_ARENA_MAX) or use a thread-caching \
        allocator (jemalloc, tcmalloc).",
    churn_remedy: None,
};

pub const JVM_HEAP_LOCK: RuntimeLock = RuntimeLock {
    name: "the JVM's heap lock",
    remedy: "Threads that fill their allocation buffer (TLAB) take the JVM's Heap_lock to get \
        another, and a thread that asks for a garbage collection holds it until the collection \
        ends: these waits are allocation and GC pauses, not the program's lock. Allocate less in \
        the hot path (reuse buffers, avoid boxing and regrowing collections: size a HashMap or \
        StringBuilder up front), give the young generation more room (-Xmn) or the collector a \
        longer pause goal; -Xlog:gc shows the collections.",
    churn_remedy: None,
};

/// Frames of HotSpot's own lock primitives (its `Mutex` and `Monitor`
/// classes in libjvm, outside any namespace), innermost first.
const HOTSPOT_LOCK_FRAMES: &[&str] = &["Mutex::lock", "Monitor::lock"];

/// The collectors' allocation slow paths, which take `Heap_lock` (G1,
/// Parallel, Serial; JDK 11 to 21).
const HEAP_LOCK_TAKERS: &[&str] = &[
    "G1CollectedHeap::attempt_allocation_slow",
    "G1CollectedHeap::attempt_allocation_humongous",
    "G1CollectedHeap::mem_allocate",
    "ParallelScavengeHeap::mem_allocate",
    "GenCollectedHeap::mem_allocate_work",
    "SerialHeap::mem_allocate_work",
];

/// Named frames of the Ruby VM through which its threads take the GVL: the
/// timer interrupt's yield, the end of a blocking region, a thread's start
/// (reached through unnamed static functions only).
const RUBY_GVL_CALLERS: &[&str] = &[
    "rb_threadptr_execute_interrupts",
    "rb_thread_call_without_gvl",
    "rb_thread_call_without_gvl2",
    "rb_thread_io_blocking_region",
    "rb_nogvl",
    "rb_thread_schedule",
    "rb_thread_call_with_gvl",
];

/// Named frames of CPython through which its threads take or drop the GIL
/// (take_gil and drop_gil are static).
const CPYTHON_GIL_CALLERS: &[&str] = &[
    "PyEval_RestoreThread",
    "PyEval_AcquireThread",
    "PyEval_AcquireLock",
    "PyGILState_Ensure",
    "PyEval_SaveThread",
    "_PyEval_EvalFrameDefault",
];

const SAFEPOINT_FRAMES: &[&str] = &["SafepointSynchronize::block", "SafepointMechanism::process"];

const MALLOC_FRAMES: &[&str] = &[
    "arena_get2",
    "_int_free",
    "_int_malloc",
    "__libc_malloc",
    "__libc_free",
    "__libc_calloc",
    "__libc_realloc",
    "tcache_init",
    "arena_thread_freeres",
];

/// Whether a function is the JVM's safepoint wait: a thread stopped for a VM
/// operation (its caller, `SafepointMechanism::process`, is only the poll).
pub fn is_safepoint(function: &str) -> bool {
    function.starts_with(SAFEPOINT_FRAMES[0])
}

/// HotSpot's hand-over of a VM operation to its VM thread, after which the
/// caller waits until the operation has run (most at a safepoint): the
/// collection an allocation asked for when the heap was full, a handshake,
/// a thread dump.
const VM_OPERATION_FRAME: &str = "VMThread::execute";

/// Whether frame `i` of a wait's stack (innermost first) is libjvm's: named
/// so, or with compiled Java methods on the stack.
fn in_libjvm(frames: &[String], i: usize) -> bool {
    frames[i].contains("libjvm") || frames.iter().any(|f| crate::frame::is_jit(f))
}

/// The index of `VMThread::execute` on a wait's stack (innermost first): the
/// thread waits for a VM operation it asked for, whatever method asked
/// (RocketMQ's allocations waiting for the collection they asked for read
/// as "waiting for work" at a dozen of its methods, CommitLog's up to 126
/// ms a run). A program's own VMThread class is told apart as HotSpot's
/// locks are.
pub fn vm_operation_wait(frames: &[String]) -> Option<usize> {
    frames
        .iter()
        .position(|f| function(f).starts_with(VM_OPERATION_FRAME))
        .filter(|&i| in_libjvm(frames, i))
}

/// The index of the VM function on a wait's stack (innermost first) that
/// takes one of HotSpot's own locks (`G1CollectedHeap::attempt_allocation_slow`
/// past `Mutex::lock_contended` and `Mutex::lock`): a Java thread queued
/// there waits for the VM, whatever method it was in. HotSpot's frames are
/// told from a program's own `Mutex::lock` by libjvm's name on them or by
/// the Java frames on the stack.
pub fn hotspot_lock_taker(frames: &[String]) -> Option<usize> {
    let is_lock = |f: &str| {
        let n = function(f);
        HOTSPOT_LOCK_FRAMES.iter().any(|p| {
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
fn nearest_named_in(frames: &[String], lib: &str) -> Option<String> {
    let start = frames
        .iter()
        .position(|f| unnamed(f) && function(f).starts_with(lib))?;
    frames[start..]
        .iter()
        .find(|f| !unnamed(f))
        .map(|f| function(f).to_string())
}

/// The runtime lock a wait with `frames` (innermost first) on a lock named
/// `symbol` (the variable it lives in, if known) is, if any.
pub fn identify(frames: &[String], symbol: Option<&str>) -> Option<&'static RuntimeLock> {
    let names: Vec<&str> = frames.iter().map(|f| function(f)).collect();
    if names
        .iter()
        .any(|n| SAFEPOINT_FRAMES.iter().any(|s| n.contains(s)))
        || vm_operation_wait(frames).is_some()
    {
        return Some(&JVM_SAFEPOINT);
    }
    if let Some(i) = hotspot_lock_taker(frames)
        && HEAP_LOCK_TAKERS.iter().any(|t| names[i].starts_with(t))
    {
        return Some(&JVM_HEAP_LOCK);
    }
    if names.iter().any(|n| n.contains("__lll_lock_wait_private"))
        && names.iter().any(|n| {
            MALLOC_FRAMES
                .iter()
                .any(|m| n.trim_start_matches('_') == m.trim_start_matches('_'))
        })
    {
        return Some(&MALLOC_ARENA);
    }
    // CPython: the GIL's condvars and mutexes live in _PyRuntime (3.11,
    // 3.12: its ceval.gil); the waits reach them from the eval loop.
    if symbol.is_some_and(|s| s.starts_with("_PyRuntime")) {
        return Some(&CPYTHON_GIL);
    }
    for lib in ["python3", "libpython3"] {
        if let Some(n) = nearest_named_in(frames, lib)
            && CPYTHON_GIL_CALLERS.contains(&n.as_str())
            && names
                .iter()
                .any(|f| f.contains("pthread_cond") || f.contains("lll_lock"))
        {
            return Some(&CPYTHON_GIL);
        }
    }
    if let Some(n) = nearest_named_in(frames, "libruby")
        && (RUBY_GVL_CALLERS.contains(&n.as_str()) || n == "start_thread")
        && names
            .iter()
            .any(|f| f.starts_with("rb_native_") || f.contains("pthread_cond"))
    {
        return Some(&RUBY_GVL);
    }
    None
}

/// An interpreter's global lock (CPython's GIL, Ruby's GVL): a thread
/// waits for it only to run the language's code.
pub fn only_for_work(lock: &RuntimeLock) -> bool {
    [CPYTHON_GIL.name, RUBY_GVL.name].contains(&lock.name)
}

/// A lock a thread takes only inside an allocation (the JVM's heap lock, in
/// a collector's slow path; a glibc malloc arena's, in malloc and free): its
/// waiters are in the middle of their work whatever they do between.
pub fn only_in_allocation(lock: &RuntimeLock) -> bool {
    [JVM_HEAP_LOCK.name, MALLOC_ARENA.name].contains(&lock.name)
}

/// The runtime lock the same name (`CPython's GIL`) stands for.
pub fn by_name(name: &str) -> Option<&'static RuntimeLock> {
    [
        &CPYTHON_GIL,
        &RUBY_GVL,
        &JVM_SAFEPOINT,
        &JVM_HEAP_LOCK,
        &MALLOC_ARENA,
    ]
    .into_iter()
    .find(|l| l.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_interpreters_global_lock_is_waited_for_only_to_run() {
        assert!(only_for_work(&CPYTHON_GIL) && only_for_work(&RUBY_GVL));
        assert!(!only_for_work(&JVM_SAFEPOINT) && !only_for_work(&MALLOC_ARENA));
        assert!(only_in_allocation(&JVM_HEAP_LOCK) && only_in_allocation(&MALLOC_ARENA));
        assert!(!only_in_allocation(&JVM_SAFEPOINT) && !only_in_allocation(&RUBY_GVL));
    }

    fn v(f: &[&str]) -> Vec<String> {
        f.iter().map(|s| s.to_string()).collect()
    }

    /// A RocketMQ send thread's allocation waiting on G1's heap lock (suite
    /// run 8, issue 19).
    fn g1(taker: &str) -> Vec<String> {
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
    fn gc_request(libjvm: &str, method: &str) -> Vec<String> {
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
