//! The JVM (HotSpot) and the JDK: its native libraries, the Java
//! platform's packages, the semantics of java.util.concurrent's locks,
//! conditions, queues and futures and of HotSpot's monitors, its safepoint
//! and heap lock, its spin helpers, and the JDK calls known to cost a
//! syscall each time. Its frames are read by `interp/hotspot` (methods it
//! interprets) and from its perf map (JIT code).

use super::{EMPTY, KnownPattern, LockRole, Matching, Runtime, RuntimeLock, Sign, Waits};

pub const RUNTIME: Runtime = Runtime {
    name: "the JVM",
    matching: Matching::Part,
    vm_libraries: &[
        "libjvm.so",
        "libjli.so",
        "libjava.so",
        "libnio.so",
        "libnet.so",
    ],
    platform_code: &["java.", "javax.", "jdk.", "sun.", "com.sun."],
    waits: Waits {
        acquire: &[
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
        ],
        condition: &[
            "ConditionObject.await",
            "java.lang.Object.wait",
            "JVM_MonitorWait",
            "ObjectMonitor::wait",
            "Monitor::wait",
            "PosixSemaphore::wait",
        ],
        queue_take: &[
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
        ],
        // Futures, latches and barriers, and AQS's shared acquisitions
        // under them (a latch's await and a semaphore's acquire go through
        // `acquireShared*`/`tryAcquireSharedNanos`; a read lock's outer
        // frame, `ReentrantReadWriteLock`, is met first and names a lock).
        result: &[
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
        ],
        join: &["java.lang.Thread.join"],
        ..Waits::NONE
    },
    // HotSpot's and the JDK's.
    pause_helpers: &["SpinPause", "onSpinWait"],
    locks: &[&SAFEPOINT, &HEAP_LOCK],
    patterns: PATTERNS,
    ..EMPTY
};

/// Frames of HotSpot's own lock primitives (its `Mutex` and `Monitor`
/// classes in libjvm, outside any namespace), innermost first.
pub const LOCK_FRAMES: &[&str] = &["Mutex::lock", "Monitor::lock"];

/// HotSpot's hand-over of a VM operation to its VM thread, after which the
/// caller waits until the operation has run (most at a safepoint): the
/// collection an allocation asked for when the heap was full, a handshake,
/// a thread dump.
pub const VM_OPERATION_FRAME: &str = "VMThread::execute";

/// A thread stopped at a safepoint (its caller, `SafepointMechanism::
/// process`, is only the poll).
pub const SAFEPOINT_BLOCK: &str = "SafepointSynchronize::block";

/// The library name HotSpot's frames carry.
pub const VM_LIBRARY: &str = "libjvm";

pub const SAFEPOINT: RuntimeLock = RuntimeLock {
    name: "the JVM's safepoint",
    role: LockRole::VmOperation,
    remedy: "Threads are stopped at safepoints for the VM's operations (garbage collection, \
        deoptimisation, biased-lock revocation, thread dumps), and a thread that asks for one \
        (an allocation that found the heap full asks for a collection) waits in \
        VMThread::execute until it has run: make them rarer and shorter \
        (-Xlog:safepoint shows which operation and how long; a larger young generation or a \
        concurrent collector for GC pauses).",
    churn_remedy: None,
    signs: &[
        Sign::Frame(&[SAFEPOINT_BLOCK, "SafepointMechanism::process"]),
        Sign::VmOperation,
    ],
};

pub const HEAP_LOCK: RuntimeLock = RuntimeLock {
    name: "the JVM's heap lock",
    role: LockRole::Allocation,
    remedy: "Threads that fill their allocation buffer (TLAB) take the JVM's Heap_lock to get \
        another, and a thread that asks for a garbage collection holds it until the collection \
        ends: these waits are allocation and GC pauses, not the program's lock. Allocate less in \
        the hot path (reuse buffers, avoid boxing and regrowing collections: size a HashMap or \
        StringBuilder up front), give the young generation more room (-Xmn) or the collector a \
        longer pause goal; -Xlog:gc shows the collections.",
    churn_remedy: None,
    // The collectors' allocation slow paths, which take `Heap_lock` (G1,
    // Parallel, Serial; JDK 11 to 21).
    signs: &[Sign::VmLockTakenBy(&[
        "G1CollectedHeap::attempt_allocation_slow",
        "G1CollectedHeap::attempt_allocation_humongous",
        "G1CollectedHeap::mem_allocate",
        "ParallelScavengeHeap::mem_allocate",
        "GenCollectedHeap::mem_allocate_work",
        "SerialHeap::mem_allocate_work",
    ])],
};

const PATTERNS: &[KnownPattern] = &[
    KnownPattern {
        // HotSpot: Runtime.availableProcessors() asks the OS (and, in a
        // container, the cgroup files) each time (os::active_processor_count).
        name: "the JVM recounts its CPUs on every Runtime.availableProcessors()",
        syscalls: &["sched_getaffinity", "openat", "read", "newfstatat"],
        frames: &["os::active_processor_count", "JVM_ActiveProcessorCount"],
        max_bytes_per_call: None,
        fix: "Runtime.availableProcessors() asks the kernel (and, in a container, the cgroup \
              files) on every call. Call it once and keep the answer (a static final), or \
              size pools with -XX:ActiveProcessorCount.",
    },
    KnownPattern {
        // HotSpot's JVM_Yield: Thread.yield() is a sched_yield.
        name: "Thread.yield() in a loop",
        syscalls: &["sched_yield"],
        frames: &["JVM_Yield", "os::naked_yield"],
        max_bytes_per_call: None,
        fix: "Thread.yield() asks the scheduler to run someone else and comes straight back \
              when there is nobody: a busy-wait. Wait on the condition instead \
              (LockSupport.park/unpark, a BlockingQueue, a CountDownLatch), or spin briefly \
              with Thread.onSpinWait() and then park.",
    },
];
