//! On-CPU profile: from sampled user and kernel stacks to folded stacks and
//! the per-function user/kernel split (spinning is `analyze::spin`'s).

use crate::fixed_hash::{HashMap, HashSet};
use std::collections::BTreeMap;

use crate::model::FrameLoc;
use crate::report::{CpuFunction, CpuProfile, FoldedStack};

/// Functions and stacks kept.
const MAX_FUNCTIONS: usize = 50;
const MAX_FOLDED: usize = 500;

pub use crate::model::Frames;

/// Symbolized on-CPU samples from one user and kernel stack.
#[derive(Clone, Debug)]
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
    pub user_frames: Frames,
    /// Innermost first; empty for a user-mode sample.
    pub kernel_frames: Frames,
    pub samples: u64,
    /// Where the user-mode sample's instruction is (its innermost frame).
    pub at: Option<FrameLoc>,
}

pub use crate::frame::function;

/// The frame the on-CPU samples whose keys gave way are shown under
/// (`tally::MAX_CPU_KEYS`).
pub const UNKEPT_FRAME: &str = "[stacks not kept]";

/// The samples whose keys gave way, as sites under UNKEPT_FRAME: in the
/// kernel's stack for kernel-mode samples, the user's otherwise, so the
/// user/kernel split and its functions' self time stay whole. Not the
/// program's code: no spin analysis reads them.
pub fn unkept_sites(unkept: crate::tally::CpuUnkept) -> Vec<CpuSite> {
    let frame: Frames = [crate::frame::Frame::new(UNKEPT_FRAME)].into();
    let site = |in_kernel: bool, samples: u64| CpuSite {
        tid: 0,
        in_kernel,
        spinning: false,
        after_cas: false,
        own_code: false,
        user_frames: if in_kernel {
            Frames::default()
        } else {
            frame.clone()
        },
        kernel_frames: if in_kernel {
            frame.clone()
        } else {
            Frames::default()
        },
        samples,
        at: None,
    };
    [(false, unkept.user), (true, unkept.kernel)]
        .into_iter()
        .filter(|&(_, n)| n > 0)
        .map(|(k, n)| site(k, n))
        .collect()
}

/// Outermost first: the user stack, then the kernel stack under it.
pub fn folded(site: &CpuSite) -> Vec<crate::frame::Frame> {
    site.user_frames
        .iter()
        .rev()
        .chain(site.kernel_frames.iter().rev())
        .cloned()
        .collect()
}

/// A site's (user, kernel) stacks, shared, for `fold`.
pub fn fold_key(site: &CpuSite) -> (Frames, Frames) {
    (site.user_frames.clone(), site.kernel_frames.clone())
}

/// The `max` heaviest stacks, outermost first (the user stack, then the
/// kernel's), by samples then by name, each with the threads its samples
/// were taken on. Merged on the shared stacks; only the kept ones are
/// copied out.
pub fn fold(
    sites: impl Iterator<Item = ((Frames, Frames), u32, u64)>,
    max: usize,
) -> Vec<FoldedStack> {
    let mut merged: HashMap<(Frames, Frames), (u64, BTreeMap<u32, u64>)> = HashMap::default();
    for (frames, tid, n) in sites {
        let e = merged.entry(frames).or_default();
        e.0 += n;
        *e.1.entry(tid).or_default() += n;
    }
    fn outermost_first(
        (user, kernel): &(Frames, Frames),
    ) -> impl Iterator<Item = &crate::frame::Frame> {
        user.iter().rev().chain(kernel.iter().rev())
    }
    let mut out: Vec<_> = merged.into_iter().collect();
    out.sort_by(|a, b| {
        b.1.0
            .cmp(&a.1.0)
            .then_with(|| outermost_first(&a.0).cmp(outermost_first(&b.0)))
    });
    out.truncate(max);
    out.into_iter()
        .map(|(k, (count, threads))| {
            let mut threads: Vec<(u32, u64)> = threads.into_iter().collect();
            threads.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            FoldedStack {
                frames: outermost_first(&k).cloned().collect(),
                count,
                threads,
            }
        })
        .collect()
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
            let name = f.function().to_string();
            entry(&mut functions, &name);
            let e = functions.get_mut(&name).expect("just added");
            if s.in_kernel && !s.kernel_frames.is_empty() {
                e.self_kernel += s.samples;
            } else {
                e.self_user += s.samples;
            }
        }
        // Counted once per sample however often it recurses.
        let mut seen = HashSet::default();
        for f in s.kernel_frames.iter().chain(s.user_frames.iter()) {
            let name = f.function();
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
        folded: fold(
            sites.iter().map(|s| (fold_key(s), s.tid, s.samples)),
            MAX_FOLDED,
        ),
        functions,
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
            user_frames: user.iter().map(|s| crate::frame::Frame::from(*s)).collect(),
            kernel_frames: kernel
                .iter()
                .map(|s| crate::frame::Frame::from(*s))
                .collect(),
            samples,
            at: None,
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
            p.folded[1].frames.last().map(crate::frame::Frame::as_str),
            Some("ksys_read [k]")
        );
    }

    /// Issue 21: the on-CPU keys share their named stacks; folding merges
    /// equal stacks whichever copy they are and orders ties by the
    /// outermost-first names, as when each key had its own copy. Issue 39:
    /// each keeps the threads its samples came from.
    #[test]
    fn fold_merges_equal_shared_stacks_and_orders_ties_by_name_issue_21() {
        let f =
            |v: &[&str]| -> Frames { v.iter().map(|s| crate::frame::Frame::from(*s)).collect() };
        let none = Frames::default();
        let sites = [
            ((f(&["b (x.c:2)", "main (x.c:9)"]), none.clone()), 7, 3),
            (
                (f(&["a (x.c:1)", "main (x.c:9)"]), f(&["ksys_read [k]"])),
                8,
                5,
            ),
            ((f(&["b (x.c:2)", "main (x.c:9)"]), none.clone()), 9, 2),
            ((f(&["c (x.c:3)", "main (x.c:9)"]), none.clone()), 7, 1),
        ];
        let out = fold(sites.into_iter(), 2);
        assert_eq!(out.len(), 2);
        assert_eq!(
            (out[0].frames.join(";"), out[0].count),
            ("main (x.c:9);a (x.c:1);ksys_read [k]".to_string(), 5)
        );
        assert_eq!(
            (out[1].frames.join(";"), out[1].count),
            ("main (x.c:9);b (x.c:2)".to_string(), 5)
        );
        // The threads each stack's samples were taken on, most first.
        assert_eq!(out[0].threads, vec![(8, 5)]);
        assert_eq!(out[1].threads, vec![(7, 3), (9, 2)]);
    }

    /// Issue 21: samples whose keys gave way keep the user/kernel split
    /// and show as one function of their own, never as the program's.
    #[test]
    fn unkept_samples_keep_the_split_under_their_own_frame_issue_21() {
        let mut sites = vec![site(false, false, &["burn (a.c:3)"], &[], 10)];
        sites.extend(unkept_sites(crate::tally::CpuUnkept { user: 3, kernel: 4 }));
        assert_eq!(sites.len(), 3);
        assert!(sites.iter().all(|s| !s.spinning && s.at.is_none()));
        let p = profile(&sites, 99);
        assert_eq!((p.samples, p.user_samples, p.kernel_samples), (17, 13, 4));
        let f = p.functions.iter().find(|f| f.name == UNKEPT_FRAME).unwrap();
        assert_eq!((f.self_user, f.self_kernel, f.total), (3, 4, 7));
        assert!(unkept_sites(crate::tally::CpuUnkept::default()).is_empty());
    }
}
