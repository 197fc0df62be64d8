//! Findings: the reasoning a performance engineer does on the figures —
//! recognise a pattern, name the culprit, give the remedy, bound the gain —
//! done on the `Report`, so the renderers and `kerntax diff` only read it.
//!
//! Each rule is a module with its thresholds as documented constants. A rule
//! fires only when every piece of its evidence holds, and the evidence it
//! reports is exactly what it tested, thresholds included: a reader can see
//! why it fired and by how much.

mod common;
pub mod lock_exclusive_hot;
pub mod lock_global_serializes;
pub mod lock_handoff_churn;
pub mod poll_low_readiness;
pub mod sched_oversubscribed;
pub mod spin_waste;
pub mod syscall_storm;
pub mod wait_bottleneck;

use crate::report::{Finding, Report};

type Rule = fn(&Report) -> Vec<Finding>;

const RULES: &[Rule] = &[
    lock_exclusive_hot::check,
    lock_global_serializes::check,
    lock_handoff_churn::check,
    poll_low_readiness::check,
    sched_oversubscribed::check,
    spin_waste::check,
    syscall_storm::check,
    wait_bottleneck::check,
];

/// Every finding of every rule, most at stake first.
pub fn analyse(r: &Report) -> Vec<Finding> {
    let mut all: Vec<Finding> = RULES.iter().flat_map(|rule| rule(r)).collect();
    all.sort_by(|a, b| {
        b.severity
            .total_cmp(&a.severity)
            .then_with(|| a.id.cmp(&b.id))
    });
    all
}

#[cfg(test)]
pub(crate) mod tests;
