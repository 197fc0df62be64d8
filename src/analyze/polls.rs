//! I/O multiplexing efficiency: exact per (process, syscall) from the
//! kernel's counters, and per call site from weighted samples.

use std::collections::BTreeMap;

use crate::analyze::aggregate::estimate_sites;
use crate::model::PollCounters;
use crate::names::syscall_name;
use crate::report::{PollReport, PollSite};
use crate::tally::PollTally;

const MAX_SITES: usize = 10;

/// A symbolized call site's tally: (pid, syscall nr, frames, tally).
pub type PollSiteTally = (u32, u32, Vec<crate::frame::Frame>, PollTally);

fn per(n: u128, d: u64) -> f64 {
    if d == 0 { 0.0 } else { n as f64 / d as f64 }
}

pub fn build(
    counters: &[PollCounters],
    sites: &[PollSiteTally],
    duration_ns: u64,
) -> Vec<PollReport> {
    let mut out: Vec<PollReport> = counters
        .iter()
        .map(|c| {
            let mut merged: BTreeMap<&[crate::frame::Frame], PollTally> = BTreeMap::new();
            for (_, _, frames, t) in sites.iter().filter(|s| s.0 == c.pid && s.1 == c.nr) {
                let e = merged.entry(frames).or_default();
                e.weight += t.weight;
                e.weighted_fds += t.weighted_fds;
                e.weighted_ready += t.weighted_ready;
                e.samples += t.samples;
            }
            let list: Vec<_> = merged
                .iter()
                .map(|(k, t)| (*k, t.weight, t.samples))
                .collect();
            let mut callsites: Vec<PollSite> = estimate_sites(c.calls, &list)
                .into_iter()
                .map(|s| {
                    let t = &merged[s.key];
                    PollSite {
                        frames: s.key.to_vec(),
                        calls: s.calls,
                        fds_per_call: per(t.weighted_fds, t.weight),
                        ready_per_call: per(t.weighted_ready, t.weight),
                        samples: s.samples,
                        estimated: s.estimated,
                    }
                })
                .collect();
            callsites.truncate(MAX_SITES);
            let fds_per_call = per(c.fds as u128, c.calls);
            let ready_per_call = per(c.ready as u128, c.calls);
            PollReport {
                pid: c.pid,
                syscall: syscall_name(c.nr),
                calls: c.calls,
                fds_per_call,
                max_fds: c.max_fds,
                ready_per_call,
                ready_ratio: (fds_per_call > 0.0).then(|| ready_per_call / fds_per_call),
                timeouts: c.timeouts,
                errors: c.errors,
                calls_per_s: per(c.calls as u128 * 1_000_000_000, duration_ns),
                total_ns: c.total_ns,
                cpu_ns: c.cpu_ns,
                callsites,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.cpu_ns
            .cmp(&a.cpu_ns)
            .then(a.pid.cmp(&b.pid))
            .then(a.syscall.cmp(&b.syscall))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_per_call_figures_and_weighted_sites() {
        let poll = crate::names::syscall_nr("poll").unwrap();
        let c = PollCounters {
            pid: 9,
            nr: poll,
            calls: 200,
            fds: 200_000,
            max_fds: 1000,
            ready: 200,
            timeouts: 3,
            cpu_ns: 5,
            ..Default::default()
        };
        let t = |w: u64, fds: u128, ready: u128| PollTally {
            weight: w,
            weighted_fds: w as u128 * fds,
            weighted_ready: w as u128 * ready,
            samples: 1,
        };
        let sites = vec![
            (9, poll, vec!["loop_a".into()], t(150, 1000, 1)),
            (9, poll, vec!["loop_b".into()], t(50, 1000, 1)),
        ];
        let out = build(&[c], &sites, 2_000_000_000);
        let r = &out[0];
        assert_eq!(
            (r.syscall.as_str(), r.calls, r.max_fds, r.timeouts),
            ("poll", 200, 1000, 3)
        );
        assert_eq!((r.fds_per_call, r.ready_per_call), (1000.0, 1.0));
        assert_eq!(r.ready_ratio, Some(0.001));
        assert_eq!(r.calls_per_s, 100.0);
        assert_eq!(
            r.callsites
                .iter()
                .map(|s| (s.frames[0].as_str(), s.calls))
                .collect::<Vec<_>>(),
            vec![("loop_a", 150), ("loop_b", 50)]
        );
        assert_eq!(r.callsites[0].fds_per_call, 1000.0);
    }
}
