//! The run over time: user and system CPU, context switches, syscalls and
//! lock wait per interval (the plot of the Icinga 2 story), from probes of
//! the target's running totals taken as profiling goes.
//!
//! CPU time comes from the threads' own counters (live ones through the
//! task iterator, exited ones from totals kept at their exit), so a thread
//! that never leaves the CPU still shows up in every interval.

use crate::analyze::aggregate::cpu_split;
use crate::model::{ThreadCounters, Totals};
use crate::report::{Timeline, TimelineBucket};

/// Intervals kept in a report; longer runs are merged down to this.
const MAX_BUCKETS: usize = 1000;

/// The target's cumulative counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Probe {
    /// Since profiling started.
    pub t_ns: u64,
    pub totals: Totals,
    pub runtime_ns: u64,
    pub utime_ns: u64,
    pub stime_ns: u64,
}

impl Probe {
    pub fn new(t_ns: u64, totals: Totals, live: &[ThreadCounters]) -> Probe {
        Probe {
            t_ns,
            totals,
            runtime_ns: totals.exited_runtime_ns + live.iter().map(|t| t.runtime_ns).sum::<u64>(),
            utime_ns: totals.exited_utime_ns + live.iter().map(|t| t.utime_ns).sum::<u64>(),
            stime_ns: totals.exited_stime_ns + live.iter().map(|t| t.stime_ns).sum::<u64>(),
        }
    }
}

/// A run's probes, thinned as they come (issue 21): one every 100 ms made
/// a long attach grow without bound, while a report keeps MAX_BUCKETS
/// intervals. Every `stride`-th probe is kept (the counters are cumulative,
/// so an interval between kept probes sums the dropped ones) and the
/// latest, wherever it falls; past 2 x MAX_BUCKETS kept, every other one
/// goes and the stride doubles.
#[derive(Clone, Debug, Default)]
pub struct Probes {
    kept: Vec<Probe>,
    latest: Option<Probe>,
    stride: usize,
    seen: usize,
}

impl Probes {
    pub fn push(&mut self, p: Probe) {
        let stride = self.stride.max(1);
        if self.seen.is_multiple_of(stride) {
            self.kept.push(p);
            self.latest = None;
        } else {
            self.latest = Some(p);
        }
        self.seen += 1;
        if self.kept.len() > 2 * MAX_BUCKETS {
            // An odd count, ending with a kept probe: the even places stay.
            let mut i = 0;
            self.kept.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.stride = stride * 2;
        }
    }

    /// Probes held: at most 2 x MAX_BUCKETS + 1, and the latest.
    pub fn len(&self) -> usize {
        self.kept.len() + usize::from(self.latest.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The timeline of the probes held, each `interval_ns` apart as taken.
    pub fn timeline(&self, interval_ns: u64) -> Timeline {
        let all: Vec<Probe> = self.kept.iter().chain(&self.latest).copied().collect();
        let mut t = build(interval_ns, &all);
        t.interval_ns *= self.stride.max(1) as u64;
        t
    }
}

fn bucket(a: &Probe, b: &Probe) -> TimelineBucket {
    let (user_ns, sys_ns) = cpu_split(
        b.utime_ns.saturating_sub(a.utime_ns),
        b.stime_ns.saturating_sub(a.stime_ns),
        b.runtime_ns.saturating_sub(a.runtime_ns),
    );
    TimelineBucket {
        t_ns: a.t_ns,
        duration_ns: b.t_ns - a.t_ns,
        user_ns,
        sys_ns,
        voluntary_switches: b
            .totals
            .voluntary_switches
            .saturating_sub(a.totals.voluntary_switches),
        involuntary_switches: b
            .totals
            .involuntary_switches
            .saturating_sub(a.totals.involuntary_switches),
        syscalls: b.totals.syscalls.saturating_sub(a.totals.syscalls),
        // Known once the wait sites are classed: see `contended`.
        lock_wait_ns: 0,
    }
}

/// The intervals between consecutive probes, merged down to MAX_BUCKETS.
pub fn build(interval_ns: u64, probes: &[Probe]) -> Timeline {
    let mut step = 1;
    while probes.len().saturating_sub(1).div_ceil(step) > MAX_BUCKETS {
        step *= 2;
    }
    let kept: Vec<&Probe> = probes
        .iter()
        .step_by(step)
        .chain(
            probes
                .last()
                .filter(|_| !(probes.len() - 1).is_multiple_of(step)),
        )
        .collect();
    Timeline {
        interval_ns: interval_ns * step as u64,
        buckets: kept.windows(2).map(|w| bucket(w[0], w[1])).collect(),
    }
}

/// Each interval's waiting at the sites the wait analysis found contended,
/// whatever the form of the wait (a futex word, a SysV semaphore, a
/// per-waiter parker, a latch read from a pipe or waited for in epoll):
/// `cells` are the sampled sleeps there in time, (a cell's start,
/// CLOCK_MONOTONIC ns; its width; the sleep within it, scaled to the exact
/// counters: `crate::spans`), each laid evenly over the intervals it
/// covers. `start_ns` is profiling's start on the same clock.
pub fn contended(timeline: &mut Timeline, start_ns: u64, cells: &[(u64, u64, f64)]) {
    let b = &mut timeline.buckets;
    let Some(last) = b.last() else { return };
    let end_ns = (last.t_ns + last.duration_ns) as f64;
    let mut per = vec![0.0f64; b.len()];
    for &(at, width, ns) in cells {
        let cell_from = at as f64 - start_ns as f64;
        let cell_to = cell_from + width as f64;
        let (from, to) = (cell_from.max(0.0), cell_to.min(end_ns));
        if to <= from || width == 0 {
            continue;
        }
        // The sleep is spread evenly over the cell's part within the run:
        // cells begin at the run's start (sleep before it was left out as
        // it came), and the last may reach past the last probe, yet its
        // sleep ended within the run the wait sites total.
        let density = ns / (to - from);
        // The first interval that ends after `from`.
        let mut i = b.partition_point(|x| ((x.t_ns + x.duration_ns) as f64) <= from);
        while i < b.len() && (b[i].t_ns as f64) < to {
            let lo = from.max(b[i].t_ns as f64);
            let hi = to.min((b[i].t_ns + b[i].duration_ns) as f64);
            per[i] += (hi - lo).max(0.0) * density;
            i += 1;
        }
    }
    for (x, ns) in b.iter_mut().zip(per) {
        x.lock_wait_ns = ns.round() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(t_ns: u64, syscalls: u64, runtime: u64, utime: u64, stime: u64) -> Probe {
        Probe {
            t_ns,
            totals: Totals {
                syscalls,
                ..Default::default()
            },
            runtime_ns: runtime,
            utime_ns: utime,
            stime_ns: stime,
        }
    }

    #[test]
    fn buckets_are_the_differences_between_probes() {
        let probes = [
            probe(0, 0, 0, 0, 0),
            probe(100, 50, 80, 4, 4),
            probe(200, 60, 100, 8, 4),
        ];
        let t = build(100, &probes);
        assert_eq!(t.interval_ns, 100);
        assert_eq!(t.buckets.len(), 2);
        assert_eq!(
            (
                t.buckets[0].t_ns,
                t.buckets[0].syscalls,
                t.buckets[0].user_ns,
                t.buckets[0].sys_ns
            ),
            (0, 50, 40, 40)
        );
        assert_eq!(
            (
                t.buckets[1].t_ns,
                t.buckets[1].syscalls,
                t.buckets[1].user_ns,
                t.buckets[1].sys_ns
            ),
            (100, 10, 20, 0)
        );
    }

    #[test]
    fn live_and_exited_threads_both_count() {
        let live = [ThreadCounters {
            runtime_ns: 30,
            utime_ns: 4,
            ..Default::default()
        }];
        let p = Probe::new(
            5,
            Totals {
                exited_runtime_ns: 70,
                exited_stime_ns: 4,
                ..Default::default()
            },
            &live,
        );
        assert_eq!((p.runtime_ns, p.utime_ns, p.stime_ns), (100, 4, 4));
    }

    #[test]
    fn contended_sleeps_are_laid_over_the_intervals_they_cover() {
        let probes: Vec<Probe> = (0..4).map(|i| probe(i * 100, 0, 0, 0, 0)).collect();
        let mut t = build(100, &probes);
        // Started at 1000: a sleep over 1050..1250 (two and a half
        // intervals) and one over 1000..1030, each in a cell of its own
        // length.
        contended(&mut t, 1000, &[(1050, 200, 200.0), (1000, 30, 30.0)]);
        let got: Vec<u64> = t.buckets.iter().map(|b| b.lock_wait_ns).collect();
        assert_eq!(got, vec![50 + 30, 100, 50]);
        // A cell wider than the sleep in it spreads it evenly: 60 ns in a
        // 200 ns cell over the first two intervals, 30 each; a cell past
        // the last probe keeps its sleep within the run.
        let mut t = build(100, &probes);
        contended(&mut t, 1000, &[(1000, 200, 60.0), (1250, 100, 40.0)]);
        let got: Vec<u64> = t.buckets.iter().map(|b| b.lock_wait_ns).collect();
        assert_eq!(got, vec![30, 30, 40]);
    }

    /// Issue 21: an hour's probes (36,000) are not all held, and the
    /// timeline they make is the one all of them would make.
    #[test]
    fn probes_are_thinned_as_they_come_without_changing_the_timeline() {
        let all: Vec<Probe> = (0..36_001)
            .map(|i| probe(i * 100, i * 3, i, 0, 0))
            .collect();
        let mut held = Probes::default();
        for p in &all {
            held.push(*p);
            assert!(held.len() <= 2 * MAX_BUCKETS + 2, "{}", held.len());
        }
        let (thin, full) = (held.timeline(100), build(100, &all));
        assert!(thin.buckets.len() <= MAX_BUCKETS, "{}", thin.buckets.len());
        let sum = |t: &Timeline| t.buckets.iter().map(|b| b.syscalls).sum::<u64>();
        assert_eq!((sum(&thin), sum(&full)), (108_000, 108_000));
        let end = |t: &Timeline| {
            let b = t.buckets.last().unwrap();
            b.t_ns + b.duration_ns
        };
        assert_eq!((end(&thin), end(&full)), (3_600_000, 3_600_000));
        assert_eq!(thin.interval_ns, full.interval_ns);
    }

    /// A run of up to 2 x MAX_BUCKETS probes keeps them all; one more
    /// halves them, keeping the first and the last.
    #[test]
    fn probes_are_thinned_only_past_twice_the_buckets() {
        let mut held = Probes::default();
        for i in 0..2 * MAX_BUCKETS as u64 {
            held.push(probe(i * 100, i, 0, 0, 0));
        }
        assert_eq!(held.len(), 2 * MAX_BUCKETS);
        held.push(probe(2 * MAX_BUCKETS as u64 * 100, 0, 0, 0, 0));
        assert_eq!(held.len(), MAX_BUCKETS + 1);
        let t = held.timeline(100);
        assert_eq!(t.buckets.first().unwrap().t_ns, 0);
        let last = t.buckets.last().unwrap();
        assert_eq!(last.t_ns + last.duration_ns, 200_000);
    }

    #[test]
    fn long_runs_are_merged_down() {
        let probes: Vec<Probe> = (0..2501).map(|i| probe(i * 100, i, 0, 0, 0)).collect();
        let t = build(100, &probes);
        assert!(t.buckets.len() <= MAX_BUCKETS, "{}", t.buckets.len());
        assert_eq!(t.interval_ns, 400);
        assert_eq!(t.buckets.iter().map(|b| b.syscalls).sum::<u64>(), 2500);
        assert_eq!(
            t.buckets.last().unwrap().t_ns + t.buckets.last().unwrap().duration_ns,
            250_000
        );
    }
}
