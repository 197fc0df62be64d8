//! Python frames in unwound stacks: each CPython process kerntax sees is
//! registered for the BPF walk, and each sample's frame records take the
//! place of the eval-loop frames that ran them (py-spy's merge): one
//! `_PyEval_EvalFrameDefault` activation runs a run of Python frames, whose
//! outermost entered from C (3.11's `is_entry`; 3.12 ends a run with a
//! C-stack shim frame). Native frames of C code called from Python or
//! calling into it stay where they are.
//!
//! Code objects are read while the process lives, when its samples are
//! unwound, and kept by (pid, address) for naming.

use std::collections::HashMap;
use std::sync::Arc;

use super::code::{CodeLayout, CodeObject};
use super::discover::{self, Runtime};
use super::walk::{PyFrameRec, PyFrames, frame_layout};
use crate::collect::bpf::types;
use crate::interp::memory::ProcessMemory;
use crate::model::FrameLoc;
use crate::stacks::maps::Mapping;

/// One CPython process.
struct PyProcess {
    runtime: Runtime,
    /// Where its code objects' fields are.
    layout: Option<CodeLayout>,
    /// By address: the code object read there (None: not readable), its
    /// number among all read, and the batch of samples it was last
    /// checked in.
    codes: HashMap<u64, Known>,
}

struct Known {
    id: u64,
    code: Option<Arc<CodeObject>>,
    checked_in: u64,
}

/// Every CPython process seen, and the code objects their frames name.
#[derive(Default)]
pub struct Pythons {
    procs: HashMap<u32, PyProcess>,
    /// Processes found to be a CPython whose frames are not read
    /// (unsupported, or asked not to): looked at no more.
    not_python: std::collections::HashSet<u32>,
    /// Registrations for BPF not yet made: (pid, what the walk needs).
    pub to_register: Vec<(u32, types::kt_py_proc)>,
    /// Interpreters seen per process: "3.11.2 (/usr/bin/python3.11)", or
    /// why it cannot be walked.
    pub seen: Vec<(u32, String)>,
    /// What became of the frames (`seen` is filled from the list above
    /// when the report is made).
    pub stats: crate::report::Interpreters,
    /// Asked not to read frames (`--no-interpreter-frames`): processes are
    /// still named in `seen`.
    pub disabled: bool,
    /// Every code object read, by number: a frame names its code object
    /// by this number, not its address, which a later object may reuse.
    objects: Vec<Option<Arc<CodeObject>>>,
    /// The batch of samples being unwound (see `new_batch`).
    batch: u64,
}

impl Pythons {
    /// The code object at `code` in `pid` as a number for frames, and the
    /// object (None: not readable).
    fn code(&mut self, pid: u32, code: u64) -> Option<(u64, Option<Arc<CodeObject>>)> {
        let batch = self.batch;
        let p = self.procs.get_mut(&pid)?;
        let mem = ProcessMemory { pid };
        if let Some(k) = p.codes.get_mut(&code) {
            let same = k.checked_in == batch
                || match (&k.code, &p.layout) {
                    (Some(c), Some(l)) => l.identity(&mem, code).is_ok_and(|i| i == c.identity),
                    _ => false,
                };
            if same {
                k.checked_in = batch;
                return Some((k.id, k.code.clone()));
            }
        }
        let read = match &p.layout {
            Some(l) => l.code(&mem, code).ok().map(Arc::new),
            None => None,
        };
        let id = self.objects.len() as u64;
        self.objects.push(read.clone());
        p.codes.insert(
            code,
            Known {
                id,
                code: read.clone(),
                checked_in: batch,
            },
        );
        Some((id, read))
    }

    /// The name of a Python frame: `qualname (file.py:line)`, its code
    /// object by number.
    pub fn name(&self, code: u64, line: i32) -> Option<String> {
        let c = self.objects.get(code as usize)?.as_ref()?;
        Some(match line {
            l if l > 0 => format!("{} ({}:{l})", c.qualname, short_path(&c.filename)),
            _ => format!("{} ({})", c.qualname, short_path(&c.filename)),
        })
    }

    /// `frames` (innermost first) with the Python frames of `py` in place of
    /// the eval-loop frames that ran them. `eval_at(frame)` says whether a
    /// native frame is in `pid`'s eval loop.
    pub fn merge(
        &mut self,
        pid: u32,
        frames: Vec<FrameLoc>,
        py: &PyFrames,
        eval_at: impl Fn(&FrameLoc, &std::ops::Range<u64>, &str) -> bool,
    ) -> Vec<FrameLoc> {
        let Some(p) = self.procs.get(&pid) else {
            return frames;
        };
        self.stats.walked(py.no_thread, py.fault, py.truncated);
        let minor = p.runtime.minor();
        let (svma, path) = (p.runtime.eval_svma.clone(), p.runtime.path.clone());
        let runs = runs(&py.frames, minor);
        if runs.is_empty() {
            return frames;
        }
        let evals: Vec<usize> = (0..frames.len())
            .filter(|&i| eval_at(&frames[i], &svma, &path))
            .collect();
        let (out, mismatched) =
            crate::interp::merge_runs(frames, evals, &runs, py.truncated, &mut |run, out| {
                self.push_python(pid, run, out)
            });
        self.stats.merge_mismatches += u64::from(mismatched);
        out
    }

    fn push_python(&mut self, pid: u32, run: &[PyFrameRec], out: &mut Vec<FrameLoc>) {
        for r in run {
            self.stats.frames += 1;
            let Some((id, code)) = self.code(pid, r.code) else {
                continue;
            };
            let line = match code {
                Some(c) => c.line(i64::from(r.lasti)).unwrap_or(0),
                None => {
                    self.stats.frames_unreadable += 1;
                    0
                }
            };
            out.push(FrameLoc::Python {
                pid,
                code: id,
                line,
            });
        }
    }
}

/// The frames split into runs, each one eval-loop activation's, innermost
/// first; 3.12's shim frames dropped.
fn runs(frames: &[PyFrameRec], minor: u32) -> Vec<Vec<PyFrameRec>> {
    let mut out: Vec<Vec<PyFrameRec>> = vec![Vec::new()];
    for f in frames {
        if f.is_shim(minor) {
            if !out.last().is_some_and(Vec::is_empty) {
                out.push(Vec::new());
            }
            continue;
        }
        out.last_mut().expect("one run at least").push(*f);
        if f.ends_run(minor) {
            out.push(Vec::new());
        }
    }
    out.retain(|r| !r.is_empty());
    out
}

/// A file as a reader knows it: the part under the interpreter's library
/// or a packages directory (`json/decoder.py`), else the file's name.
pub fn short_path(path: &str) -> &str {
    for marker in ["/site-packages/", "/dist-packages/"] {
        if let Some(i) = path.rfind(marker) {
            return &path[i + marker.len()..];
        }
    }
    if let Some(i) = path.find("/lib/python3") {
        let rest = &path[i + "/lib/".len()..];
        if let Some(j) = rest.find('/') {
            return &rest[j + 1..];
        }
    }
    path.rsplit('/').next().unwrap_or(path)
}

impl crate::interp::Reader for Pythons {
    /// Looks at `pid`'s mappings once for a CPython, and registers it.
    fn learn(&mut self, pid: u32, maps: &[Mapping]) {
        if self.procs.contains_key(&pid) || self.not_python.contains(&pid) {
            return;
        }
        let mem = ProcessMemory { pid };
        // Not CPython, or not yet: a python3.12 launcher maps its
        // libpython after the exec this may be called at. Looked at again
        // whenever its map is read again (a sample in code not mapped
        // before), which is not per sample.
        let Ok(Some(rt)) = discover::find(maps, &mem) else {
            return;
        };
        let version = rt.version_text();
        if self.disabled {
            self.seen.push((
                pid,
                format!(
                    "CPython {version} ({}): frames not read (--no-interpreter-frames)",
                    rt.path
                ),
            ));
            self.not_python.insert(pid);
            return;
        }
        let config = frame_layout(rt.minor()).zip(rt.key_addr);
        let Some((mut config, key_addr)) = config else {
            self.seen.push((
                pid,
                format!(
                    "CPython {version} ({}): not supported, no Python frames",
                    rt.path
                ),
            ));
            self.not_python.insert(pid);
            return;
        };
        let layout = CodeLayout::read(&mem, rt.code_type, rt.minor()).ok();
        let Some(units) = layout
            .as_ref()
            .and_then(|l| u16::try_from(l.basicsize).ok())
        else {
            self.seen.push((
                pid,
                format!(
                    "CPython {version} ({}): its code type could not be read",
                    rt.path
                ),
            ));
            self.not_python.insert(pid);
            return;
        };
        config.key_addr = key_addr;
        config.code_units = units;
        self.to_register.push((pid, config));
        self.seen
            .push((pid, format!("CPython {version} ({})", rt.path)));
        self.procs.insert(
            pid,
            PyProcess {
                runtime: rt,
                layout,
                codes: HashMap::new(),
            },
        );
    }

    /// A process's image was replaced: look at it again.
    fn forget(&mut self, pid: u32) {
        self.procs.remove(&pid);
        self.not_python.remove(&pid);
    }

    /// A new batch of samples (every 100 ms): a code object known from an
    /// earlier one is checked again before its name is used, one read of
    /// its header, in case it was freed and its memory holds another now
    /// (a module body compiled from a string at start-up, freed, its
    /// address reused by a function's code: its frames were named
    /// `<module> (<string>)`). Within a batch, what was read is trusted.
    fn new_batch(&mut self) {
        self.batch += 1;
    }

    fn stats(&self) -> &crate::report::Interpreters {
        &self.stats
    }

    fn seen(&self) -> &[(u32, String)] {
        &self.seen
    }
}

#[cfg(test)]
#[path = "frames_tests.rs"]
mod tests;
