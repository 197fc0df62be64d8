//! Ruby frames in unwound stacks: each CRuby process kerntax sees is
//! registered for the BPF walk, and each sample's frame records take the
//! place of the `rb_vm_exec` frames that ran them: one activation runs the
//! Ruby frames down to one whose environment says FINISH (a method called
//! from C, a block a C method yields to, the main script). Native frames
//! (C methods, the VM's helpers) stay where they are.
//!
//! Iseqs are read while the process lives, when its samples are unwound,
//! and kept by (pid, address) for naming; one known from an earlier batch
//! of samples is checked again (still an iseq, the same body) before its
//! name is used.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::discover::{self, EcTls, Runtime};
use super::iseq::{self, Iseq};
use super::layout::{self, Layout};
use super::stack::RbFrameRec;
use super::walk::{RbFrames, proc_config};
use crate::collect::bpf::types;
use crate::interp::memory::{Memory, ProcessMemory};
use crate::model::FrameLoc;
use crate::stacks::maps::Mapping;

struct RbProcess {
    runtime: Runtime,
    layout: Layout,
    /// By address: the iseq's number among all read, and the batch it was
    /// last checked in.
    iseqs: HashMap<u64, Known>,
    /// Told to the BPF walk (not until the loader filled libruby's GOT).
    registered: bool,
}

struct Known {
    id: u64,
    checked_in: u64,
}

/// Every CRuby process seen, and the iseqs their frames name.
#[derive(Default)]
pub struct Rubies {
    procs: HashMap<u32, RbProcess>,
    /// Processes found to be a CRuby whose frames are not read: looked at
    /// no more.
    not_ruby: HashSet<u32>,
    /// Registrations for BPF not yet made.
    pub to_register: Vec<(u32, types::kt_rb_proc)>,
    /// Interpreters seen per process, or why they cannot be walked.
    pub seen: Vec<(u32, String)>,
    /// Frames not read (`--no-interpreter-frames`): processes are still
    /// named in `seen`.
    pub disabled: bool,
    pub stats: crate::report::Interpreters,
    /// Every iseq read, by number (None: not readable).
    objects: Vec<Option<Arc<Iseq>>>,
    /// Lines found, by (iseq number, pc): an iseq's line table never
    /// changes, and each lookup is a read of the target's memory (a failed
    /// one is tried again next time).
    lines: HashMap<(u64, u64), i32>,
    batch: u64,
}

impl Rubies {
    /// Registers the processes whose libruby was not yet relocated when
    /// they were found, once the loader has filled its GOT slots.
    fn register_relocated(&mut self) {
        for (&pid, p) in self.procs.iter_mut().filter(|(_, p)| !p.registered) {
            let Some(tls) = p.runtime.ec else { continue };
            let mem = ProcessMemory { pid };
            let (Ok(module), Ok(offset)) =
                (mem.read_u64(tls.module_slot), mem.read_u64(tls.offset_slot))
            else {
                continue;
            };
            let tls = EcTls {
                module,
                offset,
                ..tls
            };
            if let Some(config) = proc_config(&tls, &p.layout).filter(|_| module != 0) {
                self.to_register.push((pid, config));
                p.registered = true;
            }
        }
    }

    /// The iseq at `addr` in `pid` as a number for frames, and the iseq.
    fn iseq(&mut self, pid: u32, addr: u64) -> Option<(u64, Option<Arc<Iseq>>)> {
        let batch = self.batch;
        let p = self.procs.get_mut(&pid)?;
        let mem = ProcessMemory { pid };
        if let Some(k) = p.iseqs.get_mut(&addr) {
            // Checked again: still an iseq with the same body. A process
            // gone since (its last samples are unwound after it exited)
            // cannot have put another iseq there since its last batch.
            let known = &self.objects[k.id as usize];
            let same = k.checked_in == batch
                || match iseq::body_of(&mem, &p.layout, addr) {
                    Ok(body) => body.is_some() && body == known.as_ref().map(|i| i.body),
                    Err(e) => e.raw_os_error() == Some(libc::ESRCH) && known.is_some(),
                };
            if same {
                k.checked_in = batch;
                return Some((k.id, self.objects[k.id as usize].clone()));
            }
        }
        let read = Iseq::read(&mem, &p.layout, addr).ok().map(Arc::new);
        let id = self.objects.len() as u64;
        self.objects.push(read.clone());
        p.iseqs.insert(
            addr,
            Known {
                id,
                checked_in: batch,
            },
        );
        Some((id, read))
    }

    /// The name of a Ruby frame: `label (file.rb:line)`, its iseq by number.
    pub fn name(&self, iseq: u64, line: i32) -> Option<String> {
        let i = self.objects.get(iseq as usize)?.as_ref()?;
        let file = i.path.rsplit('/').next().unwrap_or(&i.path);
        Some(match line {
            l if l > 0 => format!("{} ({file}:{l})", i.label),
            _ => format!("{} ({file})", i.label),
        })
    }

    /// `frames` (innermost first) with the Ruby frames of `rb` in place of
    /// the `rb_vm_exec` frames that ran them. `vm_exec_at(frame, svma,
    /// path)` says whether a native frame is in `pid`'s VM entry.
    pub fn merge(
        &mut self,
        pid: u32,
        frames: Vec<FrameLoc>,
        rb: &RbFrames,
        vm_exec_at: impl Fn(&FrameLoc, &std::ops::Range<u64>, &str) -> bool,
    ) -> Vec<FrameLoc> {
        let Some(p) = self.procs.get(&pid) else {
            return frames;
        };
        self.stats.walked(rb.no_thread, rb.fault, rb.truncated);
        let (svma, path) = (p.runtime.vm_exec_svma.clone(), p.runtime.path.clone());
        let runs = runs(&rb.frames);
        if runs.is_empty() {
            return frames;
        }
        let evals: Vec<usize> = (0..frames.len())
            .filter(|&i| vm_exec_at(&frames[i], &svma, &path))
            .collect();
        let (out, mismatched) =
            crate::interp::merge_runs(frames, evals, &runs, rb.truncated, &mut |run, out| {
                self.push_ruby(pid, run, out)
            });
        self.stats.merge_mismatches += u64::from(mismatched);
        out
    }

    fn push_ruby(&mut self, pid: u32, run: &[RbFrameRec], out: &mut Vec<FrameLoc>) {
        for r in run {
            self.stats.frames += 1;
            let Some((id, iseq)) = self.iseq(pid, r.iseq) else {
                continue;
            };
            let line = match &iseq {
                Some(i) => {
                    let pc = i.full_pc(r.pc);
                    match self.lines.get(&(id, pc)) {
                        Some(&line) => line,
                        None => match i.line(&ProcessMemory { pid }, pc) {
                            Ok(line) => *self.lines.entry((id, pc)).or_insert(line),
                            Err(_) => 0,
                        },
                    }
                }
                None => {
                    self.stats.frames_unreadable += 1;
                    0
                }
            };
            out.push(FrameLoc::Ruby {
                pid,
                iseq: id,
                line,
            });
        }
    }
}

/// The Ruby frames (C methods' records passed over) split into runs, each
/// one `rb_vm_exec` activation's, innermost first.
fn runs(frames: &[RbFrameRec]) -> Vec<Vec<RbFrameRec>> {
    let mut out: Vec<Vec<RbFrameRec>> = vec![Vec::new()];
    for f in frames.iter().filter(|f| f.is_ruby()) {
        out.last_mut().expect("one run at least").push(*f);
        if f.finishes_run() {
            out.push(Vec::new());
        }
    }
    out.retain(|r| !r.is_empty());
    out
}

impl crate::interp::Reader for Rubies {
    /// Looks at `pid`'s mappings once for a CRuby, and registers it.
    fn learn(&mut self, pid: u32, maps: &[Mapping]) {
        if self.procs.contains_key(&pid) || self.not_ruby.contains(&pid) {
            return;
        }
        let mem = ProcessMemory { pid };
        let Ok(Some(rt)) = discover::find(maps, &mem) else {
            return;
        };
        let what = format!("CRuby {} ({})", rt.version_text(), rt.path);
        if self.disabled {
            self.seen.push((
                pid,
                format!("{what}: frames not read (--no-interpreter-frames)"),
            ));
            self.not_ruby.insert(pid);
            return;
        }
        let (major, minor, _) = rt.version;
        let config = layout::for_version(major, minor)
            .and_then(|l| Some((l, rt.ec?)))
            .and_then(|(l, tls)| Some((l, proc_config(&tls, &l)?)));
        let Some((layout, config)) = config else {
            self.seen
                .push((pid, format!("{what}: not supported, no Ruby frames")));
            self.not_ruby.insert(pid);
            return;
        };
        // Seen at its exec, the loader may not have relocated libruby yet:
        // its GOT slot then holds no module id (0), and a walk through it
        // faults on every sample (one suite run's ruby-gvl: 3,187 of 3,189
        // chains). Registered once the slot is filled (see `new_batch`).
        let registered = config.tls_module != 0;
        if registered {
            self.to_register.push((pid, config));
        }
        self.seen.push((pid, what));
        self.procs.insert(
            pid,
            RbProcess {
                runtime: rt,
                layout,
                iseqs: HashMap::new(),
                registered,
            },
        );
    }

    /// A process's image was replaced: look at it again.
    fn forget(&mut self, pid: u32) {
        self.procs.remove(&pid);
        self.not_ruby.remove(&pid);
    }

    /// A new batch of samples: iseqs known from earlier are checked again,
    /// and processes found before their loader was done are registered.
    fn new_batch(&mut self) {
        self.register_relocated();
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
mod tests {
    use super::*;
    use crate::interp::ruby::layout::FRAME_FLAG_FINISH;

    fn rec(iseq: u64, finish: bool) -> RbFrameRec {
        RbFrameRec {
            iseq,
            pc: 8,
            ep_flags: 0x1111_0003 | if finish { FRAME_FLAG_FINISH } else { 0 },
        }
    }

    #[test]
    fn a_run_ends_at_each_frame_that_finishes_its_activation() {
        let f = [rec(1, false), rec(2, true), rec(3, false), rec(4, true)];
        let r = runs(&f);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].iter().map(|x| x.iseq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(r[1].iter().map(|x| x.iseq).collect::<Vec<_>>(), [3, 4]);
        // A chain cut short: its last run has no end, and is kept.
        assert_eq!(runs(&f[..3]).len(), 2);
    }
}
