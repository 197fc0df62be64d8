//! Managed runtimes' own frames (issues 20 and 38): what a Python, Ruby,
//! Java or JavaScript thread was running, read from the runtime's own
//! structures rather than from the C stack of its eval loop or VM. One
//! module per runtime, each a [`Reader`]; the process memory they read
//! through is shared. What kerntax knows of a runtime besides its frames
//! is data in `crate::runtime`.

pub mod hotspot;
pub mod memory;
pub mod python;
pub mod ruby;
pub mod v8;

use crate::model::FrameLoc;
use crate::stacks::maps::Mapping;

/// What every runtime's frame reader does, whatever way it reads frames:
/// the process table calls these on all of them alike
/// (`stacks::unwind::Unwinding::readers`).
pub trait Reader {
    /// Looks at a process's memory map (once a process): whether it runs
    /// this runtime, and how its frames are read, or why they cannot be.
    fn learn(&mut self, pid: u32, maps: &[Mapping]);
    /// A process's image was replaced: look at it again.
    fn forget(&mut self, pid: u32);
    /// A new batch of samples: what was read in an earlier one is checked
    /// again before its use (memory freed and reused since).
    fn new_batch(&mut self);
    /// What became of the frames.
    fn stats(&self) -> &crate::report::Interpreters;
    /// Each process once: its runtime, or why its frames cannot be read.
    fn seen(&self) -> &[(u32, String)];
}

/// A reader that names frames of the native stack the unwinder walked (a
/// VM that keeps its frames on it: HotSpot's interpreter, V8's JavaScript
/// frames), read from the stack copied at the sample; the other readers
/// merge a chain their BPF walker read.
pub trait FrameNamer: Reader {
    /// Whether `pid` runs this runtime, readably.
    fn knows(&self, pid: u32) -> bool;
    /// Names the frames of `frames` (with their frame pointers `fps`) that
    /// are the runtime's; `word(addr)` reads the stack copied at the
    /// sample, `module_paths` names a frame's module.
    fn name_frames(
        &mut self,
        pid: u32,
        frames: &mut [FrameLoc],
        fps: &[u64],
        word: &dyn Fn(u64) -> Option<u64>,
        module_paths: &[String],
    );
}

/// The interpreters' frame readers, as naming a stack needs them: each
/// names the frames of its own `FrameLoc` variant.
#[derive(Clone, Copy)]
pub struct Interpreters<'a> {
    pub python: &'a python::frames::Pythons,
    pub ruby: &'a ruby::frames::Rubies,
    pub java: &'a hotspot::Jvms,
    pub js: &'a v8::V8s,
}

impl Interpreters<'_> {
    /// The name of an interpreted frame, or what it shows when its code
    /// could not be read; None for a frame no interpreter reads.
    pub fn name(&self, loc: &FrameLoc) -> Option<Result<String, &'static str>> {
        Some(match *loc {
            FrameLoc::Python { code, line, .. } => {
                self.python.name(code, line).ok_or("[python: code gone]")
            }
            FrameLoc::Ruby { iseq, line, .. } => {
                self.ruby.name(iseq, line).ok_or("[ruby: iseq unreadable]")
            }
            FrameLoc::Java { method, line, .. } => {
                self.java.name(method, line).ok_or("[java: method unread]")
            }
            FrameLoc::Js { function, line, .. } => {
                self.js.name(function, line).ok_or("[js: function unread]")
            }
            FrameLoc::InModule { .. } | FrameLoc::Unmapped { .. } | FrameLoc::Jit { .. } => {
                return None;
            }
        })
    }
}

/// The executable file mappings of a process whose file name starts with
/// one of `prefixes` (an interpreter's executable or library), each file
/// once: the only files an interpreter's discovery reads in full.
pub fn candidate_files<'a>(
    maps: &'a [Mapping],
    prefixes: &'a [&str],
) -> impl Iterator<Item = (&'a Mapping, String)> + 'a {
    let mut seen = std::collections::HashSet::new();
    maps.iter()
        .filter(|m| m.is_file() && m.executable)
        .filter_map(move |m| {
            let path = m.path.clone().unwrap_or_default();
            let base = path.rsplit('/').next().unwrap_or("");
            (prefixes.iter().any(|p| base.starts_with(p)) && seen.insert(path.clone()))
                .then_some((m, path))
        })
}

/// `frames` (a native stack, innermost first) with each of the native
/// frames at `evals` (ascending: the interpreter's eval-loop activations)
/// replaced by the run of interpreted frames it ran, `runs` innermost
/// first; `push` puts a run's frames out. The two pair from the outermost,
/// where both sides agree best (an eval frame unwound in a part its
/// symbols do not cover is missed); a chain cut short (`truncated`, deeper
/// than BPF records) lacks its outermost runs, so then they pair from the
/// innermost. Runs left over are put before the innermost paired frame,
/// or after the whole stack when none paired. Returns the stack and
/// whether evals and runs failed to pair one to one.
pub fn merge_runs<R>(
    frames: Vec<FrameLoc>,
    mut evals: Vec<usize>,
    runs: &[Vec<R>],
    truncated: bool,
    push: &mut dyn FnMut(&[R], &mut Vec<FrameLoc>),
) -> (Vec<FrameLoc>, bool) {
    if truncated && evals.len() > runs.len() {
        evals.truncate(runs.len());
    }
    let mismatched = evals.len() != runs.len();
    let paired = evals.len().min(runs.len());
    let mut replace: std::collections::HashMap<usize, &[R]> = std::collections::HashMap::new();
    for k in 0..paired {
        replace.insert(evals[evals.len() - 1 - k], &runs[runs.len() - 1 - k]);
    }
    let extra = &runs[..runs.len() - paired];
    let first_paired = (paired > 0).then(|| evals[evals.len() - paired]);
    let mut out = Vec::with_capacity(frames.len() + runs.iter().map(Vec::len).sum::<usize>());
    for (i, f) in frames.into_iter().enumerate() {
        if Some(i) == first_paired {
            for r in extra {
                push(r, &mut out);
            }
        }
        match replace.remove(&i) {
            Some(run) => push(run, &mut out),
            None => out.push(f),
        }
    }
    if first_paired.is_none() {
        for r in extra {
            push(r, &mut out);
        }
    }
    (out, mismatched)
}
