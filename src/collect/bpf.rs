//! The generated skeleton of `src/bpf/syscalls.bpf.c`. The BPF-side structs are
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
    include!(concat!(env!("OUT_DIR"), "/syscalls.skel.rs"));
}

pub use skel::*;
