//! CPython: the code objects a frame chain points at, named and numbered in
//! user space (`code`, `linetable`). Frames are walked at sample time;
//! what a code object says (its names, its file, its line table) is long-
//! lived and read once per code object from the target's memory.

pub mod code;
pub mod discover;
pub mod frames;
pub mod linetable;
pub mod walk;
