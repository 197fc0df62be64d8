//! On-CPU profile and spinning: from sampled user and kernel stacks to
//! folded stacks, per-function user/kernel split, and the CPU burned at
//! spin-wait loops.

use std::collections::{BTreeMap, HashSet};

use crate::analyze::aggregate::ThreadUsage;
use crate::report::{CpuFunction, CpuProfile, FoldedStack, SpinReport, ThreadYields};

/// Functions and stacks kept.
const MAX_FUNCTIONS: usize = 50;
const MAX_FOLDED: usize = 500;
const MAX_SPIN_STACKS: usize = 10;

/// Symbolized on-CPU samples from one user and kernel stack.
pub struct CpuSite {
    pub tid: u32,
    pub in_kernel: bool,
    pub spinning: bool,
    /// Just after a compare-and-swap in user code.
    pub after_cas: bool,
    /// The innermost user frame is the program's (not in the C runtime's
    /// libraries, whose lock fast paths make one CAS, not a loop).
    pub own_code: bool,
    /// Innermost first.
    pub user_frames: Vec<String>,
    /// Innermost first; empty for a user-mode sample.
    pub kernel_frames: Vec<String>,
    pub samples: u64,
}

pub use crate::stacks::frame::function;

/// Outermost first: the user stack, then the kernel stack under it.
fn folded(site: &CpuSite) -> Vec<String> {
    site.user_frames
        .iter()
        .rev()
        .chain(site.kernel_frames.iter().rev())
        .cloned()
        .collect()
}

fn fold(sites: impl Iterator<Item = (Vec<String>, u64)>, max: usize) -> Vec<FoldedStack> {
    let mut merged: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for (frames, n) in sites {
        *merged.entry(frames).or_default() += n;
    }
    let mut out: Vec<FoldedStack> = merged
        .into_iter()
        .map(|(frames, count)| FoldedStack { frames, count })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then(a.frames.cmp(&b.frames)));
    out.truncate(max);
    out
}

pub fn profile(sites: &[CpuSite], hz: u64) -> CpuProfile {
    let mut functions: BTreeMap<String, CpuFunction> = BTreeMap::new();
    let (mut user, mut kernel) = (0, 0);
    for s in sites {
        if s.in_kernel {
            kernel += s.samples;
        } else {
            user += s.samples;
        }
        let innermost = if s.in_kernel {
            s.kernel_frames.first()
        } else {
            s.user_frames.first()
        }
        .or(s.user_frames.first());
        let entry = |functions: &mut BTreeMap<String, CpuFunction>, name: &str| {
            functions
                .entry(name.to_string())
                .or_insert_with(|| CpuFunction {
                    name: name.to_string(),
                    self_user: 0,
                    self_kernel: 0,
                    total: 0,
                })
                .total
        };
        if let Some(f) = innermost {
            let name = function(f).to_string();
            entry(&mut functions, &name);
            let e = functions.get_mut(&name).expect("just added");
            if s.in_kernel && !s.kernel_frames.is_empty() {
                e.self_kernel += s.samples;
            } else {
                e.self_user += s.samples;
            }
        }
        // Counted once per sample however often it recurses.
        let mut seen = HashSet::new();
        for f in s.kernel_frames.iter().chain(&s.user_frames) {
            let name = function(f);
            if seen.insert(name) {
                entry(&mut functions, name);
                functions.get_mut(name).expect("just added").total += s.samples;
            }
        }
    }
    let mut functions: Vec<CpuFunction> = functions.into_values().collect();
    functions.sort_by(|a, b| {
        (b.self_user + b.self_kernel)
            .cmp(&(a.self_user + a.self_kernel))
            .then(b.total.cmp(&a.total))
            .then(a.name.cmp(&b.name))
    });
    functions.truncate(MAX_FUNCTIONS);
    CpuProfile {
        frequency_hz: hz,
        samples: user + kernel,
        user_samples: user,
        kernel_samples: kernel,
        folded: fold(sites.iter().map(|s| (folded(s), s.samples)), MAX_FOLDED),
        functions,
    }
}

/// A function where at least this share of the user samples in it land
/// just after a compare-and-swap retries it in a loop: a spin lock that
/// never pauses (the CAS instruction is the slow one in such a loop, so
/// the samples gather behind it), not code that makes a CAS now and then.
pub const MIN_CAS_SHARE: f64 = 0.3;
/// ... with at least this many such samples,
pub const MIN_CAS_SAMPLES: u64 = 10;
/// ... from at least this many threads: spinning is contending.
pub const MIN_CAS_THREADS: usize = 2;

/// Functions that spin on a compare-and-swap (see MIN_CAS_SHARE).
fn cas_spinners(sites: &[CpuSite]) -> HashSet<String> {
    // function -> (samples after a CAS, user samples, threads after a CAS)
    let mut by_fn: BTreeMap<&str, (u64, u64, HashSet<u32>)> = BTreeMap::new();
    for s in sites.iter().filter(|s| !s.in_kernel && s.own_code) {
        let Some(f) = s.user_frames.first() else {
            continue;
        };
        let e = by_fn.entry(function(f)).or_default();
        e.1 += s.samples;
        if s.after_cas {
            e.0 += s.samples;
            e.2.insert(s.tid);
        }
    }
    by_fn
        .into_iter()
        .filter(|(_, (cas, all, threads))| {
            *cas >= MIN_CAS_SAMPLES
                && *cas as f64 >= MIN_CAS_SHARE * *all as f64
                && threads.len() >= MIN_CAS_THREADS
        })
        .map(|(f, _)| f.to_string())
        .collect()
}

pub fn spin(sites: &[CpuSite], threads: &[ThreadUsage], duration_ns: u64) -> SpinReport {
    let all: u64 = sites.iter().map(|s| s.samples).sum();
    let cas = cas_spinners(sites);
    let cas_spin = |s: &CpuSite| {
        !s.spinning
            && s.after_cas
            && !s.in_kernel
            && s.user_frames
                .first()
                .is_some_and(|f| cas.contains(function(f)))
    };
    let spins = |s: &CpuSite| s.spinning || cas_spin(s);
    let spin_samples: u64 = sites.iter().filter(|s| spins(s)).map(|s| s.samples).sum();
    let cas_spin_samples: u64 = sites
        .iter()
        .filter(|s| cas_spin(s))
        .map(|s| s.samples)
        .sum();
    let mut yields: Vec<ThreadYields> = threads
        .iter()
        .filter(|t| t.yields > 0)
        .map(|t| ThreadYields {
            tid: t.tid,
            pid: t.pid,
            comm: t.comm.clone(),
            calls: t.yields,
            calls_per_s: if duration_ns == 0 {
                0.0
            } else {
                t.yields as f64 * 1e9 / duration_ns as f64
            },
        })
        .collect();
    yields.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.tid.cmp(&b.tid)));
    SpinReport {
        spin_samples,
        cas_spin_samples,
        spin_share: if all == 0 {
            0.0
        } else {
            spin_samples as f64 / all as f64
        },
        spin_stacks: fold(
            sites
                .iter()
                .filter(|s| spins(s))
                .map(|s| (folded(s), s.samples)),
            MAX_SPIN_STACKS,
        ),
        yields,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(
        in_kernel: bool,
        spinning: bool,
        user: &[&str],
        kernel: &[&str],
        samples: u64,
    ) -> CpuSite {
        CpuSite {
            tid: 1,
            in_kernel,
            spinning,
            after_cas: false,
            own_code: true,
            user_frames: user.iter().map(|s| s.to_string()).collect(),
            kernel_frames: kernel.iter().map(|s| s.to_string()).collect(),
            samples,
        }
    }

    #[test]
    fn functions_split_user_and_kernel_self_time_and_fold_outermost_first() {
        let sites = [
            site(false, false, &["burn (a.c:3)", "main (a.c:9)"], &[], 70),
            site(
                true,
                false,
                &["read (libc.so.6)", "main (a.c:9)"],
                &["ksys_read [k]", "do_syscall_64 [k]"],
                20,
            ),
            site(false, true, &["spin_lock (a.c:5)", "main (a.c:9)"], &[], 10),
        ];
        let p = profile(&sites, 99);
        assert_eq!(
            (p.samples, p.user_samples, p.kernel_samples, p.frequency_hz),
            (100, 80, 20, 99)
        );
        assert_eq!(
            (
                p.functions[0].name.as_str(),
                p.functions[0].self_user,
                p.functions[0].total
            ),
            ("burn", 70, 70)
        );
        let k = p
            .functions
            .iter()
            .find(|f| f.name == "ksys_read [k]")
            .unwrap();
        assert_eq!((k.self_user, k.self_kernel), (0, 20));
        let main = p.functions.iter().find(|f| f.name == "main").unwrap();
        assert_eq!((main.total, main.self_user + main.self_kernel), (100, 0));
        assert_eq!(
            p.folded[0].frames,
            vec!["main (a.c:9)".to_string(), "burn (a.c:3)".to_string()]
        );
        assert_eq!(
            p.folded[1].frames.last().map(String::as_str),
            Some("ksys_read [k]")
        );
        let threads = [ThreadUsage {
            tid: 5,
            pid: 5,
            ppid: 1,
            comm: "y".into(),
            user_ns: 0,
            sys_ns: 0,
            voluntary_switches: 0,
            involuntary_switches: 0,
            yields: 400,
            exited: true,
            exit_code: 0,
        }];
        let s = spin(&sites, &threads, 2_000_000_000);
        assert_eq!((s.spin_samples, s.spin_share), (10, 0.1));
        assert_eq!(
            s.spin_stacks[0].frames.last().map(String::as_str),
            Some("spin_lock (a.c:5)")
        );
        assert_eq!((s.yields[0].calls, s.yields[0].calls_per_s), (400, 200.0));
    }
}
