//! Sleep in time, in bounded memory. The timeline's contended waiting is
//! the sampled sleeps laid over the run's intervals. Kept as one (when it
//! ended, how long) per sample, that list grew by 16 bytes a sample for as
//! long as kerntax was attached: about 30 MiB an hour on a busy server
//! (issue 21). Here each sleep is laid over a grid of cells on
//! CLOCK_MONOTONIC as it arrives, each cell keeping exactly the time of the
//! sleeps within it; when there are more than `MAX_CELLS`, cells merge in
//! pairs (the grid's width doubles). Time is never lost, only blurred
//! within a cell, and a cell is no wider than the timeline's own intervals
//! until a run is long enough for the timeline to merge its own.

use std::collections::BTreeMap;

/// The grid's first width: the timeline's probe interval.
pub const FIRST_WIDTH_NS: u64 = 100_000_000;
/// Cells kept at most: more than the timeline's MAX_BUCKETS' worth of
/// intervals would use (it shows at most 1,000).
pub const MAX_CELLS: usize = 1024;

/// Sleep time by cell: cell `i` is `origin_ns + [i * width_ns, (i + 1) *
/// width_ns)`; the origin is the run's start, before which no sleep counts
/// (the part of a sleep that began before kerntax attached is not the
/// run's).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SpanCells {
    pub origin_ns: u64,
    pub width_ns: u64,
    pub cells: BTreeMap<u64, u64>,
}

impl Default for SpanCells {
    fn default() -> Self {
        SpanCells::from(0)
    }
}

impl SpanCells {
    /// No sleep yet, for a run that started at `origin_ns`.
    pub fn from(origin_ns: u64) -> SpanCells {
        SpanCells {
            origin_ns,
            width_ns: FIRST_WIDTH_NS,
            cells: BTreeMap::new(),
        }
    }

    /// A sleep of `len_ns` that ended at `end_ns`, laid over the cells.
    pub fn add(&mut self, end_ns: u64, len_ns: u64) {
        let end_ns = end_ns.saturating_sub(self.origin_ns);
        let from = end_ns.saturating_sub(len_ns);
        if end_ns <= from {
            return;
        }
        // One long sleep spans at most a quarter of the cells.
        while (end_ns - from) / self.width_ns > (MAX_CELLS / 4) as u64 {
            self.widen();
        }
        let w = self.width_ns;
        for i in from / w..=(end_ns - 1) / w {
            let (lo, hi) = (from.max(i * w), end_ns.min((i + 1) * w));
            *self.cells.entry(i).or_default() += hi - lo;
        }
        while self.cells.len() > MAX_CELLS {
            self.widen();
        }
    }

    /// Cells merged in pairs: the grid's width doubled.
    fn widen(&mut self) {
        let old = std::mem::take(&mut self.cells);
        for (i, ns) in old {
            *self.cells.entry(i / 2).or_default() += ns;
        }
        self.width_ns *= 2;
    }

    /// (cell start, width, sleep time) of each cell, CLOCK_MONOTONIC ns.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        let (w, o) = (self.width_ns, self.origin_ns);
        self.cells.iter().map(move |(&i, &ns)| (o + i * w, w, ns))
    }

    /// Total sleep time kept.
    #[cfg(test)]
    fn total_ns(&self) -> u64 {
        self.cells.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: u64 = FIRST_WIDTH_NS;

    #[test]
    fn a_sleep_is_split_exactly_over_the_cells_it_covers() {
        let mut s = SpanCells::default();
        // 200 ms ending 50 ms into cell 3: 50 of cell 1, all of 2, 50 of 3.
        s.add(3 * W + W / 2, 2 * W);
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            [(W, W, W / 2), (2 * W, W, W), (3 * W, W, W / 2)]
        );
        // A sleep ending on a cell's edge is all in the cell before it.
        let mut e = SpanCells::default();
        e.add(2 * W, W);
        assert_eq!(e.iter().collect::<Vec<_>>(), [(W, W, W)]);
        // Nothing for an empty sleep, or one "ending" at time 0.
        e.add(5 * W, 0);
        e.add(0, 7);
        assert_eq!(e.total_ns(), W);
    }

    /// Issue 21: a sample a millisecond for a simulated hour keeps at most
    /// MAX_CELLS cells and every nanosecond of sleep.
    #[test]
    fn memory_stays_bounded_and_time_exact_however_long_the_run() {
        let mut s = SpanCells::default();
        let (samples, gap) = (3_600_000u64, 1_000_000u64);
        for k in 1..=samples {
            s.add(k * gap, 300_000);
        }
        assert!(s.cells.len() <= MAX_CELLS, "{}", s.cells.len());
        assert_eq!(s.total_ns(), samples * 300_000);
        // An hour over at most 1,024 cells: 64 x 100 ms each.
        assert_eq!(s.width_ns, 64 * W);
        // Just at the bound, nothing merges; one cell past it, all do.
        let mut at = SpanCells::default();
        for i in 0..MAX_CELLS as u64 {
            at.add(i * W + 1, 1);
        }
        assert_eq!((at.cells.len(), at.width_ns), (MAX_CELLS, W));
        at.add(MAX_CELLS as u64 * W + 1, 1);
        assert_eq!((at.cells.len(), at.width_ns), (MAX_CELLS / 2 + 1, 2 * W));
    }

    /// Cells start at the run's start, and a sleep's part before it is
    /// not the run's.
    #[test]
    fn cells_start_at_the_runs_start() {
        let mut s = SpanCells::from(1_000 + 5);
        s.add(1_005 + W + 10, W + 30);
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            [(1_005, W, W), (1_005 + W, W, 10)]
        );
    }

    #[test]
    fn a_long_sleep_widens_the_grid_rather_than_fill_it() {
        let mut s = SpanCells::default();
        // An hour's sleep: 36,000 cells of 100 ms, a quarter of 1,024 at most.
        s.add(3_600 * 1_000_000_000, 3_600 * 1_000_000_000);
        assert!(s.cells.len() <= MAX_CELLS / 4 + 1, "{}", s.cells.len());
        assert_eq!(s.total_ns(), 3_600 * 1_000_000_000);
    }
}
