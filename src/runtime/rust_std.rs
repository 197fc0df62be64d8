//! Rust's standard library: its futex-based Mutex, RwLock and Condvar
//! (library/std/src/sys/sync), its threads' start, and its spin hint.

use super::{EMPTY, LockKind, Matching, Runtime, Waits};

pub const RUNTIME: Runtime = Runtime {
    name: "Rust's std",
    matching: Matching::Part,
    waits: Waits {
        acquire: &[
            "::Mutex::lock_contended",
            "::RwLock::read_contended",
            "::RwLock::write_contended",
        ],
        condition: &["::Condvar::wait"],
        ..Waits::NONE
    },
    thread_entry_parts: &["std::thread"],
    pause_helpers: &["spin_loop"],
    // Its locks use futexes directly.
    lock_kinds: &[
        (LockKind::Condvar, &["::Condvar::wait", "::Condvar::notify"]),
        (
            LockKind::Rwlock,
            &[
                "::RwLock::read_contended",
                "::RwLock::write_contended",
                "::RwLock::wake_writer_or_readers",
            ],
        ),
        (
            LockKind::Mutex,
            &["::Mutex::lock_contended", "::Mutex::wake"],
        ),
    ],
    ..EMPTY
};
