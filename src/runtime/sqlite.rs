//! SQLite: the library's commit path, known to flush on every statement
//! run outside a transaction.

use super::{EMPTY, KnownPattern, Matching, Runtime};

pub const RUNTIME: Runtime = Runtime {
    name: "SQLite",
    matching: Matching::Part,
    patterns: &[KnownPattern {
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
            // A transaction's begin: the database file's locks taken
            // (fcntl) and its change counter read, on every statement
            // run outside BEGIN, once for all of them inside one.
            "sqlite3BtreeBeginTrans",
            "sqlite3PagerCommitPhaseOne",
            "sqlite3PagerSync",
            "sqlite3BtreeCommitPhaseOne",
            "sqlite3VdbeHalt",
        ],
        max_bytes_per_call: None,
        fix: "SQLite makes each transaction durable with its own flushes, and without BEGIN \
              every statement is a transaction. Run many statements in one transaction \
              (BEGIN ... COMMIT); for many small transactions, PRAGMA journal_mode=WAL with \
              PRAGMA synchronous=NORMAL flushes once per checkpoint instead of twice per commit.",
    }],
    ..EMPTY
};
