//! The analyses: each turns the kernel's counters and the named samples
//! (`recording::Named`) into one part of the report. One module per
//! analysis; `run` hands each what it reads, in the order their results
//! depend on each other (lock kinds before off-CPU reasons, both before
//! the wait sites). Nothing here reads the unwinder's state.

pub mod aggregate;
pub mod build;
pub mod cpu;
pub mod latency;
pub mod locks;
pub mod polls;
pub mod recorded;
pub mod runtime_locks;
pub mod sched;
pub mod spin;
pub mod timeline;
pub mod waits;

use crate::fixed_hash::HashMap;

use crate::model::{KernelCounters, LockKey, OffReason};
use crate::recording::{KernelStacks, Named};
use crate::report::{
    Blocker, CpuProfile, LockReport, OffCpuThread, PollReport, SpinReport, WaitSite, WakeupReport,
};
use crate::tally::{SampleTally, StackId};
use aggregate::ThreadUsage;
use build::SampledSite;
use cpu::CpuSite;
use locks::LockSite;
use sched::{OffCpuSite, WakeSite};

/// What the analyses made of the counters and samples, symbolized.
pub struct Analyses {
    pub sites: Vec<SampledSite>,
    /// Per file syscall, the paths its sampled calls named, with the calls
    /// they stand for.
    pub paths: HashMap<u32, HashMap<String, u64>>,
    pub cpu_samples: CpuProfile,
    pub spin: SpinReport,
    pub polls: Vec<PollReport>,
    pub locks: Vec<LockReport>,
    pub waits: Vec<WaitSite>,
    pub offcpu: Vec<OffCpuThread>,
    pub wakeups: Vec<WakeupReport>,
    pub blockers: Vec<Blocker>,
    /// The contended wait sites' sleeps in time (see `timeline::contended`).
    pub contended_spans: Vec<(u64, u64, f64)>,
    pub unresolved_frames: u64,
    /// Each lock key's name in the report (`LockReport::display_name`):
    /// what `--perfetto` calls the lock a sleep waits on.
    pub lock_names: HashMap<LockKey, String>,
}

pub fn run(
    kernel: &KernelCounters,
    tally: &SampleTally,
    named: &Named,
    kernel_stacks: &KernelStacks,
    threads: &[ThreadUsage],
    duration_ns: u64,
    cpu_hz: u64,
) -> Analyses {
    let lock_names = &named.lock_names;
    let shared = |id: &StackId| named.stacks[id].frames.clone();
    let frames = |id: &StackId| named.stacks[id].frames.to_vec();
    let runtime = |id: &StackId| named.stacks[id].runtime;
    let lock_sites: Vec<LockSite> = tally
        .locks
        .iter()
        .map(|((key, wait, stack), t)| LockSite {
            key: *key,
            wait: *wait,
            frames: shared(stack),
            weight: t.weight,
            weighted_ns: t.weighted_ns,
            samples: t.samples,
            pids: t.pids.clone(),
            runtime: runtime(stack),
            futile: t.futile,
        })
        .collect();
    let mut comms: HashMap<u32, String> = threads.iter().map(|t| (t.tid, t.comm.clone())).collect();
    for w in &kernel.wakeups {
        comms
            .entry(w.waker_tid)
            .or_insert_with(|| w.waker_comm.clone());
    }
    let waits = waits::build(&waits::Inputs {
        sleeps: &tally
            .sleeps
            .iter()
            .map(|((key, stack), t)| waits::SleepSample {
                key: *key,
                frames: frames(stack),
                runtime: runtime(stack),
                truncated: named.stacks[stack].truncated,
                tally: t.clone(),
            })
            .collect::<Vec<_>>(),
        lock_waits: &lock_sites
            .iter()
            .filter(|l| l.wait)
            .map(|l| waits::LockWaitSample {
                key: l.key,
                frames: l.frames.clone(),
                runtime: l.runtime,
                futile: l.futile,
            })
            .collect::<Vec<_>>(),
        wakes: &tally
            .wakes
            .iter()
            .map(
                |((waker_tid, woken_tid, ran_log2, stack), &(weight, _))| waits::WakeSample {
                    waker_tid: *waker_tid,
                    woken_tid: *woken_tid,
                    waker_ran_log2: *ran_log2,
                    frames: frames(stack),
                    runtime: runtime(stack),
                    weight,
                },
            )
            .collect::<Vec<_>>(),
        offcpu: &kernel.offcpu,
        futile: &kernel.locks.iter().map(|(k, c)| (*k, c.futile)).collect(),
        threads,
        comms: &comms,
        lock_names,
        duration_ns,
    });
    let locks = locks::build(
        &kernel.locks,
        &kernel.lock_waiters,
        &lock_sites,
        lock_names,
        &waits.lock_class,
        duration_ns,
    );
    let off_sites: Vec<OffCpuSite> = tally
        .offcpu
        .iter()
        .map(|(((_, tid, nr, lock), stack), &(ns, samples))| OffCpuSite {
            tid: *tid,
            reason: OffReason::Syscall {
                nr: *nr,
                lock: *lock,
            },
            frames: frames(stack),
            ns,
            samples,
            runtime: runtime(stack),
        })
        .collect();
    // Each site names the locks waited on there (the runtime's well-known
    // lock its waits are, if any, was named with its class).
    let mut sites = waits.sites;
    for (site, keys) in sites.iter_mut().zip(&waits.site_locks) {
        for k in keys {
            if let Some(name) = locks.names.get(k)
                && !site.locks.contains(name)
            {
                site.locks.push(name.clone());
            }
        }
    }

    let wake_sites: Vec<WakeSite> = tally
        .wakes
        .iter()
        .map(
            |((waker_tid, woken_tid, _, stack), &(weight, samples))| WakeSite {
                waker_tid: *waker_tid,
                woken_tid: *woken_tid,
                frames: frames(stack),
                weight,
                samples,
            },
        )
        .collect();
    let wakeups = sched::wakeups(&kernel.wakeups, &wake_sites, &comms);
    let mut cpu_sites: Vec<CpuSite> = tally
        .cpu
        .iter()
        .map(|((tid, c, stack), &samples)| CpuSite {
            tid: *tid,
            in_kernel: c.in_kernel,
            spinning: c.spinning,
            after_cas: c.after_cas,
            own_code: runtime(stack) == 0,
            user_frames: shared(stack),
            kernel_frames: c
                .kernel_stack
                .and_then(|id| kernel_stacks.frames.get(&id).cloned())
                .unwrap_or_default(),
            samples,
            at: (!c.in_kernel)
                .then(|| named.stacks[stack].leaf.clone())
                .flatten(),
        })
        .collect();
    cpu_sites.extend(cpu::unkept_sites(tally.cpu_unkept));
    Analyses {
        paths: tally.paths.clone(),
        sites: tally
            .sites
            .iter()
            .map(|((nr, stack), &(weight, samples))| SampledSite {
                nr: *nr,
                frames: frames(stack),
                weight,
                samples,
            })
            .collect(),
        polls: polls::build(
            &kernel.polls,
            &tally
                .polls
                .iter()
                .map(|((pid, nr, stack), t)| (*pid, *nr, frames(stack), t.clone()))
                .collect::<Vec<_>>(),
            duration_ns,
        ),
        locks: locks.reports,
        lock_names: locks.names,
        offcpu: sched::offcpu(
            &kernel.offcpu,
            &off_sites,
            &sched::Contended {
                locks: locks.contended,
                calls: waits.contended_calls,
                sites: waits.contended_sites,
                site_of: Some(&|s: &OffCpuSite| {
                    waits::site_of(&s.frames, s.runtime, waits::WAIT_WORDS).0
                }),
            },
            &comms,
        ),
        waits: sites,
        contended_spans: waits.contended_spans,
        blockers: sched::blockers(&wakeups),
        wakeups,
        cpu_samples: cpu::profile(&cpu_sites, cpu_hz),
        spin: spin::spin(&cpu_sites, &tally.code, threads, duration_ns),
        unresolved_frames: named.unresolved_frames + kernel_stacks.unresolved,
    }
}
