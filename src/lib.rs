//! kerntax: finds the time a program pays to the kernel.
//!
//! Pipeline: `collect` (BPF) -> `model` (plain counters) -> `stacks`
//! (unwinding, symbols) -> `aggregate` -> `report` (the JSON contract) ->
//! `render`. `session` runs one profile end to end; `cli` is the front door.

pub mod aggregate;
pub mod cli;
pub mod collect;
pub mod cpu;
pub mod demo;
pub mod diff;
pub mod error;
pub mod findings;
pub mod locks;
pub mod model;
pub mod names;
pub mod polls;
pub mod preflight;
pub mod render;
pub mod report;
pub mod sched;
pub mod session;
pub mod stacks;
pub mod tally;
pub mod target;
pub mod timeline;
