//! The C++ runtime (GNU libstdc++, LLVM libc++) and the compiler's support
//! libraries: machinery a C++ program's waits pass through (std::mutex is
//! glibc's pthread mutex underneath), and the start of a std::thread.

use super::{EMPTY, Matching, Runtime};

pub const RUNTIME: Runtime = Runtime {
    name: "the C++ runtime",
    matching: Matching::Part,
    machinery_libraries: &[
        "libstdc++.so",
        "libc++.so",
        "libc++abi.so",
        "libgcc_s.so",
        "libatomic.so",
    ],
    thread_entries: &["execute_native_thread_routine"],
    thread_entry_parts: &["std::thread"],
    ..EMPTY
};
