//! A profile that fits what a backend takes in one push. Grafana Pyroscope
//! refuses a profile over 4 MiB uncompressed or with more than 16,000
//! samples (`pkg/validation/limits.go`); Parca takes more, but one bound
//! serves both. When a window has more stacks, the smallest are merged
//! into one `[other stacks]` sample, so every type's total still matches
//! the report's, and the caller counts what was merged.

use prost::Message;

use super::{SAMPLE_TYPES, Stack, build};
use crate::report::Report;

/// The largest profile one push may hold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    pub max_samples: usize,
    /// Encoded, before gzip.
    pub max_bytes: usize,
}

impl Limits {
    /// Pyroscope's defaults, the tighter of the two backends.
    pub const PUSH: Limits = Limits {
        max_samples: 16_000,
        max_bytes: 4 << 20,
    };
}

/// The frame of the sample the smallest stacks are merged into.
pub const OTHER_STACKS: &str = "[other stacks]";

/// What fitting a profile in its limits cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Trimmed {
    /// Stacks merged into `OTHER_STACKS`.
    pub stacks_merged: u64,
    /// The encoded profile's size, before gzip.
    pub bytes: usize,
    /// Samples in the profile (the merged one included).
    pub samples: usize,
    /// The profile's total of each sample type, in `SAMPLE_TYPES` order
    /// (merging keeps them the report's).
    pub totals: [i64; SAMPLE_TYPES.len()],
}

/// Every type's total over `stacks`.
fn totals(stacks: &[Stack]) -> [i64; SAMPLE_TYPES.len()] {
    let mut totals = [0i64; SAMPLE_TYPES.len()];
    for s in stacks {
        for (t, v) in totals.iter_mut().zip(&s.value) {
            *t = t.saturating_add(*v);
        }
    }
    totals
}

/// Each stack's weight: its largest share of any type's total, so that the
/// heaviest stacks of every type are kept, not just those of the type with
/// the largest numbers.
fn weights(stacks: &[Stack], totals: &[i64]) -> Vec<f64> {
    stacks
        .iter()
        .map(|s| {
            s.value
                .iter()
                .zip(totals)
                .map(|(&v, &t)| if t > 0 { v as f64 / t as f64 } else { 0.0 })
                .fold(0.0, f64::max)
        })
        .collect()
}

/// The `keep` heaviest stacks in their order, and the rest summed into one.
fn select(stacks: &[Stack], weights: &[f64], keep: usize) -> Vec<Stack> {
    if stacks.len() <= keep {
        return stacks.to_vec();
    }
    // Room for the merged sample.
    let keep = keep.saturating_sub(1);
    let mut order: Vec<usize> = (0..stacks.len()).collect();
    order.sort_by(|&a, &b| weights[b].total_cmp(&weights[a]).then(a.cmp(&b)));
    let mut kept = vec![false; stacks.len()];
    for &i in &order[..keep] {
        kept[i] = true;
    }
    let mut other = vec![0i64; SAMPLE_TYPES.len()];
    let mut out = Vec::with_capacity(keep + 1);
    for (s, k) in stacks.iter().zip(kept) {
        if k {
            out.push(s.clone());
        } else {
            for (o, v) in other.iter_mut().zip(&s.value) {
                *o = o.saturating_add(*v);
            }
        }
    }
    out.push(Stack {
        frames: vec![OTHER_STACKS.to_string()],
        value: other,
    });
    out
}

/// `r`'s profile encoded (not compressed) within `limits`, with `comments`.
pub fn encode_within(r: &Report, limits: Limits, comments: &[String]) -> (Vec<u8>, Trimmed) {
    let all = super::stacks(r);
    let totals = totals(&all);
    let w = weights(&all, &totals);
    let mut keep = limits.max_samples.max(1);
    loop {
        let chosen = select(&all, &w, keep);
        // The merged sample stands for the rest.
        let merged = if all.len() <= keep {
            0
        } else {
            (all.len() + 1 - chosen.len()) as u64
        };
        let mut notes = comments.to_vec();
        if merged > 0 {
            notes.push(format!(
                "kerntax: the {merged} smallest of {} stacks are merged into {OTHER_STACKS}",
                all.len()
            ));
        }
        let raw = build(r, &chosen, &notes).encode_to_vec();
        if raw.len() <= limits.max_bytes || keep <= 1 {
            let trimmed = Trimmed {
                stacks_merged: merged,
                bytes: raw.len(),
                samples: chosen.len(),
                totals,
            };
            return (raw, trimmed);
        }
        // Shrink in proportion, with a margin for the tables' share.
        let ratio = limits.max_bytes as f64 / raw.len() as f64;
        keep = ((chosen.len() as f64 * ratio * 0.9) as usize).clamp(1, keep - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::build::{build as build_report, tests::sample_inputs};
    use crate::render::pprof::Profile;
    use crate::report::{CpuProfile, FoldedStack};

    /// A report with `n` on-CPU stacks of distinct frames, stack i seen
    /// i + 1 times.
    fn report_with_stacks(n: usize) -> Report {
        let mut r = build_report(sample_inputs());
        r.cpu_samples = CpuProfile {
            frequency_hz: 100,
            folded: (0..n)
                .map(|i| FoldedStack {
                    frames: vec!["main (m.c:1)".into(), format!("leaf_{i} (m.c:{i})").into()],
                    count: i as u64 + 1,
                    threads: vec![],
                })
                .collect(),
            ..r.cpu_samples.clone()
        };
        r.syscalls.clear();
        r.locks.clear();
        r.offcpu.clear();
        r
    }

    fn decode(raw: &[u8]) -> Profile {
        Profile::decode(raw).unwrap()
    }

    fn total(p: &Profile, t: usize) -> i64 {
        p.sample.iter().map(|s| s.value[t]).sum()
    }

    #[test]
    fn a_profile_at_the_sample_limit_is_kept_whole() {
        let limits = Limits {
            max_samples: 50,
            max_bytes: 1 << 20,
        };
        let (raw, t) = encode_within(&report_with_stacks(50), limits, &[]);
        let p = decode(&raw);
        assert_eq!(p.sample.len(), 50);
        assert_eq!(t.stacks_merged, 0);
        assert_eq!(t.bytes, raw.len());
        assert_eq!(t.totals[0], 50 * 51 / 2);
    }

    #[test]
    fn one_stack_over_the_limit_merges_the_two_smallest() {
        let limits = Limits {
            max_samples: 50,
            max_bytes: 1 << 20,
        };
        let r = report_with_stacks(51);
        let (raw, t) = encode_within(&r, limits, &[]);
        let p = decode(&raw);
        assert_eq!(p.sample.len(), 50);
        assert_eq!(t.stacks_merged, 2);
        // Totals are the report's: 1 + 2 + ... + 51 samples.
        assert_eq!(total(&p, 0), 51 * 52 / 2);
        let other = p.sample.last().unwrap();
        let loc = &p.location[other.location_id[0] as usize - 1];
        let f = &p.function[loc.line[0].function_id as usize - 1];
        assert_eq!(p.string_table[f.name as usize], OTHER_STACKS);
        assert_eq!(other.value[0], 1 + 2);
    }

    #[test]
    fn a_profile_over_the_byte_limit_shrinks_below_it() {
        let r = report_with_stacks(2000);
        let whole = encode_within(&r, Limits::PUSH, &[]).0.len();
        let limits = Limits {
            max_samples: 16_000,
            max_bytes: whole / 3,
        };
        let (raw, t) = encode_within(&r, limits, &[]);
        assert!(raw.len() <= whole / 3, "{} > {}", raw.len(), whole / 3);
        assert!(t.stacks_merged > 1000, "{t:?}");
        assert_eq!(total(&decode(&raw), 0), 2000 * 2001 / 2);
    }

    #[test]
    fn every_type_keeps_its_heaviest_stack() {
        // One small-valued type (syscalls) beside large cpu numbers: its
        // one stack must survive a cut to 2 samples.
        let mut r = report_with_stacks(5);
        let sample = build_report(sample_inputs());
        // getppid's heavier call site.
        r.syscalls = vec![sample.syscalls[1].clone()];
        r.syscalls[0].callsites.truncate(1);
        let limits = Limits {
            max_samples: 3,
            max_bytes: 1 << 20,
        };
        let (raw, _) = encode_within(&r, limits, &[]);
        let p = decode(&raw);
        assert_eq!(p.sample.len(), 3);
        assert!(p.sample[..2].iter().any(|s| s.value[2] > 0));
        assert!(p.sample[..2].iter().any(|s| s.value[0] == 5));
    }
}
