//! CRuby (3.1): its VM's library, its source files, its mutex and native
//! condition variables, and its GVL. Its frames are read by `interp/ruby`.

use super::{EMPTY, LockRole, Matching, Runtime, RuntimeLock, Sign, Waits};

pub const RUNTIME: Runtime = Runtime {
    name: "CRuby",
    matching: Matching::Part,
    interpreter_modules: &["libruby", "ruby"],
    source_markers: &[".rb:"],
    waits: Waits {
        acquire: &["rb_mutex_lock"],
        condition: &["rb_native_cond_wait", "rb_native_cond_timedwait"],
        ..Waits::NONE
    },
    locks: &[&GVL],
    ..EMPTY
};

pub const GVL: RuntimeLock = RuntimeLock {
    name: "Ruby's GVL",
    role: LockRole::Interpreter,
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
    // gvl_acquire_common is static in a stripped libruby: the waits are
    // reached through the timer interrupt's yield, the end of a blocking
    // region, or a thread's start, on its native condition variables.
    signs: &[Sign::All(&[
        Sign::ReachedThrough {
            libraries: &["libruby"],
            callers: &[
                "rb_threadptr_execute_interrupts",
                "rb_thread_call_without_gvl",
                "rb_thread_call_without_gvl2",
                "rb_thread_io_blocking_region",
                "rb_nogvl",
                "rb_thread_schedule",
                "rb_thread_call_with_gvl",
                "start_thread",
            ],
        },
        Sign::Frame(&["rb_native_", "pthread_cond"]),
    ])],
};
