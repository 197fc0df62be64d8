//! The rest of the host during the run (collect/host.rs): how busy its CPUs
//! were and which other processes used them. What a target waiting for
//! CPUs it does not oversubscribe itself was waiting for.

use serde::{Deserialize, Serialize};

use super::Report;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostUsage {
    /// False in reports without it (older, or /proc unreadable): nothing
    /// below was measured.
    pub measured: bool,
    /// CPU time of everything on the host (all processes, interrupts) per
    /// wall second: CPUs kept busy.
    pub busy_cpus: f64,
    /// Of those, the CPUs the hypervisor ran something else on (a VM's
    /// steal time): CPUs the host's own processes could not have.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub steal_cpus: f64,
    /// The same, of the other processes that were there at the end of the
    /// run (not the target, not kerntax), named or not below.
    pub others_named_cpus: f64,
    /// The other processes that used the most CPU, most first.
    pub others: Vec<HostProcess>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostProcess {
    pub pid: u32,
    pub comm: String,
    /// CPU time per wall second.
    pub cpus: f64,
}

impl Report {
    /// CPUs used over the run by everything on the host but the target and
    /// kerntax (0 when the host was not measured): the busy CPUs less the
    /// target's and kerntax's, or the named others if more.
    pub fn others_cpus(&self) -> f64 {
        if !self.host.measured || self.duration_ns == 0 {
            return 0.0;
        }
        let own = self.profiler.window_cpu_ns as f64 / self.duration_ns as f64;
        (self.host.busy_cpus - self.summary.cpus_used - own)
            .max(self.host.others_named_cpus)
            .max(0.0)
    }
}
