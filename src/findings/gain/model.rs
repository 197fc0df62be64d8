//! The run's critical path, as bounds: what a fix is worth is how much
//! shorter it makes the longest of them.
//!
//! A run of the program is bounded two ways (Brent's work and span, or
//! the asymptotic bounds of operational analysis):
//! - **the CPUs**: all its threads' CPU time, and that of the peers whose
//!   work grows with its own (a load generator on the same host), spread
//!   over the CPUs the rest of the host leaves it;
//! - **each working thread's own chain**: its CPU time and the waits
//!   nothing in the program can shorten (the disk, a peer, a timer), plus
//!   the waits the fix removes. Waits on the program's own threads (a
//!   lock's holder, a producer, a join) and the wait for a CPU are not in
//!   it: they last as long as the others make them, which the bounds
//!   already count.
//!
//! The run's modelled time is the longer bound; a fix removes CPU time
//! and waits, and its gain is how much shorter the modelled time gets.
//! What the model cannot explain of the measured time (the run lasted
//! longer than either bound) is assumed to shrink in proportion for the
//! point estimate, to vanish for the high end of the range and to stay for
//! the low end.

/// One thread, as the model sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Thread {
    pub tid: u32,
    /// On-CPU time, user and system, the profiler's own aside.
    pub cpu_ns: f64,
    /// Waits nothing in the program can shorten (disk, peers, timers).
    pub fixed_wait_ns: f64,
    /// Whether its own chain can bound the run: it does a real part of the
    /// work, or others wait on it, or the fix changes it.
    pub works: bool,
    /// What the fix takes away: CPU time and waits (those it removes are on
    /// the thread's chain before it, wherever they ended).
    pub removed_cpu_ns: f64,
    pub removed_wait_ns: f64,
    /// The part of `removed_wait_ns` already in `fixed_wait_ns`.
    pub removed_fixed_ns: f64,
}

impl Thread {
    fn chain_before(&self) -> f64 {
        self.cpu_ns + self.fixed_wait_ns + (self.removed_wait_ns - self.removed_fixed_ns).max(0.0)
    }

    fn chain_after(&self) -> f64 {
        (self.cpu_ns - self.removed_cpu_ns).max(0.0)
            + (self.fixed_wait_ns - self.removed_fixed_ns).max(0.0)
    }
}

/// The run, as the model sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Run {
    /// The wall time measured, the profiler's own share aside.
    pub wall_ns: f64,
    /// CPUs the program may use.
    pub cpus: f64,
    /// Other processes' CPU time during the run: peers' grows with the
    /// program's work; background's takes CPUs from it.
    pub peer_cpu_ns: f64,
    pub background_cpu_ns: f64,
    /// The fix gives the background's CPUs back (the program alone).
    pub frees_background: bool,
    /// A peer's pid and CPU time, taken as one thread's chain (its work
    /// serial): the program's fix leaves it as it is, the peer's work per
    /// unit being its own. None: not a bound (a peer's threads are not
    /// seen).
    pub peer_chain: Option<(u32, f64)>,
    pub threads: Vec<Thread>,
}

/// The model's answer: the gain as a share of the run's time (of its wall
/// time for a run that ends, of the time per unit of work for a server),
/// with its range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gain {
    pub share: f64,
    pub low: f64,
    pub high: f64,
    /// Of the measured time, the share the model's bounds explain.
    pub explained: f64,
    /// Which bound holds after the fix.
    pub after: Bound,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The CPUs: the work spread over them.
    Cpus,
    /// One thread's chain.
    Chain(u32),
    /// A peer process's work, were it serial.
    Peer(u32),
}

impl Run {
    fn cpus_left(&self, after: bool) -> f64 {
        let background = if after && self.frees_background {
            0.0
        } else if self.wall_ns > 0.0 {
            self.background_cpu_ns / self.wall_ns
        } else {
            0.0
        };
        // A program always keeps some of a CPU.
        (self.cpus - background).max(self.cpus.min(1.0) * MIN_CPU_LEFT)
    }

    /// The modelled time before (`after` false) or after the fix, and the
    /// bound that sets it.
    pub fn makespan(&self, after: bool) -> (f64, Bound) {
        let cpu: f64 = self
            .threads
            .iter()
            .map(|t| {
                if after {
                    (t.cpu_ns - t.removed_cpu_ns).max(0.0)
                } else {
                    t.cpu_ns
                }
            })
            .sum();
        let own_cpu_before: f64 = self.threads.iter().map(|t| t.cpu_ns).sum();
        // Peers' work grows with the program's: in proportion to its CPU.
        let peers = if after && own_cpu_before > 0.0 {
            self.peer_cpu_ns * cpu / own_cpu_before
        } else {
            self.peer_cpu_ns
        };
        let mut best = ((cpu + peers) / self.cpus_left(after), Bound::Cpus);
        for t in self.threads.iter().filter(|t| t.works) {
            let chain = if after {
                t.chain_after()
            } else {
                t.chain_before()
            };
            if chain > best.0 {
                best = (chain, Bound::Chain(t.tid));
            }
        }
        if let Some((pid, ns)) = self.peer_chain
            && ns > best.0
        {
            best = (ns, Bound::Peer(pid));
        }
        best
    }

    /// The fix's gain, with the range the model's unexplained time allows.
    pub fn gain(&self) -> Gain {
        let (before, _) = self.makespan(false);
        let (after, bound) = self.makespan(true);
        let wall = self.wall_ns.max(before);
        if wall <= 0.0 || before <= 0.0 {
            return Gain {
                share: 0.0,
                low: 0.0,
                high: 0.0,
                explained: 0.0,
                after: bound,
            };
        }
        let unexplained = wall - before;
        let share = clamp01(1.0 - after / before);
        let high = clamp01(1.0 - after / wall).max(share);
        let low = clamp01(1.0 - (after + unexplained) / wall).min(share);
        Gain {
            share,
            low,
            high,
            explained: before / wall,
            after: bound,
        }
    }
}

/// The least share of a CPU a program keeps however busy the host: the
/// scheduler's fair share never starves a runnable thread outright.
pub const MIN_CPU_LEFT: f64 = 0.1;

fn clamp01(x: f64) -> f64 {
    if x.is_finite() {
        x.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: f64 = 1e9;

    fn worker(tid: u32, cpu: f64) -> Thread {
        Thread {
            tid,
            cpu_ns: cpu * S,
            works: true,
            ..Thread::default()
        }
    }

    /// N threads each run c seconds of CPU, all of it under one lock, on C
    /// CPUs: the lock makes the run N·c long (each waits (N-1)·c for it);
    /// without it the run is N·c/C (or c with fewer threads than CPUs).
    fn serialised(n: u32, cpus: f64) -> Gain {
        let c = 1.0;
        let wall = f64::from(n) * c;
        Run {
            wall_ns: wall * S,
            cpus,
            threads: (0..n)
                .map(|tid| Thread {
                    removed_wait_ns: (wall - c) * S,
                    ..worker(tid, c)
                })
                .collect(),
            ..Run::default()
        }
        .gain()
    }

    #[test]
    fn a_lock_serialising_n_threads_on_c_cpus_gains_all_but_the_cpus_share() {
        // By hand: 1 - (N·c/C) / (N·c) = 1 - 1/C when N >= C.
        let g = serialised(4, 2.0);
        assert!((g.share - 0.5).abs() < 1e-9, "{g:?}");
        assert!((g.explained - 1.0).abs() < 1e-9);
        assert_eq!(g.after, Bound::Cpus);
        let g = serialised(8, 4.0);
        assert!((g.share - 0.75).abs() < 1e-9, "{g:?}");
        // Fewer threads than CPUs: each thread's own chain bounds it, 1 - c/(N·c).
        let g = serialised(2, 4.0);
        assert!((g.share - 0.5).abs() < 1e-9, "{g:?}");
        assert!(matches!(g.after, Bound::Chain(_)));
    }

    /// One thread, 1 s of CPU of which 0.75 s in a storm's calls: the fix
    /// leaves 0.25 s. A second, idle thread does not change it.
    #[test]
    fn a_storm_on_one_thread_gains_its_calls_cpu() {
        let run = Run {
            wall_ns: S,
            cpus: 2.0,
            threads: vec![
                Thread {
                    removed_cpu_ns: 0.75 * S,
                    ..worker(1, 1.0)
                },
                Thread {
                    fixed_wait_ns: S,
                    works: false,
                    ..worker(2, 0.0)
                },
            ],
            ..Run::default()
        };
        let g = run.gain();
        assert!((g.share - 0.75).abs() < 1e-9, "{g:?}");
        assert_eq!((g.low, g.high), (g.share, g.share));
    }

    /// A pipeline: a reader paced by its source (0.1 s of CPU, 0.9 s
    /// waiting for the source), two compressors of 0.4 s of CPU each
    /// waiting for the reader the rest of the time (their waits are on a
    /// thread of the program: not in their chains). Reading from a file
    /// instead: the CPUs bound it at (0.1 + 0.8) / 2 = 0.45 s, gain 55%.
    #[test]
    fn a_pipeline_paced_by_its_slowest_stage_gains_down_to_the_next_bound() {
        let mut reader = worker(1, 0.1);
        reader.fixed_wait_ns = 0.9 * S;
        reader.removed_wait_ns = 0.9 * S;
        reader.removed_fixed_ns = 0.9 * S;
        let run = Run {
            wall_ns: S,
            cpus: 2.0,
            threads: vec![reader, worker(2, 0.4), worker(3, 0.4)],
            ..Run::default()
        };
        let g = run.gain();
        assert!((g.share - 0.55).abs() < 1e-9, "{g:?}");
        assert_eq!(g.after, Bound::Cpus);
        // On one CPU the compressors' work bounds it: (0.9) / 1, gain 10%.
        let g = Run { cpus: 1.0, ..run }.gain();
        assert!((g.share - 0.1).abs() < 1e-9, "{g:?}");
    }

    /// What the model does not explain widens the range around the point.
    #[test]
    fn unexplained_time_widens_the_range() {
        let run = Run {
            wall_ns: 2.0 * S,
            cpus: 1.0,
            threads: vec![Thread {
                removed_cpu_ns: 0.5 * S,
                ..worker(1, 1.0)
            }],
            ..Run::default()
        };
        let g = run.gain();
        assert!((g.explained - 0.5).abs() < 1e-9);
        assert!((g.share - 0.5).abs() < 1e-9, "{g:?}");
        assert!((g.high - 0.75).abs() < 1e-9, "{g:?}");
        assert!((g.low - 0.25).abs() < 1e-9, "{g:?}");
    }

    /// Peers' CPU grows with the program's; the background's takes CPUs
    /// until a fix sends it away.
    #[test]
    fn peers_scale_and_the_background_takes_cpus() {
        let mut run = Run {
            wall_ns: S,
            cpus: 2.0,
            peer_cpu_ns: 1.0 * S,
            threads: vec![
                Thread {
                    removed_cpu_ns: 0.5 * S,
                    ..worker(1, 1.0)
                },
                worker(2, 0.0),
            ],
            ..Run::default()
        };
        // Before: (1 + 1) / 2 = 1 s; after (0.5 + 0.5) / 2 = 0.5 s.
        assert!((run.gain().share - 0.5).abs() < 1e-9);
        run.peer_cpu_ns = 0.0;
        run.background_cpu_ns = 1.0 * S;
        // One CPU left: the thread's 1 s; freed, its chain: the same 1 s.
        run.threads[0].removed_cpu_ns = 0.0;
        run.frees_background = true;
        let g = run.gain();
        assert!(g.share.abs() < 1e-9, "{g:?}");
        // A starved thread (1 s of CPU in a 2 s run on 1 CPU with 1 CPU of
        // background): alone it takes its 1 s.
        let g = Run {
            wall_ns: 2.0 * S,
            cpus: 1.0,
            background_cpu_ns: 1.0 * S,
            frees_background: true,
            threads: vec![worker(1, 1.0)],
            ..Run::default()
        }
        .gain();
        assert!((g.high - 0.5).abs() < 1e-9, "{g:?}");
    }
}
