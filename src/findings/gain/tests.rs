//! The gain prediction on small reports whose answer is known by hand:
//! each of the module's thresholds driven just above and just below, and
//! the profiler's own samples taken out of the program's.

use super::*;
use crate::findings::tests::{DOWN, UP, base, thread_report};
use crate::report::{
    Blocker, FoldedStack, HostProcess, OffCpuReasonReport, OffCpuThread, ThreadReport, WakeupReport,
};

const S: f64 = 1e9;

fn thread(tid: u32, cpu_s: f64) -> ThreadReport {
    thread_report(tid, (cpu_s * S) as u64)
}

fn off(tid: u32, reason: OffCpuReason, s: f64) -> OffCpuThread {
    OffCpuThread {
        tid,
        pid: 1,
        comm: "t".into(),
        total_ns: (s * S) as u64,
        wanted_ns: 0,
        reasons: vec![OffCpuReasonReport {
            reason,
            ns: (s * S) as u64,
            count: 1,
            syscalls: Default::default(),
            stacks: vec![],
        }],
    }
}

fn samples(stacks: &[(&[&str], u64)]) -> Vec<FoldedStack> {
    stacks
        .iter()
        .map(|(frames, count)| FoldedStack {
            frames: frames.iter().map(|f| (*f).into()).collect(),
            count: *count,
            threads: vec![],
        })
        .collect()
}

/// `share` of the program's samples, `n` of them, on no thread known.
fn through(share: f64, samples: u64) -> Through {
    Through {
        share,
        samples,
        threads: vec![],
    }
}

/// A 2 s run on 2 CPUs: thread 1 busy for 1 s, of which a fix removes
/// half; thread 2 with `cpu_s` of CPU and a timer's sleep for the rest of
/// the run. Thread 2's chain (2 s) bounds the run only when it is a worker.
fn sleeper_beside(cpu_s: f64) -> Report {
    let mut r = base();
    r.duration_ns = (2.0 * S) as u64;
    r.threads = vec![thread(1, 1.0), thread(2, cpu_s)];
    r.offcpu = vec![off(2, OffCpuReason::Sleep, 2.0 - cpu_s)];
    r
}

/// Half of thread 1's second of CPU, of a program's `cpu_s`.
fn halve_thread_1(cpu_s: f64) -> Fix {
    Fix {
        cpu_share: 0.5 / cpu_s,
        cpu_samples: 1000,
        cpu_threads: vec![1],
        assumes: "half of thread 1's work gone".into(),
        ..Fix::default()
    }
}

#[test]
fn a_thread_bounds_the_run_from_a_share_of_the_busiest_threads_cpu() {
    let share = |cpu_s: f64| {
        let r = sleeper_beside(cpu_s);
        build(&r, &halve_thread_1(1.0 + cpu_s), &Samples::of(&r))
            .gain()
            .share
    };
    // A worker: its 2 s chain bounds the run before and after.
    assert!(share(WORKER_CPU_SHARE * UP) < 1e-9);
    // Housekeeping: thread 1's own chain, 1 s, halves.
    let g = share(WORKER_CPU_SHARE * DOWN);
    assert!((g - 0.5).abs() < 0.01, "{g}");
}

/// Issue 39 (node-lookup): an event loop (thread 1, 0.9 s of CPU in a 1 s
/// run, the run's bound) hands lookups to a pool thread (thread 2, 0.4 s).
/// A fix of the pool's lookups (0.3 s, 300 samples of thread 2's) leaves
/// the loop's chain as it was: no gain, where charging the removed CPU to
/// every thread in proportion took 0.21 s off the loop (23%). The same CPU
/// in the loop's own samples takes 0.3 s off its chain (33%).
#[test]
fn removed_cpu_is_charged_to_the_threads_whose_samples_show_it() {
    let gain = |on_tid: u32| {
        let mut r = base();
        r.duration_ns = S as u64;
        r.threads = vec![thread(1, 0.9), thread(2, 0.4)];
        let mut stacks = samples(&[(&["loop", "lookup"], 300), (&["loop", "work"], 1000)]);
        stacks[0].threads = vec![(on_tid, 300)];
        stacks[1].threads = vec![(1, 600), (2, 400 - 300 * u64::from(on_tid == 2))];
        r.cpu_samples.folded = stacks;
        let s = Samples::of(&r);
        let t = s.through_frames(|f| f.function() == "lookup");
        assert_eq!((t.samples, t.threads.clone()), (300, vec![(on_tid, 300)]));
        let fix = fixes::cpu(t, "no lookups".into());
        build(&r, &fix, &s).gain().share
    };
    let pool = gain(2);
    assert!(pool.abs() < 1e-9, "{pool}");
    let own = gain(1);
    // The loop's chain, 0.9 s, down to 0.6 s.
    assert!((own - (1.0 - 0.6 / 0.9)).abs() < 1e-6, "{own}");
    // Samples without threads (a report from before they were kept): in
    // proportion to the threads' CPU time, as before.
    let mut r = base();
    r.duration_ns = S as u64;
    r.threads = vec![thread(1, 0.9), thread(2, 0.4)];
    let fix = fixes::cpu(through(0.3 / 1.3, 300), "no lookups".into());
    let g = build(&r, &fix, &Samples::of(&r)).gain().share;
    assert!((g - 0.3 / 1.3).abs() < 1e-6, "{g}");
}

/// Thread 2 ends `share` of the program's waiting with its wake-ups:
/// a blocker bounds the run whatever its CPU.
#[test]
fn a_thread_whose_wake_ups_end_the_others_waits_bounds_the_run() {
    let share = |blocker_share: f64| {
        let mut r = sleeper_beside(0.1);
        r.blockers = vec![
            Blocker {
                pid: 1,
                tid: 2,
                comm: "t".into(),
                in_target: true,
                wait_ns: (blocker_share * S) as u64,
                threads_woken: 1,
            },
            Blocker {
                pid: 1,
                tid: 3,
                comm: "t".into(),
                in_target: true,
                wait_ns: ((1.0 - blocker_share) * S) as u64,
                threads_woken: 1,
            },
        ];
        build(&r, &halve_thread_1(1.1), &Samples::of(&r))
            .gain()
            .share
    };
    assert!(share(BLOCKER_WAIT_SHARE * UP) < 1e-9);
    assert!((share(BLOCKER_WAIT_SHARE * DOWN) - 0.5).abs() < 0.01);
}

/// One thread, 1 s of CPU in a 1 s run: a fix of `share` of its samples
/// saves that share; below MIN_FIX_SAMPLES samples, no single estimate.
#[test]
fn a_fix_seen_in_too_few_samples_gets_a_range_and_no_estimate() {
    let predicted = |n: u64| {
        let mut r = base();
        r.threads = vec![thread(1, 1.0)];
        r.cpu_samples.folded = samples(&[(&["main", "work"], 1000 - n), (&["main", "spin"], n)]);
        let (share, found) = Samples::of(&r).through(|f| f.function() == "spin");
        assert_eq!(found, n);
        predict(&r, &fixes::cpu(through(share, found), "no spin".into()))
    };
    let few = predicted((MIN_FIX_SAMPLES as f64 * DOWN).floor() as u64);
    assert!(few.no_estimate.is_some(), "{few:?}");
    let enough = predicted((MIN_FIX_SAMPLES as f64 * UP).ceil() as u64);
    assert!(enough.no_estimate.is_none(), "{enough:?}");
    assert!((enough.share - 0.021).abs() < 1e-3, "{enough:?}");
    let [low, high] = enough.range.unwrap();
    assert!(low < enough.share && enough.share < high, "{enough:?}");
}

/// One thread with 1 s of CPU in a run whose length `wall` the model does
/// not explain past that second.
#[test]
fn a_run_the_bounds_do_not_explain_gets_no_estimate() {
    let predicted = |explained: f64| {
        let mut r = base();
        r.duration_ns = (S / explained) as u64;
        r.threads = vec![thread(1, 1.0)];
        predict(&r, &fixes::cpu(through(0.5, 1000), "half".into()))
    };
    let g = predicted(MIN_EXPLAINED * DOWN);
    assert!(g.no_estimate.is_some(), "{g:?}");
    let g = predicted(MIN_EXPLAINED * UP);
    assert!(g.no_estimate.is_none(), "{g:?}");
    // The range: the unexplained time stays (low) or goes (high).
    let [low, high] = g.range.unwrap();
    assert!(low < 0.5 * MIN_EXPLAINED * UP + 0.01 && high > 0.5, "{g:?}");
}

/// Samples in kerntax's own BPF programs and the tracing that runs them
/// are the profiler's: a fix's share is of the program's samples only.
#[test]
fn the_profilers_own_samples_are_not_the_programs() {
    let mut r = base();
    r.threads = vec![thread(1, 1.0)];
    r.cpu_samples.folded = samples(&[
        (&["main", "work"], 60),
        (
            &[
                "main",
                "getppid",
                "do_syscall_64 [k]",
                "__x64_sys_getppid [k]",
            ],
            20,
        ),
        (
            &[
                "main",
                "getppid",
                "do_syscall_64 [k]",
                "syscall_trace_enter [k]",
            ],
            10,
        ),
        (
            &[
                "main",
                "getppid",
                "do_syscall_64 [k]",
                "bpf_prog_1a2b_kt_sys_enter [k]",
            ],
            10,
        ),
    ]);
    let s = Samples::of(&r);
    assert_eq!(s.program_samples, 80);
    assert!((s.profiler_share - 0.2).abs() < 1e-9);
    let (share, n) = s.through(|f| f.as_str().ends_with("sys_getppid [k]"));
    assert_eq!(n, 20);
    assert!((share - 0.25).abs() < 1e-9);
}

/// A thread that makes many system calls pays more of the profiler's cost
/// than one that computes: its own samples say how much, weighed with
/// `PROFILER_PRIOR_SAMPLES` of the run's share.
#[test]
fn a_threads_own_samples_say_how_much_of_its_cpu_the_profiler_took() {
    let mut r = base();
    r.threads = vec![thread(1, 1.0), thread(2, 1.0)];
    let stack = |frames: &[&str], count, tid| FoldedStack {
        frames: frames.iter().map(|f| (*f).into()).collect(),
        count,
        threads: vec![(tid, count)],
    };
    r.cpu_samples.folded = vec![
        stack(&["main", "read", "__x64_sys_read [k]"], 20, 1),
        stack(&["main", "read", "bpf_prog_1a2b_kt_sys_enter [k]"], 20, 1),
        stack(&["main", "work"], 60, 2),
    ];
    let s = Samples::of(&r);
    assert!((s.profiler_share - 0.2).abs() < 1e-9);
    // (20 + 10 * 0.2) / (40 + 10) of thread 1's; (0 + 2) / (60 + 10) of 2's.
    assert!((s.own_share(1) - (1.0 - 22.0 / 50.0)).abs() < 1e-9);
    assert!((s.own_share(2) - (1.0 - 2.0 / 70.0)).abs() < 1e-9);
    // A thread no sample was taken on: the run's share.
    assert!((s.own_share(3) - 0.8).abs() < 1e-9);
}

/// A 2 s run on 2 CPUs: thread 1's 2 s of CPU bound it, and a fix halves
/// it. A peer that woke it used `peer_cpus` of the run: were its work
/// serial, it would bound the fixed run at its own CPU time (the range's
/// low end); past `SERIAL_PEER_MAX_CPUS` it is not serial.
fn beside_a_peer(peer_cpus: f64) -> ExpectedGain {
    let mut r = base();
    r.duration_ns = (2.0 * S) as u64;
    r.threads = vec![thread(1, 2.0)];
    r.host = crate::report::HostUsage {
        measured: true,
        busy_cpus: 1.0 + peer_cpus,
        steal_cpus: 0.0,
        others_named_cpus: peer_cpus,
        others: vec![HostProcess {
            pid: 7,
            comm: "client".into(),
            cpus: peer_cpus,
        }],
    };
    r.wakeups = vec![WakeupReport {
        waker_pid: 7,
        waker_tid: 7,
        waker_comm: "client".into(),
        waker_in_target: false,
        woken_pid: 1,
        woken_tid: 1,
        woken_comm: "t".into(),
        mechanism: "socket".into(),
        count: 10,
        wait_ns: 0,
        waker_stacks: vec![],
    }];
    let fix = Fix {
        cpu_share: 0.5,
        cpu_samples: 1000,
        cpu_threads: vec![1],
        assumes: "half of thread 1's work gone".into(),
        ..Fix::default()
    };
    predict(&r, &fix)
}

#[test]
fn a_one_cpu_peers_work_bounds_the_low_end() {
    let serial = beside_a_peer(SERIAL_PEER_MAX_CPUS * DOWN);
    let range = serial.range.expect("a range");
    // The peer's ~2 s: the fixed run can be no shorter than the run was.
    assert!(range[0] < 0.05, "{serial:?}");
    let parallel = beside_a_peer(SERIAL_PEER_MAX_CPUS * UP);
    let range = parallel.range.expect("a range");
    // Thread 1's 1 s left, against the CPUs' (1 + 1.01·2·½) / 2.
    assert!(range[0] > 0.4, "{parallel:?}");
    // The point is the model's either way.
    assert!(
        (serial.share - parallel.share).abs() < 0.05,
        "{serial:?} {parallel:?}"
    );
}

/// Two threads on 2 CPUs take turns at one lock for 2 s: each computes
/// 1 s and waits 1 s for the other. Its collisions gone, each runs its
/// 0.8 s of CPU left (a fifth was the lock's churn): 60% shorter. The
/// least its remedy gives (an adaptive lock: the churn's CPU gone, the
/// turns kept) is a fifth of each turn: the range's low end, with the
/// time the turns take that the model does not explain kept.
#[test]
fn a_churning_locks_least_fix_keeps_its_collisions() {
    let mut r = base();
    r.duration_ns = (2.0 * S) as u64;
    r.threads = vec![thread(1, 1.0), thread(2, 1.0)];
    r.offcpu = vec![
        off(1, OffCpuReason::Lock, 1.0),
        off(2, OffCpuReason::Lock, 1.0),
    ];
    let fix = Fix {
        waits: vec![(1, S), (2, S)],
        wait_reasons: vec![OffCpuReason::Lock],
        cpu_share: 0.2,
        cpu_samples: 1000,
        assumes: "the collisions gone".into(),
        ..Fix::default()
    };
    let all = predict(&r, &fix);
    assert!((all.share - 0.6).abs() < 1e-9, "{all:?}");
    assert!(all.range.expect("a range")[0] > 0.5, "{all:?}");
    let least = Fix {
        at_least: Some(Box::new(Fix {
            waits: vec![],
            ..fix.clone()
        })),
        ..fix.clone()
    };
    let g = predict(&r, &least);
    assert!((g.share - 0.6).abs() < 1e-9, "{g:?}");
    // 1 - (0.8 s + the 1 s unexplained) / 2 s, less the samples' error.
    let low = g.range.expect("a range")[0];
    assert!(low <= 0.1 + 1e-9 && low > 0.05, "{g:?}");
}

/// A wait ended by something outside the program (a peer's reply) is
/// fixed: a fix inside the program does not shorten it. The same wait
/// ended by the program's own thread is elastic.
#[test]
fn who_ended_a_wait_decides_whether_it_stays() {
    let run = |waker_in_target: bool| {
        let mut r = base();
        r.duration_ns = (2.0 * S) as u64;
        r.threads = vec![thread(1, 1.0)];
        r.offcpu = vec![off(1, OffCpuReason::IoMultiplexing, 1.0)];
        r.wakeups = vec![WakeupReport {
            waker_pid: if waker_in_target { 1 } else { 7 },
            waker_tid: if waker_in_target { 2 } else { 7 },
            waker_comm: "w".into(),
            waker_in_target,
            woken_pid: 1,
            woken_tid: 1,
            woken_comm: "t".into(),
            mechanism: "futex".into(),
            count: 10,
            wait_ns: S as u64,
            waker_stacks: vec![],
        }];
        build(
            &r,
            &fixes::cpu(through(0.5, 1000), "half".into()),
            &Samples::of(&r),
        )
    };
    let peer = run(false);
    assert!((peer.threads[0].fixed_wait_ns - S).abs() < 1.0);
    // The chain: 1 s of CPU and 1 s of the peer's; half the CPU goes.
    assert!((peer.gain().share - 0.25).abs() < 1e-9, "{:?}", peer.gain());
    let own = run(true);
    assert!(own.threads[0].fixed_wait_ns.abs() < 1.0);
}
