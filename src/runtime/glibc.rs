//! glibc and its POSIX threads, with the C toolchain's spin intrinsics:
//! the primitives under every native program's waits (and under the VMs',
//! which build theirs from them), the malloc arena lock, and the calls
//! glibc is known to turn into a syscall on every use.

use super::{EMPTY, KnownPattern, LockKind, LockRole, Matching, Runtime, RuntimeLock, Sign, Waits};

pub const RUNTIME: Runtime = Runtime {
    name: "glibc",
    matching: Matching::Part,
    machinery_libraries: &[
        "libc.so",
        "libpthread.so",
        "ld-linux",
        "libm.so",
        "librt.so",
        "libdl.so",
    ],
    waits: Waits {
        acquire: &[
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
        ],
        // pthread_cond_wait re-takes the condition variable's mutex
        // (nptl/pthread_cond_wait.c): a sleep there is a mutex wait.
        reacquire: &["pthread_mutex_cond_lock"],
        condition: &[
            "pthread_cond_wait",
            "pthread_cond_timedwait",
            "pthread_cond_clockwait",
            "__pthread_cond_wait_common",
            "sem_wait",
            "sem_timedwait",
            "sem_clockwait",
            "__new_sem_wait",
        ],
        join: &["pthread_join", "pthread_clockjoin", "pthread_timedjoin"],
        ..Waits::NONE
    },
    // Its wrappers of futex, its locks' and semaphores', syscall(),
    // clock_gettime (__GI_ for its internal aliases).
    call_wrappers: &[
        "futex",
        "lll_",
        "pthread_",
        "GI_",
        "sem",
        "syscall",
        "libc_",
        "clock",
        "sched_yield",
    ],
    thread_entries: &[
        "clone",
        "clone3",
        "start_thread",
        "__libc_start_call_main",
        "__libc_start_main_impl",
        "__libc_start_main",
        "_start",
    ],
    // Linux's and Intel's names for the PAUSE a spin loop issues.
    pause_helpers: &["cpu_relax", "_mm_pause"],
    lock_kinds: &[
        (
            LockKind::Condvar,
            &[
                "pthread_cond_wait",
                "pthread_cond_timedwait",
                "pthread_cond_clockwait",
                "__pthread_cond_wait_common",
                "pthread_cond_signal",
                "pthread_cond_broadcast",
            ],
        ),
        (
            LockKind::Rwlock,
            &[
                "pthread_rwlock_rdlock",
                "pthread_rwlock_wrlock",
                "pthread_rwlock_timedrdlock",
                "pthread_rwlock_timedwrlock",
                "pthread_rwlock_clockrdlock",
                "pthread_rwlock_clockwrlock",
                "pthread_rwlock_unlock",
            ],
        ),
        (
            LockKind::Semaphore,
            &[
                "sem_wait",
                "sem_timedwait",
                "sem_clockwait",
                "__new_sem_wait",
                "sem_post",
                "__new_sem_post",
            ],
        ),
        (
            LockKind::ThreadJoin,
            &[
                "pthread_join",
                "pthread_clockjoin",
                "pthread_timedjoin",
                "pthread_tryjoin",
            ],
        ),
        (
            LockKind::Mutex,
            &[
                "__lll_lock_wait",
                "__lll_lock_wake",
                "pthread_mutex_lock",
                "pthread_mutex_timedlock",
                "pthread_mutex_clocklock",
                "pthread_mutex_unlock",
                "pthread_mutex_cond_lock",
                "lll_mutex_lock",
            ],
        ),
    ],
    locks: &[&MALLOC_ARENA],
    patterns: PATTERNS,
    ..EMPTY
};

pub const MALLOC_ARENA: RuntimeLock = RuntimeLock {
    name: "glibc malloc's arena lock",
    role: LockRole::Allocation,
    remedy: "Threads allocate or free from one glibc malloc arena at once (memory freed by \
        another thread than the one that allocated it goes back to the owner's arena, under its \
        lock). Let each thread free what it allocates, allocate less in the hot path (reuse \
        buffers, pools), raise the arenas (MALLOC_ARENA_MAX) or use a thread-caching \
        allocator (jemalloc, tcmalloc).",
    churn_remedy: None,
    // An arena's lock is a private low-level lock (malloc/arena.c), taken
    // in malloc's and free's internals.
    signs: &[Sign::All(&[
        Sign::Frame(&["__lll_lock_wait_private"]),
        Sign::FrameNamed(&[
            "arena_get2",
            "_int_free",
            "_int_malloc",
            "__libc_malloc",
            "__libc_free",
            "__libc_calloc",
            "__libc_realloc",
            "tcache_init",
            "arena_thread_freeres",
        ]),
    ])],
};

const PATTERNS: &[KnownPattern] = &[
    KnownPattern {
        // glibc resolv/nss (2.36: nss/nss_files, inet/check_pf.c): every
        // getaddrinfo checks /etc/resolv.conf and nsswitch.conf for changes
        // (a stat each), opens and reads /etc/hosts through stdio, and,
        // with AI_ADDRCONFIG (Node's dns.lookup's default hints), asks the
        // kernel for the host's addresses over a fresh netlink socket
        // (__check_pf: socket, bind, getsockname, sendto, recvmsg, close).
        // Only the local bookkeeping is listed: a query to a DNS server
        // (connect, sendmmsg, poll, recvfrom) is I/O.
        name: "glibc's getaddrinfo resolves the name again on every call",
        syscalls: &[
            "socket",
            "bind",
            "getsockname",
            "sendto",
            "recvmsg",
            "close",
            "openat",
            "read",
            "newfstatat",
            "fstat",
            "lseek",
        ],
        frames: &["getaddrinfo", "gaih_inet", "__check_pf"],
        max_bytes_per_call: None,
        fix: "getaddrinfo checks /etc/resolv.conf and /etc/nsswitch.conf for changes, opens \
              and reads /etc/hosts, and (with AI_ADDRCONFIG) asks the kernel for the host's own \
              addresses over a netlink socket, on every call: about a dozen system calls per \
              name resolved, paid again for each request or connection that resolves its host \
              (in Node.js on libuv's thread pool, 4 threads by default, where every lookup also \
              queues). Resolve the name once and reuse the address (connect by address, or \
              cache the lookups: a caching `lookup` function, nscd or systemd-resolved), or \
              reuse connections (keep-alive: http.Agent({ keepAlive: true })).",
    },
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
        max_bytes_per_call: None,
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
        max_bytes_per_call: None,
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
        max_bytes_per_call: None,
        fix: "glibc malloc returns freed memory to the kernel and asks for it again (the heap's \
              top trimmed, large blocks unmapped), so each allocation of a large buffer costs \
              syscalls and page faults. Keep and reuse the buffers, or raise the thresholds \
              (mallopt M_TRIM_THRESHOLD and M_MMAP_THRESHOLD, or the environment's \
              MALLOC_TRIM_THRESHOLD_ and MALLOC_MMAP_THRESHOLD_).",
    },
];
