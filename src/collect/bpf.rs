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
    }
    pub mod floor {
        include!(concat!(env!("OUT_DIR"), "/floor.skel.rs"));
    }
}

pub use skel::floor;
pub use skel::syscalls::*;
