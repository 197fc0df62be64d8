//! Interpreted languages' own frames (issue 20): what a Python or Ruby
//! thread was running, read from the interpreter's frame chain rather than
//! from the C stack of its eval loop. One module per interpreter; the
//! process memory they read through is shared.

pub mod memory;
pub mod python;
pub mod ruby;
