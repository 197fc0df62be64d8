//! node-spin (issue 19): Node.js 20, four worker_threads waiting for jobs
//! from the main thread. Polling their slot of a SharedArrayBuffer with
//! Atomics.load in a loop (waitForJob, which TurboFan inlines into
//! workerLoop: a short loop of JIT code around a call of V8's
//! Builtins_AtomicsLoad, where ~60% of the samples land), the 4 spinners
//! on 2 CPUs take the CPU the producer needs (7.2 k jobs/s against 15.9 k);
//! sleeping in Atomics.wait they leave it alone. The spinning JS function
//! is named from node's perf map (--perf-basic-prof). See NOTES.md.
use super::*;

/// Wait sites of class contention must not hold the idle waits: node's
/// event loops in epoll (the main thread's, and the platform's delayed-task
/// thread parked the whole run), or the workers' sleep in Atomics.wait
/// (healthy: 10-13 s of the run's waiting). The real contention on V8's
/// futex-emulation mutex (g_mutex) is 0.05-1.5 s.
fn no_idle_wait_is_contention(r: &Report) {
    for s in r.waits.iter().filter(|s| s.class == WaitClass::Contention) {
        assert!(
            !s.syscalls.keys().any(|k| k.starts_with("epoll")),
            "{}: {:?}",
            kerntax::analyze::waits::display(s),
            s.evidence
        );
        assert!(
            s.wait_ns < 4_000_000_000,
            "{} waits {} ns: {:?}",
            kerntax::analyze::waits::display(s),
            s.wait_ns,
            s.evidence
        );
    }
}

#[test]
fn node_workers_polling_a_shared_array_spin_and_waiting_in_atomics_wait_do_not() {
    live("node-spin");
}

/// What `node_workers_polling_a_shared_array_spin_and_waiting_in_atomics_wait_do_not` asserts of a bad and a healthy run, live or recorded.
pub fn node_workers_polling_a_shared_array_spin_and_waiting_in_atomics_wait_do_not_holds(
    bad: &Report,
    healthy: &Report,
) {
    let f = first(bad, "spin.waste");
    // The JS function that spins, by its name in the perf map: waitForJob,
    // or workerLoop when TurboFan inlined waitForJob into it (most of the
    // samples); not V8's Builtins_AtomicsLoad alone, an address in
    // anonymous memory or the interpreter.
    assert!(
        f.culprit.name.contains("waitForJob") || f.culprit.name.contains("workerLoop"),
        "{f:?}"
    );
    let l = bad
        .spin
        .loops
        .iter()
        .find(|l| l.function == f.culprit.name)
        .unwrap_or_else(|| panic!("{:?}", bad.spin.loops));
    // Loads and compares only: no PAUSE, no CAS, no syscall.
    assert_eq!(l.kind, "plain-loads", "{l:?}");
    // All 4 workers spin, more spinners than CPUs, and the spinning is a
    // large part of the CPU (ground truth: 1.86-1.93 CPUs used, 58-64% of
    // the samples in Builtins_AtomicsLoad, 20-25% more in workerLoop's own
    // code). kerntax counts a lower bound: the loads called from named JIT
    // code only, not the 9-11% called from Ignition's interpreter frames
    // (no function to name) nor the loop's JIT code around the call (it
    // makes a call: not a loop of plain loads). 0.42-0.53 in 9 suite runs
    // here, under 0.4 once in CI (issue 19): half again the rule's
    // MIN_SPIN_SHARE.
    assert!(
        l.threads >= 3 && l.threads > bad.summary.cpus.min(2),
        "{l:?}"
    );
    assert!(
        bad.spin.spin_share >= 1.5 * kerntax::findings::spin_waste::MIN_SPIN_SHARE,
        "{:?}",
        bad.spin
    );
    assert!(f.remedy.contains("Atomics.wait"), "{}", f.remedy);
    // node's JIT frames were named from its perf map (~4,900 entries).
    let node = bad
        .sampling
        .jit
        .iter()
        .find(|j| j.pid == bad.target_pid)
        .unwrap_or_else(|| panic!("{:?}", bad.sampling.jit));
    assert!(node.perf_map_entries > 100, "{node:?}");
    assert!(node.frames_named * 10 >= node.frames * 9, "{node:?}");
    // Spinning is no lock: the spinners make no syscall while they spin.
    assert!(
        bad.findings.iter().all(|f| !f.id.starts_with("lock.")),
        "{:?}",
        ids(bad)
    );
    nothing_idle_is_contention(bad);
    no_idle_wait_is_contention(bad);
    lacks(bad, "wait.bottleneck");

    lacks(healthy, "spin.waste");
    assert!(
        healthy
            .spin
            .loops
            .iter()
            .all(|l| !l.function.contains("waitForJob") && !l.function.contains("workerLoop")),
        "{:?}",
        healthy.spin.loops
    );
    // The workers wait for work in Atomics.wait (V8's futex emulation, a
    // condition variable per waiter), woken by the producer's
    // Atomics.notify: not contention.
    assert!(
        healthy.findings.iter().all(|f| !f.id.starts_with("lock.")),
        "{:?}",
        ids(healthy)
    );
    nothing_idle_is_contention(healthy);
    no_idle_wait_is_contention(healthy);
}
