//! V8 as Node.js embeds it: its own C++ and builtins in whatever binary
//! embeds it, Node's own library scripts, and the builtin its JIT calls
//! for `Atomics.load`. Its frames are read by `interp/v8`.

use super::{EMPTY, Matching, Runtime};

pub const RUNTIME: Runtime = Runtime {
    name: "V8 (Node.js)",
    matching: Matching::Part,
    // Its C++ (`v8::internal::`, return type first for some) and its
    // embedded builtins (`Builtins_CEntry_...`): like a JVM's libjvm, the
    // runtime a program's JS functions pass through (an `Atomics.wait` is
    // the JS function's wait, not `FutexEmulation::WaitSync`'s).
    vm_functions: &["v8::internal::", "Builtins_"],
    // Node's own library (`node:internal/...`), as the Java platform's
    // packages are a JVM's.
    platform_code: &["node:"],
    load_helpers: &["Builtins_AtomicsLoad"],
    ..EMPTY
};
