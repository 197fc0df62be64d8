//! Syscall latency from the calls the kernel timed (issue 21).
//!
//! In a storm the BPF hooks time one call in KT_TIME_PERIOD (syscalls.h):
//! two clock reads were most of what each call of a storm cost. Counts,
//! errors and bytes stay exact; the time spent and the latency histogram are
//! scaled here from the timed calls to all calls that returned, the
//! histogram so that its buckets still add up to the exact number of
//! returns. The report keeps how many were timed (`timed_calls`), so a
//! reader knows which figures are estimates.

use crate::model::SyscallCounters;

/// The time spent in a syscall's returned calls and their latency
/// histogram: measured when every call was timed, else scaled from the
/// timed ones (a uniform random subset of each CPU's calls past the first
/// KT_TIME_ALL).
pub fn estimate(c: &SyscallCounters) -> (u64, Vec<u64>) {
    if c.timed == 0 || c.timed >= c.returns {
        return (c.total_ns, c.hist_log2_ns.clone());
    }
    let total_ns = (u128::from(c.total_ns) * u128::from(c.returns) / u128::from(c.timed)) as u64;
    (total_ns, scale_hist(&c.hist_log2_ns, c.returns))
}

/// `hist` scaled to add up to `to` exactly: each bucket its share rounded
/// down, the remainder given one by one to the buckets that lost most to
/// rounding (largest remainder), so no bucket is invented or emptied.
fn scale_hist(hist: &[u64], to: u64) -> Vec<u64> {
    let from: u128 = hist.iter().map(|&v| u128::from(v)).sum();
    if from == 0 {
        return hist.to_vec();
    }
    let mut out = Vec::with_capacity(hist.len());
    let mut rests: Vec<(u128, usize)> = Vec::new();
    let mut given: u64 = 0;
    for (i, &v) in hist.iter().enumerate() {
        let exact = u128::from(v) * u128::from(to);
        let share = (exact / from) as u64;
        out.push(share);
        given += share;
        if v > 0 {
            rests.push((exact % from, i));
        }
    }
    rests.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, i) in rests.into_iter().take(to.saturating_sub(given) as usize) {
        out[i] += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(returns: u64, timed: u64, total_ns: u64, hist: &[u64]) -> SyscallCounters {
        SyscallCounters {
            returns,
            calls: returns,
            timed,
            total_ns,
            hist_log2_ns: hist.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn every_call_timed_is_reported_as_measured() {
        let c = counters(1_000, 1_000, 123_456, &[0, 10, 990]);
        assert_eq!(estimate(&c), (123_456, vec![0, 10, 990]));
    }

    #[test]
    fn one_in_sixteen_timed_is_scaled_to_all_returns() {
        // 1,600 returns, 100 timed: 100 x 500 ns measured.
        let c = counters(1_600, 100, 50_000, &[0, 0, 0, 0, 0, 0, 0, 0, 100]);
        let (total, hist) = estimate(&c);
        assert_eq!(total, 800_000);
        assert_eq!(hist, vec![0, 0, 0, 0, 0, 0, 0, 0, 1_600]);
    }

    #[test]
    fn a_scaled_histogram_adds_up_to_the_exact_returns() {
        let c = counters(1_000, 3, 3_000, &[1, 1, 1]);
        let (_, hist) = estimate(&c);
        assert_eq!(hist.iter().sum::<u64>(), 1_000);
        assert_eq!(hist, vec![334, 333, 333]);
    }

    #[test]
    fn no_bucket_is_emptied_or_invented() {
        let c = counters(10_007, 7, 7, &[5, 0, 1, 0, 1]);
        let (_, hist) = estimate(&c);
        assert_eq!(hist.iter().sum::<u64>(), 10_007);
        assert!(hist[0] > 0 && hist[2] > 0 && hist[4] > 0);
        assert_eq!((hist[1], hist[3]), (0, 0));
    }

    #[test]
    fn nothing_timed_is_left_as_counted() {
        let c = counters(5, 0, 0, &[]);
        assert_eq!(estimate(&c), (0, vec![]));
    }
}
