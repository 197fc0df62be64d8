//! Findings: the reasoning a performance engineer does on the figures —
//! recognise a pattern, name the culprit, give the remedy, bound the gain —
//! done on the `Report`, so the renderers and `kerntax diff` only read it.
//!
//! Each rule is a module with its thresholds as documented constants. A rule
//! fires only when every piece of its evidence holds, and the evidence it
//! reports is exactly what it tested, thresholds included: a reader can see
//! why it fired and by how much.

mod common;
pub mod gain;
pub mod io_synchronous;
pub mod known;
pub mod known_pattern;
pub mod lock_contended_site;
pub mod lock_exclusive_hot;
pub mod lock_futile_churn;
pub mod lock_global_serializes;
pub mod lock_handoff_churn;
pub mod poll_low_readiness;
pub mod sched_oversubscribed;
pub mod sched_starved;
pub mod spin_waste;
pub mod syscall_storm;
pub mod wait_bottleneck;

use crate::report::{Finding, Report};

type Rule = fn(&Report) -> Vec<Finding>;

const RULES: &[Rule] = &[
    io_synchronous::check,
    known_pattern::check,
    lock_contended_site::check,
    lock_exclusive_hot::check,
    lock_futile_churn::check,
    lock_global_serializes::check,
    lock_handoff_churn::check,
    poll_low_readiness::check,
    sched_oversubscribed::check,
    sched_starved::check,
    spin_waste::check,
    syscall_storm::check,
    wait_bottleneck::check,
];

/// Rules that name a symptom other findings often explain: lock handoffs
/// and spinning wake or keep threads runnable, which crowds the run queue.
/// They rank after the causes, whatever their severity.
const SYMPTOMS: &[&str] = &[sched_oversubscribed::ID];

/// Rules whose remedy a more specific finding on the same culprit
/// includes: a read-mostly lock made shared, or a global lock sharded,
/// stops churning too, and any lock finding says it is contended. They
/// follow the last of the specific findings on that culprit.
const GENERAL: &[&str] = &[lock_handoff_churn::ID, lock_contended_site::ID];

/// Every finding of every rule, causes first, then most at stake first.
pub fn analyse(r: &Report) -> Vec<Finding> {
    let mut all: Vec<Finding> = RULES.iter().flat_map(|rule| rule(r)).collect();
    let symptom = |f: &Finding| SYMPTOMS.contains(&f.id.as_str());
    all.sort_by(|a, b| {
        symptom(a)
            .cmp(&symptom(b))
            .then_with(|| b.severity.total_cmp(&a.severity))
            .then_with(|| a.id.cmp(&b.id))
    });
    let general = |f: &Finding| GENERAL.contains(&f.id.as_str());
    let subsumed = |f: &Finding, all: &[Finding]| {
        general(f)
            && all
                .iter()
                .any(|g| !general(g) && g.culprit.name == f.culprit.name)
    };
    // Saying a lock is contended adds nothing to a finding that says how.
    let repeats = |f: &Finding| f.id == lock_contended_site::ID && subsumed(f, &all);
    let all: Vec<Finding> = all.iter().filter(|f| !repeats(f)).cloned().collect();
    let (later, mut ranked): (Vec<Finding>, Vec<Finding>) =
        all.iter().cloned().partition(|f| subsumed(f, &all));
    for f in later {
        let at = ranked
            .iter()
            .rposition(|g| !general(g) && g.culprit.name == f.culprit.name)
            .map_or(ranked.len(), |i| i + 1);
        ranked.insert(at, f);
    }
    explained_by_patterns(&mut ranked);
    ranked
}

/// A finding whose culprit's stack runs through a library call a
/// `syscall.known-pattern` finding names is that call's symptom (an event
/// loop that paces its pool by handing it a getaddrinfo per request): the
/// pattern's finding moves up before it.
pub(crate) fn explained_by_patterns(ranked: &mut Vec<Finding>) {
    for k in 0..ranked.len() {
        let Some(p) = known_pattern::pattern_of(&ranked[k]) else {
            continue;
        };
        let symptom = ranked[..k].iter().position(|g| {
            g.culprit
                .frames
                .iter()
                .any(|f| known::is_pattern_frame(p, f))
        });
        if let Some(at) = symptom {
            let f = ranked.remove(k);
            ranked.insert(at, f);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
