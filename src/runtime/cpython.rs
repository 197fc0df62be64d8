//! CPython (3.11, 3.12): its interpreter's binary, its source files, and
//! its GIL. Its frames are read by `interp/python`.

use super::{EMPTY, LockRole, Matching, Runtime, RuntimeLock, Sign};

/// File-name prefixes of CPython's binary and library.
const MODULES: &[&str] = &["python3", "libpython3"];

pub const RUNTIME: Runtime = Runtime {
    name: "CPython",
    matching: Matching::Part,
    interpreter_modules: MODULES,
    source_markers: &[".py:"],
    locks: &[&GIL],
    ..EMPTY
};

pub const GIL: RuntimeLock = RuntimeLock {
    name: "CPython's GIL",
    role: LockRole::Interpreter,
    remedy: "Only one thread runs Python code at a time: threads doing CPU-bound Python \
        serialise on the GIL and hand it over every switch interval (5 ms). Run the CPU-bound \
        work in processes (multiprocessing, concurrent.futures.ProcessPoolExecutor), move it \
        into native code that releases the GIL (NumPy, a C extension with \
        Py_BEGIN_ALLOW_THREADS), or run fewer threads; threads only pay off for I/O.",
    churn_remedy: Some(
        "Each blocking call (a read, a write, a sleep, a lock) releases the GIL and takes it \
        back after, and with several threads each doing a little Python between small calls, \
        the GIL changes hands at every call: the threads spend their time handing it over \
        (futex calls, context switches), not running. Make the calls fewer and larger \
        (buffer the writes: io.BufferedWriter, one write per batch), do them from one thread \
        that the others hand data to (a queue.Queue), or run the work in processes; more \
        threads than one only pay off when the calls wait for long.",
    ),
    signs: &[
        // The GIL's condvars and mutexes live in _PyRuntime (3.11, 3.12:
        // its ceval.gil).
        Sign::Variable("_PyRuntime"),
        // take_gil and drop_gil are static: the waits are reached through
        // these named functions, on a condition variable or a mutex.
        Sign::All(&[
            Sign::ReachedThrough {
                libraries: MODULES,
                callers: &[
                    "PyEval_RestoreThread",
                    "PyEval_AcquireThread",
                    "PyEval_AcquireLock",
                    "PyGILState_Ensure",
                    "PyEval_SaveThread",
                    "_PyEval_EvalFrameDefault",
                ],
            },
            Sign::Frame(&["pthread_cond", "lll_lock"]),
        ]),
    ],
};
