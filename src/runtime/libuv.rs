//! libuv: the event loop and thread pool under Node.js (linked into `node`,
//! or Debian's `libuv.so.1`), and under other C programs (BIND 9, Neovim).
//! Its wait primitives wrap pthreads' (src/unix/thread.c: `uv_mutex_lock`,
//! `uv_cond_wait`, ...), and one thread runs its loop (src/unix/core.c:
//! `uv_run`, polling in `uv__io_poll`) and every callback of the program on
//! it, one at a time, handing file, DNS and crypto work to its pool
//! (src/threadpool.c: `UV_THREADPOOL_SIZE` threads, 4 by default).
//!
//! Why: a thread that paces the others (`wait.bottleneck`) is, in a Node
//! program, nearly always its event loop, and the remedy is the runtime's
//! (worker threads, more processes), not the generic one of splitting a
//! producer's work (node-lookup: the loop ran 80% of the run, and the pool
//! and V8's helpers waited for it). Its wrappers name a wait by the
//! program's function that called them, not by `uv_cond_wait`.
//!
//! Its known kernel-cost pattern: every task handed to the pool (each call
//! of Node's callback and promise `fs` API, `dns.lookup`, `crypto`'s
//! asynchronous calls, `zlib`) crosses to a worker and back: the pool's
//! mutex and condition variable (futex wake and wait), the loop's eventfd
//! (`uv_async_send` writes it, `uv__async_io` reads it) and an epoll
//! wake-up, with two context switches. For a small task that costs more
//! than the task: 200,000 `fs.stat` calls took 0.83-0.92 s and 1.5-1.6 s
//! of CPU through the pool, 0.44 s and 0.52 s as `fs.statSync`, without
//! kerntax (tests/fixtures/node/stat.js); kerntax named nothing (74% of
//! the CPU in the kernel, 1.5 futex calls a stat).

use super::{EMPTY, EventLoop, KnownPattern, Matching, Runtime, Waits};

pub const RUNTIME: Runtime = Runtime {
    name: "libuv",
    // Its exported names are whole C names (`uv_cond_wait`).
    matching: Matching::Whole,
    waits: Waits {
        acquire: &["uv_mutex_lock", "uv_rwlock_rdlock", "uv_rwlock_wrlock"],
        condition: &["uv_cond_wait", "uv_cond_timedwait"],
        join: &["uv_thread_join"],
        wrappers: &[
            "uv_mutex_lock",
            "uv_rwlock_rdlock",
            "uv_rwlock_wrlock",
            "uv_cond_wait",
            "uv_cond_timedwait",
            "uv_sem_wait",
            "uv_barrier_wait",
            "uv_thread_join",
            "uv_cond_signal",
            "uv_cond_broadcast",
            "uv_mutex_unlock",
            "uv_sem_post",
        ],
        ..Waits::NONE
    },
    event_loop: Some(&EVENT_LOOP),
    patterns: &[KnownPattern {
        name: "libuv hands each small task to its thread pool and back",
        // The pool's mutex and condition variable; the loop's eventfd.
        syscalls: &["futex", "write", "read"],
        // Its hand-off: the sync primitives it wraps pthreads' with (a
        // stripped libuv.so.1 exports them), the pool's queue and the
        // loop's wake-up. Not the task's own calls (`uv__fs_work`).
        frames: &[
            "uv__work_submit",
            "uv__work_done",
            "uv_async_send",
            "uv__async_io",
            "uv_cond_wait",
            "uv_cond_signal",
            "uv_mutex_lock",
            "uv_mutex_unlock",
        ],
        max_bytes_per_call: None,
        fix: "libuv runs each task it is handed (each call of Node's callback and promise fs \
              API, dns.lookup, crypto's and zlib's asynchronous calls) on its thread pool and \
              wakes the event loop with the result: a futex wake and wait, an eventfd write and \
              read, an epoll wake-up and two context switches per task, more than a small task \
              (a stat, an access check, a short read) costs itself. Hand it fewer, larger tasks: \
              cache what each request looks up again (the same paths' fs.stat, dns.lookup's \
              answers), read a file or a directory whole (fs.readFile; fs.readdir with \
              withFileTypes rather than a stat per entry), and where the loop may block (start-up, \
              a command-line tool) the synchronous calls (fs.statSync) make one system call and \
              no hand-off.",
    }],
    ..EMPTY
};

/// libuv's loop: `uv_run` and the phases it runs (exported or not: a
/// stripped `libuv.so.1` names `uv_run` only, `node` carries them all).
pub const EVENT_LOOP: EventLoop = EventLoop {
    name: "libuv's event loop",
    frames: &[
        "uv_run",
        "uv__io_poll",
        "uv__run_timers",
        "uv__run_pending",
        "uv__run_check",
        "uv__run_idle",
        "uv__run_prepare",
        "uv__run_closing_handles",
    ],
    remedy: "It runs libuv's event loop: every callback of the program runs on this one \
        thread, one at a time, and the thread pool (UV_THREADPOOL_SIZE threads, 4 by default) and \
        the runtime's helper threads wait for the work it hands them. Take work off the loop \
        rather than adding threads that wait for it: in Node.js move CPU-heavy JavaScript to \
        worker_threads, run one process per CPU (node:cluster, or several instances behind a \
        balancer), and do per-request work once (reuse connections and resolved addresses, cache \
        what each request recomputes); in a C program run a loop per thread.",
};
