//! Turning raw kernel counters into the figures a report shows: per-thread
//! deltas over the profiled window, the user/system split, and call-site
//! counts estimated from weighted stack samples. Pure functions only.

use crate::fixed_hash::HashMap;

use crate::model::ThreadCounters;

/// Splits exact on-CPU time by the ratio of the tick-sampled user and system
/// times, as the kernel does for /proc (cputime_adjust): ticks are only a
/// sample, `runtime_ns` is the truth.
pub fn cpu_split(utime_ns: u64, stime_ns: u64, runtime_ns: u64) -> (u64, u64) {
    let ticks = utime_ns as u128 + stime_ns as u128;
    if stime_ns == 0 {
        return (runtime_ns, 0);
    }
    if utime_ns == 0 {
        return (0, runtime_ns);
    }
    let sys = (runtime_ns as u128 * stime_ns as u128 / ticks) as u64;
    (runtime_ns - sys, sys)
}

pub use crate::model::ThreadUsage;

/// Usage of every thread seen, from its final counters (at exit, or live at
/// the end) minus its counters when profiling began. Also returns how many
/// threads present at the start vanished without a final record.
pub fn thread_usage(
    baseline: &[ThreadCounters],
    exited: &[ThreadCounters],
    live: &[ThreadCounters],
) -> (Vec<ThreadUsage>, u64) {
    let start: HashMap<_, _> = baseline.iter().map(|t| (t.key(), t)).collect();
    let mut finals: HashMap<_, &ThreadCounters> = live.iter().map(|t| (t.key(), t)).collect();
    for t in exited {
        finals.insert(t.key(), t); // an exit record is the later one
    }
    let lost = start.keys().filter(|k| !finals.contains_key(*k)).count() as u64;
    let mut out: Vec<ThreadUsage> = finals
        .values()
        .map(|end| {
            let zero = ThreadCounters::default();
            let begin = start.get(&end.key()).copied().unwrap_or(&zero);
            let (user_ns, sys_ns) = cpu_split(
                end.utime_ns.saturating_sub(begin.utime_ns),
                end.stime_ns.saturating_sub(begin.stime_ns),
                end.runtime_ns.saturating_sub(begin.runtime_ns),
            );
            ThreadUsage {
                tid: end.tid,
                pid: end.pid,
                ppid: end.ppid,
                comm: end.comm.clone(),
                user_ns,
                sys_ns,
                voluntary_switches: end
                    .voluntary_switches
                    .saturating_sub(begin.voluntary_switches),
                involuntary_switches: end
                    .involuntary_switches
                    .saturating_sub(begin.involuntary_switches),
                yields: end.yields.saturating_sub(begin.yields),
                syscalls: end.syscalls.saturating_sub(begin.syscalls),
                exited: end.exited,
                exit_code: end.exit_code,
            }
        })
        .collect();
    out.sort_by_key(|t| (t.pid, t.tid));
    (out, lost)
}

/// A call site's share of a syscall's calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteCount<K> {
    pub key: K,
    pub calls: u64,
    pub samples: u64,
    /// False only when every call was sampled, so `calls` is a count.
    pub estimated: bool,
}

/// Distributes a syscall's exact call count over its call sites in proportion
/// to their sample weights (each sample weighs its sampling period), so the
/// sites add up to the exact total. `sites`: (key, summed weight, samples).
pub fn estimate_sites<K: Clone + Ord>(
    exact_calls: u64,
    sites: &[(K, u64, u64)],
) -> Vec<SiteCount<K>> {
    let total_weight: u64 = sites.iter().map(|s| s.1).sum();
    let total_samples: u64 = sites.iter().map(|s| s.2).sum();
    if total_weight == 0 {
        return vec![];
    }
    let complete = total_samples == exact_calls && total_weight == exact_calls;
    // Largest remainder: floor shares, then hand out the rest by remainder.
    let mut shares: Vec<(u64, u128, usize)> = sites
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let exact = s.1 as u128 * exact_calls as u128;
            (
                (exact / total_weight as u128) as u64,
                exact % total_weight as u128,
                i,
            )
        })
        .collect();
    let assigned: u64 = shares.iter().map(|s| s.0).sum();
    let mut rest = exact_calls - assigned;
    shares.sort_by(|a, b| b.1.cmp(&a.1).then(sites[a.2].0.cmp(&sites[b.2].0)));
    for s in shares.iter_mut() {
        if rest == 0 {
            break;
        }
        s.0 += 1;
        rest -= 1;
    }
    let mut out: Vec<SiteCount<K>> = shares
        .into_iter()
        .map(|(calls, _, i)| SiteCount {
            key: sites[i].0.clone(),
            calls,
            samples: sites[i].2,
            estimated: !complete,
        })
        .collect();
    out.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.key.cmp(&b.key)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_split_follows_tick_ratio_and_keeps_exact_total() {
        assert_eq!(cpu_split(4_000_000, 12_000_000, 100), (25, 75));
        assert_eq!(cpu_split(0, 0, 1000), (1000, 0));
        assert_eq!(cpu_split(0, 8, 1000), (0, 1000));
        let (u, s) = cpu_split(3, 7, 1_000_000_007);
        assert_eq!(u + s, 1_000_000_007);
    }

    fn counters(
        tid: u32,
        start: u64,
        utime: u64,
        stime: u64,
        runtime: u64,
        vol: u64,
    ) -> ThreadCounters {
        ThreadCounters {
            pid: 1,
            tid,
            start_ns: start,
            utime_ns: utime,
            stime_ns: stime,
            runtime_ns: runtime,
            voluntary_switches: vol,
            ..Default::default()
        }
    }

    #[test]
    fn thread_usage_subtracts_the_baseline_of_the_same_thread_only() {
        let baseline = [counters(10, 5, 4, 4, 100, 7), counters(11, 6, 0, 0, 0, 0)];
        let mut exited = counters(10, 5, 8, 12, 300, 10);
        exited.exited = true;
        // tid 12 reuses nothing; tid 11 vanished without an exit record.
        let live = [counters(12, 9, 10, 0, 50, 2), counters(10, 5, 6, 6, 200, 8)];
        let (threads, lost) = thread_usage(&baseline, &[exited], &live);
        assert_eq!(lost, 1);
        assert_eq!(threads.len(), 2);
        let t10 = &threads[0];
        assert_eq!((t10.tid, t10.exited, t10.voluntary_switches), (10, true, 3));
        assert_eq!(t10.user_ns + t10.sys_ns, 200);
        assert_eq!((t10.user_ns, t10.sys_ns), (67, 133)); // tick deltas 4:8 of 200 ns
        assert_eq!(
            (threads[1].tid, threads[1].user_ns, threads[1].sys_ns),
            (12, 50, 0)
        );
    }

    #[test]
    fn fully_sampled_sites_are_exact_counts() {
        let sites = [("a", 30, 30), ("b", 12, 12)];
        let out = estimate_sites(42, &sites);
        assert_eq!(
            out.iter()
                .map(|s| (s.key, s.calls, s.estimated))
                .collect::<Vec<_>>(),
            vec![("a", 30, false), ("b", 12, false)]
        );
    }

    #[test]
    fn weighted_sites_scale_to_the_exact_total_and_are_marked_estimated() {
        // 2,000,000 calls; samples of weight 1..64 summing to 1,999,000.
        let sites = [("hot", 1_989_000, 400), ("cold", 10_000, 20)];
        let out = estimate_sites(2_000_000, &sites);
        assert_eq!(out.iter().map(|s| s.calls).sum::<u64>(), 2_000_000);
        assert_eq!(out[0].key, "hot");
        assert_eq!(out[0].calls, 1_989_995); // 1,989,000 * 2,000,000 / 1,999,000 = 1,989,994.997
        assert_eq!(out[1].calls, 10_005);
        assert!(out.iter().all(|s| s.estimated));
    }

    #[test]
    fn a_single_site_gets_every_call() {
        let out = estimate_sites(1_000_000, &[("only", 999_936, 1000)]);
        assert_eq!((out[0].calls, out[0].estimated), (1_000_000, true));
        assert!(estimate_sites::<&str>(5, &[]).is_empty());
    }
}
