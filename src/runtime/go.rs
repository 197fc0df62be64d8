//! The Go runtime: the functions its scheduler parks and wakes its own OS
//! threads with, what that parking means, and its own mutex. Its functions
//! are named on stripped binaries from `.gopclntab` (`stacks/gopclntab/`).
//!
//! Why: Go runs goroutines on a few OS threads (Ms) of its own and parks
//! an M it has nothing to run on in `runtime.stopm` -> `notesleep` ->
//! `futexsleep`, each M on a futex word of its own (its `m.park` note);
//! another M that finds work wakes one in `startm`/`wakep` ->
//! `notewakeup`. Those are dozens of words, none anything's lock, and the
//! wake-ups hand out goroutines, not a lock held: read as a program's wait
//! they looked like one lock serialising every thread (Debian's caddy and
//! etcd, issue 37).
//!
//! Its garbage collector stops the world (proc.go: `stopTheWorldWithSema`,
//! and `forEachP` for a safe point on every processor) and waits for the
//! running goroutines to stop in a timed note sleep, preempting them again
//! every 100 µs: its waits end by their timeout, which read as a wait for
//! the kernel (caddy), when the thread waits for the runtime's own pause.
//!
//! Its known kernel-cost pattern: Go's `os.File` has no buffer of its own
//! (os/file.go, internal/poll/fd_unix.go: `Write` is one `write(2)`), so a
//! `log.Logger` or `fmt.Fprint` on a file or `os.Stdout` makes one system
//! call per line, where C's stdio gathers lines into a buffer before
//! writing; `bufio.Writer` is the standard library's buffer
//! (tests/fixtures/go/logger.go).

use super::{EMPTY, KnownPattern, LockRole, Matching, Runtime, RuntimeLock, Sign, Waits};

/// A write of a line is under this many bytes on average: a quarter of
/// `bufio.Writer`'s default 4 KiB buffer. A program that copies a file in
/// 32 KiB blocks through `os.File` writes in bulk, not line by line.
pub const MAX_LINE_WRITE_BYTES: u64 = 1024;

pub const RUNTIME: Runtime = Runtime {
    name: "the Go runtime",
    // Fully qualified names, which other runtime functions extend.
    matching: Matching::Whole,
    waits: Waits {
        // Where the scheduler parks an M with nothing to run.
        idle: &[
            "runtime.stopm",
            "runtime.stoplockedm",
            "runtime.findRunnable",
            "runtime.findrunnable",
            "runtime.schedule",
            "runtime.templateThread",
        ],
        idle_evidence: "the Go scheduler parks a thread it has nothing to run on \
            here (runtime.stopm), each on a word of its own, woken when another finds goroutines \
            to run: the runtime's idle threads, nothing held",
        // The runtime's own mutex (`runtime.mutex`: the scheduler's, the
        // heap's, a channel's), which an M sleeps on in the kernel when it
        // spins out: a lock, whoever wakes the sleeper released it.
        acquire: &["runtime.lock2", "runtime.lockWithRank"],
        // Its notes' sleeps, under everything else it parks for.
        condition: &[
            "runtime.notesleep",
            "runtime.notetsleep",
            "runtime.notetsleep_internal",
            "runtime.notetsleepg",
        ],
        // The wait and wake primitives under its parking; the system
        // calls its own code makes (its network poller's epoll_wait, the
        // sleeps of its monitor thread and of a processor stealing work);
        // and the system-call stubs under the syscall package, which moved
        // from runtime/internal/syscall (Go 1.21) to internal/runtime/
        // syscall (1.23). A wait there is named by the function that
        // called it: runtime.netpoll for the network poller, the syscall
        // package's call for the program's. Not runtime.osyield: its
        // mutex's spinning yields are a site of their own, apart from the
        // same mutex's sleeps (runtime.lock2).
        wrappers: &[
            "runtime.futex",
            "runtime.futexsleep",
            "runtime.notesleep",
            "runtime.notetsleep",
            "runtime.notetsleep_internal",
            "runtime.notetsleepg",
            "runtime.mPark",
            "runtime.futexwakeup",
            "runtime.notewakeup",
            "runtime.epollwait",
            "runtime.usleep",
            "runtime/internal/syscall.Syscall6",
            "internal/runtime/syscall.Syscall6",
            "internal/runtime/syscall/linux.Syscall6",
            "syscall.Syscall",
            "syscall.Syscall6",
            "syscall.RawSyscall",
            "syscall.RawSyscall6",
            "syscall.rawSyscallNoError",
            "syscall.rawVforkSyscall",
        ],
        ..Waits::NONE
    },
    // The system-call stubs (the syscall package's are glibc's `syscall`
    // prefix already) and the poller's retry loop: a call is named by the
    // package that made it (os.(*File).Write, net.(*netFD).Read).
    call_wrappers: &[
        "runtime/internal/syscall.",
        "internal/runtime/syscall",
        "internal/poll.",
        "runtime.futex",
        "runtime.epollwait",
        "runtime.osyield",
        "runtime.usleep",
    ],
    locks: &[&STOP_THE_WORLD],
    patterns: &[KnownPattern {
        name: "Go writes every line to its file with a system call of its own",
        syscalls: &["write", "pwrite64"],
        frames: &["os.(*File).Write", "os.(*File).WriteString"],
        max_bytes_per_call: Some(MAX_LINE_WRITE_BYTES),
        fix: "Go's os.File has no buffer: each Write, so each log line or fmt.Fprint to a file \
              or os.Stdout, is a write system call of its own. Put a bufio.Writer between the \
              program and the file (bufio.NewWriterSize(f, 64<<10), flushed on exit or on a \
              timer, behind a mutex if goroutines share it) or give the logger a buffered sink \
              (log.New(w, ...) on it, zap's BufferedWriteSyncer): one write of many lines costs \
              about what one line's did.",
    }],
    ..EMPTY
};

/// The Go runtime stopping every goroutine for its garbage collector.
pub const STOP_THE_WORLD: RuntimeLock = RuntimeLock {
    name: "the Go runtime's stop-the-world",
    role: LockRole::VmOperation,
    remedy: "The Go runtime stops every goroutine for its garbage collector's phase changes \
        (runtime.stopTheWorldWithSema) and for safe points on every processor \
        (runtime.forEachP), and its thread waits here until the running goroutines stop, \
        preempting them again every 100 us: make collections rarer (allocate less in the hot \
        path, reuse buffers through sync.Pool, raise GOGC or set GOMEMLIMIT) and let goroutines \
        reach a preemption point sooner; GODEBUG=gctrace=1 shows the collections and their \
        pauses.",
    churn_remedy: None,
    signs: &[Sign::FrameNamed(&[
        "runtime.stopTheWorldWithSema",
        "runtime.forEachP",
        "runtime.forEachPInternal",
    ])],
};
