//! V8's JavaScript frames (issue 38), without `--perf-basic-prof` or any
//! restart: every V8 frame of a JavaScript function (interpreted by
//! Ignition, or compiled by Sparkplug, Maglev or TurboFan) keeps `rbp` as
//! its frame pointer with the function's JSFunction and context in fixed
//! slots below it; a V8-internal frame (a stub, an exit to C++, an entry)
//! holds a small-integer frame-type marker where the context would be. The
//! walk (`stacks::unwind`) gives each frame's frame pointer; a frame in
//! JIT code or in the binary that embeds V8 is read here from the stack
//! copied at the sample, its JSFunction's SharedFunctionInfo read from the
//! process (`heap`), with the offsets the binary itself exports
//! (`layout`). It becomes `FrameLoc::Js`, named `function (script:line,
//! js)`: the line of the bytecode an interpreted frame runs where V8 has
//! its source positions, else of the function's start. A JIT frame keeps
//! its address (the spin analysis reads the code sampled there).

pub mod heap;
pub mod layout;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::interp::memory::ProcessMemory;
use crate::model::FrameLoc;
use crate::stacks::maps::Mapping;
use layout::Layout;

/// What a named JavaScript frame's location ends with: `burn
/// (/srv/app/work.js:12, js)`.
pub use crate::frame::JS_LOCATION;

/// File names (their start) of the binaries that embed V8 and export its
/// postmortem constants: node, and Debian's libnode.
const BINARIES: &[&str] = &["node", "nodejs", "libnode.so"];

/// A function named: what a `FrameLoc::Js` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Empty: anonymous; None: its name could not be read.
    pub name: Option<String>,
    pub script: Option<String>,
    /// Where the function starts (0: unknown).
    pub start_line: i32,
    /// Its script's line starts (to number an interpreted frame's line).
    lines: Option<Arc<Vec<u32>>>,
    /// Its Script and where in its source it starts: to number its lines
    /// once they can be read, if they could not be when it was first read.
    script_at: u64,
    start_pos: i64,
}

/// A SharedFunctionInfo read: in which batch it was last checked, the two
/// words it was read through, and its number among the functions.
struct Checked {
    batch: u64,
    words: (u64, u64),
    n: u64,
}

/// A Script read: its name and where its lines start, and the batch its
/// source was last read in (a source that could not be read, in the middle
/// of a collection or of its load, is read again the next batch).
#[derive(Clone)]
struct Script {
    name: Option<String>,
    lines: Option<Arc<Vec<u32>>>,
    tried: u64,
}

/// One process running V8.
struct Isolate {
    path: String,
    layout: Layout,
    /// SharedFunctionInfo -> what was read of it.
    functions: HashMap<u64, Checked>,
    /// Script -> what was read of it.
    scripts: HashMap<u64, Script>,
    /// This batch's JSFunction -> SharedFunctionInfo (a young function
    /// may move at the next collection: kept one batch).
    shared: HashMap<u64, Option<u64>>,
    /// This batch's BytecodeArray -> its source position table read.
    positions: HashMap<(u64, i64), Option<i64>>,
}

/// The V8 processes among the profiled ones.
#[derive(Default)]
pub struct V8s {
    procs: HashMap<u32, Isolate>,
    not_v8: HashSet<u32>,
    functions: Vec<Function>,
    batch: u64,
    /// Samples with JavaScript frames, the frames, and those left unnamed.
    pub stats: crate::report::Interpreters,
    /// Each V8 process once: its binary, or why its frames are not read.
    pub seen: Vec<(u32, String)>,
}

impl V8s {
    /// The name of function `n` at `line`: `burn (/srv/work.js:12, js)`.
    pub fn name(&self, n: u64, line: i32) -> Option<String> {
        let f = self.functions.get(n as usize)?;
        let name = match f.name.as_deref() {
            Some("") => "(anonymous)",
            Some(s) => s,
            None => "(name unread)",
        };
        Some(match (&f.script, line) {
            (Some(s), l) if l > 0 => format!("{name} ({s}:{l}, {JS_LOCATION})"),
            (Some(s), _) => format!("{name} ({s}, {JS_LOCATION})"),
            (None, _) => format!("{name} ({JS_LOCATION})"),
        })
    }
}

impl Isolate {
    /// The number of the function `shared` describes, read if new (or
    /// checked again once a batch: its name and script words unchanged).
    fn function(
        &mut self,
        mem: &ProcessMemory,
        shared: u64,
        batch: u64,
        all: &mut Vec<Function>,
    ) -> Option<u64> {
        let l = &self.layout;
        let known = self.functions.get_mut(&shared);
        if let Some(c) = &known
            && c.batch == batch
        {
            return Some(c.n);
        }
        let now = heap::shared_words(mem, l, shared);
        if let Some(c) = known {
            // Its words unchanged, or unreadable (the process gone: its
            // memory can no longer change).
            if now.is_none_or(|w| w == c.words) {
                c.batch = batch;
                let f = &mut all[c.n as usize];
                if f.lines.is_none() && f.script_at != 0 {
                    // Its lines unread when it was read: try again.
                    let read = self.scripts.get_mut(&f.script_at).map(|sc| {
                        retry_lines(mem, l, f.script_at, sc, batch);
                        (sc.name.clone(), sc.lines.clone())
                    });
                    let (name, lines) = read.unwrap_or_default();
                    if f.script.is_none() {
                        f.script = name;
                    }
                    if let Some(ls) = lines {
                        f.start_line = heap::line_of(&ls, f.start_pos);
                        f.lines = Some(ls);
                    }
                }
                return Some(c.n);
            }
        }
        let words = now?;
        let f = heap::function(mem, l, words);
        let Script {
            name: script,
            lines,
            ..
        } = match f.script {
            0 => Script {
                name: None,
                lines: None,
                tried: batch,
            },
            s => {
                let sc = self.scripts.entry(s).or_insert_with(|| Script {
                    name: heap::script_name(mem, l, s),
                    lines: heap::line_starts(mem, l, s).map(Arc::new),
                    tried: batch,
                });
                retry_lines(mem, l, s, sc, batch);
                sc.clone()
            }
        };
        let start_line = lines.as_deref().map_or(0, |ls| heap::line_of(ls, f.start));
        all.push(Function {
            name: f.name,
            script,
            start_line,
            lines,
            script_at: f.script,
            start_pos: f.start,
        });
        let n = (all.len() - 1) as u64;
        self.functions.insert(shared, Checked { batch, words, n });
        Some(n)
    }
}

/// Reads the source lines (and name) of Script `at` again if they could
/// not be read before, once a batch.
fn retry_lines(mem: &ProcessMemory, l: &Layout, at: u64, sc: &mut Script, batch: u64) {
    if sc.lines.is_some() || sc.tried == batch {
        return;
    }
    sc.tried = batch;
    sc.lines = heap::line_starts(mem, l, at).map(Arc::new);
    if sc.name.is_none() {
        sc.name = heap::script_name(mem, l, at);
    }
}

impl crate::interp::FrameNamer for V8s {
    /// Whether `pid` is a V8 process kerntax reads frames of.
    fn knows(&self, pid: u32) -> bool {
        self.procs.contains_key(&pid)
    }

    /// The frames of `frames` (with their frame pointers `fps`) that are
    /// JavaScript functions' frames: in JIT code, or in V8's binary
    /// (Ignition's handlers; `module_paths` names a frame's module);
    /// `word(addr)` reads the stack copied at the sample.
    fn name_frames(
        &mut self,
        pid: u32,
        frames: &mut [FrameLoc],
        fps: &[u64],
        word: &dyn Fn(u64) -> Option<u64>,
        module_paths: &[String],
    ) {
        let batch = self.batch;
        let Some(iso) = self.procs.get_mut(&pid) else {
            return;
        };
        let mem = ProcessMemory { pid };
        let l = iso.layout.clone();
        let at = |fp: u64, off: i64| fp.checked_add_signed(off).and_then(&word);
        let before = self.stats.frames;
        for i in 0..frames.len().min(fps.len()) {
            let addr = match frames[i] {
                FrameLoc::Jit { addr, .. } => addr,
                FrameLoc::InModule { module, .. }
                    if module_paths.get(module).is_some_and(|p| *p == iso.path) =>
                {
                    0
                }
                _ => continue,
            };
            let fp = fps[i];
            // A frame sharing an outer frame's frame pointer did not set
            // one up (C++ or a frameless stub): the outer frame is the
            // function's.
            if fp == 0 || fps[i + 1..].contains(&fp) {
                continue;
            }
            // A marker where the context is: a V8-internal frame.
            let (Some(context), Some(function)) = (at(fp, l.fp_context), at(fp, l.fp_function))
            else {
                continue;
            };
            if l.smi(context).is_some() || !l.is_heap_object(function) {
                continue;
            }
            let shared = *iso
                .shared
                .entry(function)
                .or_insert_with(|| heap::shared_of(&mem, &l, function));
            let Some(shared) = shared else { continue };
            self.stats.frames += 1;
            let Some(n) = iso.function(&mem, shared, batch, &mut self.functions) else {
                self.stats.frames_unreadable += 1;
                continue;
            };
            let f = &self.functions[n as usize];
            // An interpreted frame: the line of its bytecode.
            let mut line = f.start_line;
            if addr == 0
                && let (Some(array), Some(offset)) =
                    (at(fp, l.fp_bytecode_array), at(fp, l.fp_bytecode_offset))
                && let Some(offset) = l.smi(offset)
                && let Some(lines) = &f.lines
            {
                let offset = offset - (l.bytecode_data - l.heap_object_tag) as i64;
                let pos = *iso.positions.entry((array, offset)).or_insert_with(|| {
                    (heap::instance_type(&mem, &l, array) == Some(l.bytecode_array))
                        .then(|| heap::bytecode_position(&mem, &l, array, offset))
                        .flatten()
                });
                if let Some(pos) = pos {
                    line = heap::line_of(lines, pos);
                }
            }
            frames[i] = FrameLoc::Js {
                pid,
                function: n,
                line,
                addr,
            };
        }
        if self.stats.frames > before {
            self.stats.walked(false, false, false);
        }
    }
}

impl crate::interp::Reader for V8s {
    /// Learns whether `pid` (with `maps`) runs a V8 whose constants it
    /// exports.
    fn learn(&mut self, pid: u32, maps: &[Mapping]) {
        if self.procs.contains_key(&pid) || self.not_v8.contains(&pid) {
            return;
        }
        let Some((_, path)) = crate::interp::candidate_files(maps, BINARIES).next() else {
            return;
        };
        let Some(constants) = layout::constants(&path) else {
            self.not_v8.insert(pid);
            return;
        };
        match Layout::new(&constants) {
            Ok(layout) => {
                self.seen.push((
                    pid,
                    format!("V8 ({path}): JavaScript frames read from its heap"),
                ));
                self.procs.insert(
                    pid,
                    Isolate {
                        path,
                        layout,
                        functions: HashMap::new(),
                        scripts: HashMap::new(),
                        shared: HashMap::new(),
                        positions: HashMap::new(),
                    },
                );
            }
            Err(e) => {
                self.seen.push((
                    pid,
                    format!("V8 ({path}): its JavaScript frames cannot be read: {e}"),
                ));
                self.not_v8.insert(pid);
            }
        }
    }

    fn forget(&mut self, pid: u32) {
        self.procs.remove(&pid);
        self.not_v8.remove(&pid);
    }

    fn new_batch(&mut self) {
        self.batch += 1;
        for p in self.procs.values_mut() {
            p.shared.clear();
            p.positions.clear();
        }
    }

    fn stats(&self) -> &crate::report::Interpreters {
        &self.stats
    }

    fn seen(&self) -> &[(u32, String)] {
        &self.seen
    }
}
