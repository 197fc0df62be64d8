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

use super::{EMPTY, Matching, Runtime, Waits};

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
        // The wait and wake primitives under its parking.
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
        ],
        ..Waits::NONE
    },
    ..EMPTY
};
