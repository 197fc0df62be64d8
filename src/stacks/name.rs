//! Names a run's samples and locks for the analysis (`recording::Named`):
//! each distinct stack of the tally as function names, with how many of its
//! innermost frames are the runtime's libraries, and each lock address as
//! the variable it is. The one step after unwinding that reads the live
//! unwinder's state; what it hands on is plain data.

use crate::model::KernelCounters;
use crate::recording::{Named, NamedStack};
use crate::stacks::lock_name;
use crate::stacks::symbolize::Symbols;
use crate::stacks::unwind::Unwinding;
use crate::tally::SampleTally;

pub fn name(unwinding: &mut Unwinding, kernel: &KernelCounters, tally: &SampleTally) -> Named {
    // Lock names first: they read the mappings (mutably), which the stacks'
    // runtime test below only looks at.
    let lock_names = kernel
        .locks
        .iter()
        .map(|(key, _)| (*key, lock_name::name(unwinding, key)))
        .collect();
    let symbols = Symbols::resolve_cached(
        unwinding.names_cache.as_mut(),
        &unwinding.modules,
        &unwinding.jit_maps,
        crate::interp::Interpreters {
            python: &unwinding.python,
            ruby: &unwinding.ruby,
            java: &unwinding.java,
            js: &unwinding.js,
        },
        tally.stacks().flat_map(|s| &s.frames),
    );
    // Each distinct stack named once; the keys share it (`model::Frames`).
    let stacks = tally
        .stack_ids()
        .map(|id| {
            let stack = tally.stack(id);
            let frames = &stack.frames;
            let named = NamedStack {
                frames: symbols.stack(frames).into(),
                runtime: symbols.runtime_prefix(&unwinding.modules, frames),
                truncated: stack.truncated,
                leaf: frames.first().cloned(),
            };
            (id, named)
        })
        .collect();
    Named {
        stacks,
        lock_names,
        unresolved_frames: symbols.unresolved,
    }
}
