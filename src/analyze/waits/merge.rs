//! Sites that are one wait under two names. A JIT that inlines a method
//! into its caller names the wait by the caller from then on: a lock taken
//! in `handleRequest` waits under `handleRequest` while it is compiled
//! alone and under the lambda that calls it once C2 has inlined it. Both
//! are the same wait: the same prior, the same lock words (the same
//! threads' parkers, the same lock), and the second site's method is the
//! first one's caller on its stacks. Without a word in common the two
//! wait for different things (RocketMQ's broker: a GC allocation's brief
//! wait on the heap lock under the commit log's lock would otherwise have
//! taken the lock's waits and its name).

use std::collections::BTreeMap;

use super::acc::SiteAcc;
use super::prior::WaitPrior;
use crate::frame::jit::JitKind;

/// The share of a site's time whose stacks show the other site's method as
/// its caller, from which the other is its inlined form.
const MIN_CALLER_SHARE: f64 = 0.5;

/// Whether `site` is a JIT-compiled method of the program's in `a`'s stacks.
fn program_method(a: &SiteAcc, site: &str) -> bool {
    a.stacks.keys().any(|frames| {
        frames
            .iter()
            .any(|f| f.function() == site && f.is_jit() && f.jit_kind() == Some(JitKind::Program))
    })
}

/// The function that called `site` on most of `a`'s time, and that share.
fn caller(a: &SiteAcc, site: &str) -> Option<(String, f64)> {
    let mut by: BTreeMap<String, f64> = BTreeMap::new();
    let mut total = 0.0;
    for (frames, (ns, _)) in &a.stacks {
        total += ns;
        if let Some(i) = frames.iter().position(|f| f.function() == site)
            && let Some(up) = frames.get(i + 1)
        {
            *by.entry(up.function().to_string()).or_default() += ns;
        }
    }
    let (name, ns) = by.into_iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    (total > 0.0).then(|| (name, ns / total))
}

/// Merges each site that is another's inlined form into it.
pub fn inlined(sites: &mut BTreeMap<String, SiteAcc>) {
    let mut into: Vec<(String, String)> = vec![];
    for (name, a) in sites.iter() {
        let prior = a.prior();
        if prior == WaitPrior::Unknown || !program_method(a, name) {
            continue;
        }
        let Some((up, share)) = caller(a, name) else {
            continue;
        };
        if share < MIN_CALLER_SHARE || up == *name {
            continue;
        }
        if let Some(b) = sites.get(&up)
            && b.prior() == prior
            && !a.locks.is_disjoint(&b.locks)
            && program_method(b, &up)
            && !into.iter().any(|(from, _)| *from == up || *from == *name)
        {
            into.push((up, name.clone()));
        }
    }
    for (from, to) in into {
        if let Some(b) = sites.remove(&from)
            && let Some(a) = sites.get_mut(&to)
        {
            a.absorb(from, b);
        }
    }
}
