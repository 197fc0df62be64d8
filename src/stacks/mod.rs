//! User stacks: unwinding sampled stacks while their process lives, and
//! naming the frames afterwards.

pub mod elf;
pub mod gopclntab;
pub mod jit;
pub mod kallsyms;
pub mod lock_name;
pub mod map_change;
pub mod maps;
pub mod name;
pub mod perf_map;
pub mod segments;
pub mod symbolize;
pub mod unwind;
