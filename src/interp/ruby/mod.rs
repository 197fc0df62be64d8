//! CRuby: the frames a Ruby thread runs, read from its VM's control-frame
//! stack rather than from the C stack of `rb_vm_exec` (issue 20). The same
//! split as CPython's: a frame names its instruction sequence (iseq) and
//! program counter, both read while the thread runs; what the iseq says
//! (its label, its file, its line table) is long-lived and read once per
//! iseq from the target's memory.
//!
//! - `layout`: where the VM keeps what is read, per minor version (3.1);
//! - `discover`: libruby in a process, its version and the thread-local
//!   `ruby_current_ec` a walk starts from;
//! - `stack`: a thread's control frames, from its execution context;
//! - `iseq`: an iseq's label, file and line table, and Ruby's strings;
//! - `succ`: the succinct bit-vector that maps a program counter to its
//!   line-table entry;
//! - `walk`: what BPF is told of a process and sends back per sample;
//! - `frames`: each sample's Ruby frames merged into its native stack.

pub mod discover;
pub mod frames;
pub mod iseq;
pub mod layout;
pub mod stack;
pub mod succ;
pub mod walk;
