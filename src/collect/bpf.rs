//! The generated skeletons: `src/bpf/syscalls.bpf.c` (kerntax's programs)
//! and `src/bpf/floor.bpf.c` (the same hooks with empty programs, for the
//! benchmarks' floor; kerntax never loads it). The BPF-side structs are
//! used through the types libbpf-cargo generates from the object's BTF, so the
//! two sides cannot drift apart; `plain` reads them out of byte buffers with
//! size and alignment checks.

#[allow(
    clippy::all,
    dead_code,
    non_camel_case_types,
    non_snake_case,
    unsafe_op_in_unsafe_fn
)]
mod skel {
    pub mod syscalls {
        include!(concat!(env!("OUT_DIR"), "/syscalls.skel.rs"));

        /// The object for kernels whose verifier refuses pointer arguments
        /// to global functions or knows no callbacks: the same source, those
        /// functions static and the callback left out (build.rs checks that
        /// both have the same maps, programs and data).
        static OLD_VERIFIER: &[u8] =
            include_bytes!(concat!(env!("OUT_DIR"), "/syscalls_old.bpf.o"));

        /// Which object the skeleton opens (set by `use_old_verifier_object`).
        static USE_OLD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

        pub fn use_old_verifier_object(on: bool) {
            USE_OLD.store(on, std::sync::atomic::Ordering::Relaxed);
        }

        /// The skeleton's object bytes (build.rs points it here).
        fn object_bytes(main: &'static [u8]) -> &'static [u8] {
            if USE_OLD.load(std::sync::atomic::Ordering::Relaxed) {
                OLD_VERIFIER
            } else {
                main
            }
        }
    }
    pub mod floor {
        include!(concat!(env!("OUT_DIR"), "/floor.skel.rs"));
    }
}

pub use skel::floor;
pub use skel::syscalls::*;
