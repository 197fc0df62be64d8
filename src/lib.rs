//! kerntax: finds the time a program pays to the kernel.
//!
//! Pipeline: `collect` (BPF) -> `model` (plain counters) -> `stacks`
//! (unwinding, symbols) -> `analyze` (one module per analysis) -> `report`
//! (the JSON contract) -> `findings` -> `render`. `session` runs one profile
//! end to end; `cli` is the front door.

pub mod agent;
pub mod analyze;
pub mod cli;
pub mod collect;
pub mod demo;
pub mod diff;
pub mod error;
pub mod findings;
pub mod fixed_hash;
pub mod frame;
#[doc(hidden)]
pub mod fuzz;
pub mod interp;
pub mod jvm;
pub mod measure;
pub mod model;
pub mod names;
pub mod preflight;
pub mod recording;
pub mod render;
pub mod report;
pub mod report_file;
pub mod runtime;
pub mod sched_trace;
pub mod session;
pub mod spans;
pub mod stacks;
pub mod tally;
pub mod target;
pub mod top;
pub mod units;
