//! Known kernel-cost patterns of the standard libraries and runtimes, each
//! with its specific fix: a storm of one syscall whose call site runs
//! through the library function that is known to issue it on every call.
//! Matched on the syscall and the culprit's stack, never on a program's
//! own names. The table stays small and every entry says where the
//! behaviour is documented.

use crate::frame::function;

pub struct KnownPattern {
    /// What it is, in a few words.
    pub name: &'static str,
    /// The syscalls it issues.
    pub syscalls: &'static [&'static str],
    /// Functions of the library on the call site, any of which identifies it.
    pub frames: &'static [&'static str],
    /// The fix.
    pub fix: &'static str,
}

pub const PATTERNS: &[KnownPattern] = &[
    KnownPattern {
        // glibc time/tzset.c: tzset_internal re-reads TZ and, with TZ
        // unset, stats /etc/localtime on every localtime/mktime/strftime.
        name: "glibc re-reads the time zone on every call with TZ unset",
        syscalls: &["newfstatat", "stat", "statx", "fstatat64", "openat"],
        frames: &[
            "__tzfile_read",
            "tzset_internal",
            "__tz_convert",
            "__tz_compute",
        ],
        fix: "glibc checks the time zone file again on every localtime, strftime or mktime \
              when TZ is not set in the environment (one stat of /etc/localtime per call). Set \
              TZ in the program's environment (TZ=:/etc/localtime, or the zone's name such as \
              TZ=Europe/Paris): the zone is then read once.",
    },
    KnownPattern {
        // glibc's getcontext/setcontext/swapcontext save and restore the
        // signal mask with rt_sigprocmask (sysdeps/unix/sysv/linux/x86_64).
        name: "ucontext switches save and restore the signal mask",
        syscalls: &["rt_sigprocmask"],
        frames: &["getcontext", "setcontext", "swapcontext"],
        fix: "getcontext, setcontext and swapcontext save or restore the signal mask with \
              rt_sigprocmask on every switch between user-level threads. Switch without it: \
              _setjmp/_longjmp (which, unlike setjmp/longjmp, do not save the mask), or a \
              hand-written context switch that saves only the callee-saved registers (as \
              boost.context does); set the mask once, outside the scheduler loop.",
    },
    KnownPattern {
        // glibc malloc: free() trims the heap top (systrim) and unmaps large
        // chunks (munmap_chunk) past M_TRIM_THRESHOLD / M_MMAP_THRESHOLD.
        name: "glibc malloc gives memory back and takes it again",
        syscalls: &["brk", "munmap", "mmap", "madvise", "mprotect"],
        frames: &[
            "systrim",
            "munmap_chunk",
            "sysmalloc",
            "mtrim",
            "heap_trim",
            "shrink_heap",
        ],
        fix: "glibc malloc returns freed memory to the kernel and asks for it again (the heap's \
              top trimmed, large blocks unmapped), so each allocation of a large buffer costs \
              syscalls and page faults. Keep and reuse the buffers, or raise the thresholds \
              (mallopt M_TRIM_THRESHOLD and M_MMAP_THRESHOLD, or the environment's \
              MALLOC_TRIM_THRESHOLD_ and MALLOC_MMAP_THRESHOLD_).",
    },
    KnownPattern {
        // HotSpot: Runtime.availableProcessors() asks the OS (and, in a
        // container, the cgroup files) each time (os::active_processor_count).
        name: "the JVM recounts its CPUs on every Runtime.availableProcessors()",
        syscalls: &["sched_getaffinity", "openat", "read", "newfstatat"],
        frames: &["os::active_processor_count", "JVM_ActiveProcessorCount"],
        fix: "Runtime.availableProcessors() asks the kernel (and, in a container, the cgroup \
              files) on every call. Call it once and keep the answer (a static final), or \
              size pools with -XX:ActiveProcessorCount.",
    },
    KnownPattern {
        // HotSpot's JVM_Yield: Thread.yield() is a sched_yield.
        name: "Thread.yield() in a loop",
        syscalls: &["sched_yield"],
        frames: &["JVM_Yield", "os::naked_yield"],
        fix: "Thread.yield() asks the scheduler to run someone else and comes straight back \
              when there is nobody: a busy-wait. Wait on the condition instead \
              (LockSupport.park/unpark, a BlockingQueue, a CountDownLatch), or spin briefly \
              with Thread.onSpinWait() and then park.",
    },
    KnownPattern {
        // SQLite (https://sqlite.org/lang_transaction.html, "Atomic Commit
        // In SQLite"): with no BEGIN every statement is its own
        // transaction, and a commit in the default rollback-journal mode
        // syncs the journal and the database file (synchronous=FULL).
        name: "SQLite commits every statement as its own transaction",
        syscalls: &[
            "fdatasync",
            "fsync",
            "openat",
            "unlink",
            "write",
            "pwrite64",
        ],
        frames: &[
            "sqlite3PagerCommitPhaseOne",
            "sqlite3PagerSync",
            "sqlite3BtreeCommitPhaseOne",
            "sqlite3VdbeHalt",
        ],
        fix: "SQLite makes each transaction durable with its own flushes, and without BEGIN               every statement is a transaction. Run many statements in one transaction               (BEGIN ... COMMIT); for many small transactions, PRAGMA journal_mode=WAL with               PRAGMA synchronous=NORMAL flushes once per checkpoint instead of twice per commit.",
    },
];

/// The known pattern a syscall from a call site with `frames` (innermost
/// first) is, if any.
pub fn known(syscall: &str, frames: &[String]) -> Option<&'static KnownPattern> {
    PATTERNS.iter().find(|p| {
        p.syscalls.contains(&syscall)
            && frames.iter().any(|f| {
                let name = function(f).trim_start_matches('_');
                p.frames
                    .iter()
                    .any(|k| name == k.trim_start_matches('_') || name.contains(k))
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(f: &[&str]) -> Vec<String> {
        f.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_storm_is_matched_on_its_syscall_and_the_librarys_frames() {
        let tz = v(&[
            "__GI___fstatat64 (fstatat64.c:166)",
            "__tzfile_read (tzfile.c:154)",
            "tzset_internal (tzset.c:405)",
            "__tz_convert (tzset.c:577)",
            "do_strftime (builtin.c:2100)",
        ]);
        assert_eq!(
            known("newfstatat", &tz).map(|p| p.name),
            Some("glibc re-reads the time zone on every call with TZ unset")
        );
        // The same stack for another syscall, or a program's own stat: none.
        assert!(known("read", &tz).is_none());
        assert!(
            known(
                "newfstatat",
                &v(&["__GI___fstatat64 (x)", "scan_dir (a.c:3)"])
            )
            .is_none()
        );
        let ctx = v(&[
            "__GI___sigprocmask (sigprocmask.c:26)",
            "swapcontext (swapcontext.S:80)",
        ]);
        assert!(
            known("rt_sigprocmask", &ctx)
                .unwrap()
                .fix
                .contains("_setjmp")
        );
        let cpus = v(&[
            "sched_getaffinity (x)",
            "os::active_processor_count() (libjvm.so)",
        ]);
        assert!(known("sched_getaffinity", &cpus).is_some());
    }
}
