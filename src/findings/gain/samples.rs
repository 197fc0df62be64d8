//! The CPU a fix removes, read from the run's CPU samples: the share of
//! the program's samples whose stacks pass through the culprit's code (a
//! lock's acquire and release paths, a call's library wrappers, a spin
//! loop). Samples inside kerntax's own BPF programs are the profiler's
//! cost, not the program's: they are counted apart, and taken out of both
//! sides.

use std::collections::BTreeMap;

use crate::frame::Frame;
use crate::report::Report;

/// The run's CPU samples as the gain model reads them.
pub struct Samples<'a> {
    r: &'a Report,
    /// Share of all samples inside the profiler's own BPF programs.
    pub profiler_share: f64,
    /// Samples of the program's own (the profiler's aside).
    pub program_samples: u64,
    /// By thread: all its samples, and those inside the profiler.
    by_thread: BTreeMap<u32, (u64, u64)>,
}

/// A thread's profiler share is read from its own samples, weighed with
/// this many of the run's (its share, with few samples of its own, is
/// mostly the run's; with many, its own).
pub const PROFILER_PRIOR_SAMPLES: f64 = 10.0;

/// A kernel frame of one of kerntax's BPF programs (`bpf_prog_<tag>_kt_...`
/// or one of its sub-programs), or of the tracing that runs them (the
/// tracepoints' BPF trampolines, and the slow syscall paths a traced task
/// takes): the profiler's own time.
fn profiler_frame(f: &Frame) -> bool {
    f.as_str()
        .strip_suffix(" [k]")
        .is_some_and(|k| PROFILER_KERNEL_FUNCTIONS.iter().any(|p| k.starts_with(p)))
}

/// The kernel's functions that only run because a BPF program is attached
/// to a tracepoint (a syscall's enter and exit take `syscall_trace_enter`
/// and `syscall_exit_work` only when traced).
const PROFILER_KERNEL_FUNCTIONS: &[&str] = &[
    "bpf_prog_",
    "bpf_trace_run",
    "__bpf_trace_",
    "trace_call_bpf",
    "__traceiter_",
    "syscall_trace_enter",
    "syscall_exit_work",
];

impl<'a> Samples<'a> {
    pub fn of(r: &'a Report) -> Samples<'a> {
        let (mut all, mut profiler) = (0u64, 0u64);
        let mut by_thread: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
        for s in &r.cpu_samples.folded {
            all += s.count;
            let inside = s.frames.iter().any(profiler_frame);
            if inside {
                profiler += s.count;
            }
            for &(tid, k) in &s.threads {
                let e = by_thread.entry(tid).or_default();
                e.0 += k;
                if inside {
                    e.1 += k;
                }
            }
        }
        Samples {
            r,
            profiler_share: if all > 0 {
                profiler as f64 / all as f64
            } else {
                0.0
            },
            program_samples: all - profiler,
            by_thread,
        }
    }

    /// The share of thread `tid`'s CPU time that is its own (the
    /// profiler's aside): a thread that makes many system calls pays more
    /// of the profiler's cost than one that computes. From its own samples
    /// with `PROFILER_PRIOR_SAMPLES` of the run's share; the run's share
    /// where its samples carry no thread.
    pub fn own_share(&self, tid: u32) -> f64 {
        let (all, inside) = self.by_thread.get(&tid).copied().unwrap_or((0, 0));
        let k = PROFILER_PRIOR_SAMPLES;
        let share = (inside as f64 + k * self.profiler_share) / (all as f64 + k);
        1.0 - share.clamp(0.0, 1.0)
    }

    /// The share of the program's samples (and their number) whose stack
    /// has a frame `matches`.
    pub fn through(&self, matches: impl Fn(&Frame) -> bool) -> (f64, u64) {
        self.through_stack(|stack| stack.iter().any(&matches))
    }

    /// As `through`, with the threads.
    pub fn through_frames(&self, matches: impl Fn(&Frame) -> bool) -> Through {
        self.through_threads(|stack| stack.iter().any(&matches))
    }

    /// The share of the program's samples (and their number) whose stack
    /// `matches`.
    pub fn through_stack(&self, matches: impl Fn(&[Frame]) -> bool) -> (f64, u64) {
        let t = self.through_threads(matches);
        (t.share, t.samples)
    }

    /// The program's samples whose stack `matches`: their share, their
    /// number and the threads they were taken on.
    pub fn through_threads(&self, matches: impl Fn(&[Frame]) -> bool) -> Through {
        let mut by_thread: BTreeMap<u32, u64> = BTreeMap::new();
        let mut n = 0;
        for s in self.r.cpu_samples.folded.iter() {
            if s.frames.iter().any(profiler_frame) || !matches(&s.frames) {
                continue;
            }
            n += s.count;
            for &(tid, k) in &s.threads {
                *by_thread.entry(tid).or_default() += k;
            }
        }
        self.of_program(n, by_thread.into_iter().collect())
    }

    /// `n` of the program's samples, on `threads`.
    fn of_program(&self, n: u64, threads: Vec<(u32, u64)>) -> Through {
        Through {
            share: if self.program_samples == 0 {
                0.0
            } else {
                n as f64 / self.program_samples as f64
            },
            samples: n,
            threads,
        }
    }

    /// As `through_threads`, with what the matched kernel work costs the
    /// code around it (`fixes::with_aftermath`): each thread's matching
    /// samples in the kernel counted once more, taken from its samples
    /// that do not match, at most `max_share` of them.
    pub fn through_with_aftermath(
        &self,
        matches: impl Fn(&[Frame]) -> bool,
        max_share: f64,
    ) -> Through {
        // By thread (None: samples that carry none): matched, matched in
        // the kernel, not matched.
        let mut by: BTreeMap<Option<u32>, (u64, u64, u64)> = BTreeMap::new();
        for s in self.r.cpu_samples.folded.iter() {
            if s.frames.iter().any(profiler_frame) {
                continue;
            }
            let m = matches(&s.frames);
            let k = m && s.frames.iter().any(|f| f.as_str().ends_with(" [k]"));
            let parts: Vec<(Option<u32>, u64)> = if s.threads.is_empty() {
                vec![(None, s.count)]
            } else {
                s.threads.iter().map(|&(t, c)| (Some(t), c)).collect()
            };
            for (t, c) in parts {
                let e = by.entry(t).or_default();
                if m {
                    e.0 += c;
                    if k {
                        e.1 += c;
                    }
                } else {
                    e.2 += c;
                }
            }
        }
        let mut n = 0;
        let mut threads = vec![];
        for (t, (matched, kernel, others)) in by {
            let x = matched + kernel.min((others as f64 * max_share) as u64);
            n += x;
            if let Some(t) = t.filter(|_| x > 0) {
                threads.push((t, x));
            }
        }
        self.of_program(n, threads)
    }
}

/// The samples a fix's culprit code shows in.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Through {
    pub share: f64,
    pub samples: u64,
    /// By thread, `(tid, samples)` (empty where the report has no threads).
    pub threads: Vec<(u32, u64)>,
}

/// A frame of a lock's own machinery, in any runtime kerntax knows: its
/// acquire paths (`Waits::acquire`, `reacquire`) and the functions its lock
/// words are taken and released through (`Runtime::lock_kinds`), and the
/// kernel's futex and semaphore code under them.
pub fn lock_machinery(f: &Frame) -> bool {
    if let Some(kernel) = f.as_str().strip_suffix(" [k]") {
        return KERNEL_LOCK_FUNCTIONS.iter().any(|k| kernel.starts_with(k));
    }
    let function = f.function();
    crate::runtime::ALL.iter().any(|rt| {
        rt.matching.matches(function, rt.waits.acquire)
            || rt.matching.matches(function, rt.waits.reacquire)
            || rt
                .lock_kinds
                .iter()
                .any(|(_, names)| rt.matching.matches(function, names))
    })
}

/// The kernel's own functions of a futex or a SysV semaphore call.
const KERNEL_LOCK_FUNCTIONS: &[&str] = &["futex_", "__futex", "do_futex", "do_semtimedop", "sem"];

#[cfg(test)]
mod tests {
    use super::super::fixes;
    use super::*;
    use crate::report::FoldedStack;

    /// `stacks` (outermost first), each on one thread.
    fn report(stacks: &[(&[&str], u64, u32)]) -> Report {
        let mut r = crate::findings::tests::base();
        r.cpu_samples.folded = stacks
            .iter()
            .map(|(frames, count, tid)| FoldedStack {
                frames: frames.iter().map(|f| (*f).into()).collect(),
                count: *count,
                threads: vec![(*tid, *count)],
            })
            .collect();
        r
    }

    fn on_stat(st: &[Frame]) -> bool {
        st.iter().any(|f| f.function() == "stat")
    }

    /// A storm's calls cost the code around them too, at the high end:
    /// their kernel samples once more, from the same thread's other
    /// samples, at most AFTERMATH_MAX_SHARE of them (gawk-strftime,
    /// recorded: 59-75% against 80% measured, 59-85% with it).
    #[test]
    fn a_storms_high_end_adds_its_kernel_work_once_more_from_the_code_around_it() {
        let with = |others: u64| {
            let r = report(&[
                (&["main", "strftime", "stat", "sys_newfstatat [k]"], 30, 1),
                (&["main", "strftime", "stat"], 10, 1),
                (&["main", "interpret"], others, 1),
                // Another thread's kernel work is not the calls'.
                (&["other", "read", "sys_read [k]"], 50, 2),
            ]);
            Samples::of(&r).through_with_aftermath(on_stat, fixes::AFTERMATH_MAX_SHARE)
        };
        // 30 kernel samples: half of the thread's 58 others is 29, of 62
        // is 31.
        let at = (30.0 / fixes::AFTERMATH_MAX_SHARE) as u64;
        let below = with(at - 2);
        assert_eq!(below.samples, 40 + 29);
        assert_eq!(below.threads, vec![(1, 69)]);
        assert_eq!(with(at + 2).samples, 40 + 30);
    }

    #[test]
    fn a_fix_without_kernel_work_keeps_its_range() {
        let r = report(&[(&["main", "stat"], 10, 1), (&["main", "x"], 90, 1)]);
        let fix = fixes::cpu(Samples::of(&r).through_threads(on_stat), String::new());
        assert!(fixes::with_aftermath(&r, fix, on_stat).at_most.is_none());
        let r = report(&[
            (&["main", "stat", "sys_stat [k]"], 10, 1),
            (&["main", "x"], 90, 1),
        ]);
        let fix = fixes::cpu(Samples::of(&r).through_threads(on_stat), String::new());
        let most = fixes::with_aftermath(&r, fix, on_stat).at_most.unwrap();
        assert_eq!(most.cpu_samples, 20);
    }
}
