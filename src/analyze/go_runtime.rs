//! What kerntax knows of the Go runtime, in one place: the functions its
//! scheduler parks and wakes its own OS threads with, and what that
//! parking means.
//!
//! Why: Go runs goroutines on a few OS threads (Ms) of its own and parks
//! an M it has nothing to run on in `runtime.stopm` -> `notesleep` ->
//! `futexsleep`, each M on a futex word of its own (its `m.park` note);
//! another M that finds work wakes one in `startm`/`wakep` ->
//! `notewakeup`. Those are dozens of words, none anything's lock, and the
//! wake-ups hand out goroutines, not a lock held: read as a program's wait
//! they looked like one lock serialising every thread (Debian's caddy and
//! etcd, issue 37). Read from the runtime's frames (named on stripped
//! binaries from `.gopclntab`, `stacks/gopclntab/`).

/// The runtime's wait and wake primitives under its parking: wrappers on
/// the way to the function that says why (`runtime.stopm`, `startm`), as
/// a program's own `WaitLatch` is.
const PRIMITIVES: &[&str] = &[
    "runtime.futex",
    "runtime.futexsleep",
    "runtime.notesleep",
    "runtime.notetsleep",
    "runtime.notetsleep_internal",
    "runtime.notetsleepg",
    "runtime.mPark",
    "runtime.futexwakeup",
    "runtime.notewakeup",
];

/// Where the scheduler parks an M with nothing to run: its idle threads.
const IDLE: &[&str] = &[
    "runtime.stopm",
    "runtime.stoplockedm",
    "runtime.findRunnable",
    "runtime.findrunnable",
    "runtime.schedule",
    "runtime.templateThread",
];

/// The runtime's own mutex (`runtime.mutex`: the scheduler's, the heap's,
/// a channel's), which an M sleeps on in the kernel when it spins out:
/// a lock, whoever wakes the sleeper released it.
const LOCKS: &[&str] = &["runtime.lock2", "runtime.lockWithRank"];

/// Whether `function` takes the runtime's own mutex.
pub fn is_runtime_lock(function: &str) -> bool {
    LOCKS.contains(&function)
}

/// Whether `function` is one of the runtime's wait or wake primitives
/// under its parking.
pub fn is_primitive(function: &str) -> bool {
    PRIMITIVES.contains(&function)
}

/// Whether `function` parks one of the scheduler's idle threads.
pub fn is_idle_park(function: &str) -> bool {
    IDLE.contains(&function)
}

/// The evidence of a site where the scheduler parks its idle threads.
pub const IDLE_EVIDENCE: &str = "the Go scheduler parks a thread it has nothing to run on \
    here (runtime.stopm), each on a word of its own, woken when another finds goroutines \
    to run: the runtime's idle threads, nothing held";

#[cfg(test)]
mod tests {
    use crate::analyze::waits::prior::{WaitPrior, prior_of};
    use crate::analyze::waits::{WAIT_WORDS, WAKE_WORDS, site_of};

    fn v(f: &[&str]) -> Vec<String> {
        f.iter().map(|s| s.to_string()).collect()
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
        let (site, via) = site_of(&park, 0, WAIT_WORDS);
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
        assert_eq!(site_of(&wake, 0, WAKE_WORDS).0, "runtime.startm");
        // The runtime's own mutex is a lock, not its idle parking.
        let lock = v(&[
            "runtime.futex (caddy)",
            "runtime.futexsleep (caddy)",
            "runtime.lock2 (caddy)",
            "runtime.sysmon (caddy)",
        ]);
        let (site, _) = site_of(&lock, 0, WAIT_WORDS);
        assert_eq!(site, "runtime.lock2");
        assert_eq!(prior_of("futex", &lock, &site), WaitPrior::LockAcquire);
    }
}
