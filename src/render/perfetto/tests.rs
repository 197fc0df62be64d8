//! The writer on fixtures: every trace passes `check` (Perfetto's
//! invariants), then the figures of a small lock story built by hand, the
//! chain synthesis, and the edge cases.

use prost::Message;

use super::check::{Seen, check};
use super::proto::*;
use super::*;
use crate::analyze::build::{build as build_report, tests::sample_inputs};
use crate::model::LockKey;
use crate::sched_trace::{Comm, Kind, Left, Record, SchedTrace, Task};

const MS: u64 = 1_000_000;
const LOCK: LockKey = LockKey::Private {
    pid: 100,
    addr: 0x1000,
};
const LOCK_NAME: &str = "mutex in Cache::lookup ([heap])";

fn task(pid: u32, tid: u32, comm: &str) -> Task {
    Task {
        pid,
        tid,
        prio: 120,
        comm: Comm::new(comm),
    }
}

fn switch(ms: u64, cpu: u32, prev: Task, left: Option<Left>, next: Task, tracked: bool) -> Record {
    let prev_state = match left {
        Some(Left::Preempted) => 0x100,
        _ => 1,
    };
    Record {
        ts_ns: ms * MS,
        cpu,
        kind: Kind::Switch {
            prev,
            next,
            prev_state,
            left,
            next_tracked: tracked,
        },
    }
}

fn waking(ms: u64, cpu: u32, woken: Task, waker: Task, in_timer: bool) -> Record {
    Record {
        ts_ns: ms * MS,
        cpu,
        kind: Kind::Waking {
            woken,
            waker,
            in_timer,
            waker_tracked: waker.pid == 100,
            target_cpu: cpu as i32,
        },
    }
}

fn lock_wait() -> Option<Left> {
    Some(Left::Syscall {
        nr: 202,
        lock: Some(LOCK),
    })
}

/// Threads 101 and 102 of process 100 take turns on one lock over two
/// CPUs, with other programs' tasks 500 and 501 in the gaps; main (100)
/// is woken before its switch-out, then exits; 102 is still asleep at the
/// end.
fn story() -> SchedTrace {
    let (main, a, b) = (
        task(100, 100, "main"),
        task(100, 101, "w101"),
        task(100, 102, "w102"),
    );
    let (o1, o2) = (task(500, 500, "other"), task(501, 501, "kworker"));
    let poll = Some(Left::Syscall { nr: 7, lock: None });
    let mut dead = switch(30, 0, main, lock_wait(), o1, false);
    if let Kind::Switch { prev_state, .. } = &mut dead.kind {
        *prev_state = 0x10;
    }
    let records = vec![
        switch(10, 0, a, lock_wait(), o1, false),
        waking(15, 1, a, b, false),
        switch(18, 1, b, Some(Left::Preempted), a, true),
        // 500 -> ... -> 501 unseen on CPU 0: one switch synthesized.
        switch(20, 0, o2, None, main, true),
        switch(21, 1, a, poll, b, true),
        waking(22, 1, a, b, true),
        switch(23, 1, b, lock_wait(), a, true),
        waking(24, 0, main, a, false),
        switch(24, 0, main, lock_wait(), o1, false),
        switch(26, 0, o1, None, main, true),
        Record {
            ts_ns: 27 * MS,
            cpu: 1,
            kind: Kind::New {
                task: task(100, 103, "w101"),
                parent: a,
            },
        },
        Record {
            ts_ns: 29 * MS,
            cpu: 0,
            kind: Kind::Exit { task: main },
        },
        dead,
    ];
    SchedTrace {
        records,
        start_mono_ns: 5 * MS,
        end_mono_ns: 40 * MS,
        boottime_offset_ns: 1000,
        kernel_release: "6.18.0".into(),
        cpus: 2,
        lock_names: vec![(LOCK, LOCK_NAME.into())],
        ..Default::default()
    }
}

fn rendered(trace: &SchedTrace) -> (Seen, Written) {
    let report = build_report(sample_inputs());
    let (t, written) = build(&report, trace);
    let bytes = t.encode_to_vec();
    assert_eq!(bytes.len() as u64, written.bytes);
    (check(&bytes), written)
}

#[test]
fn the_lock_story_keeps_every_invariant_with_kerntaxs_names() {
    let (seen, written) = rendered(&story());
    assert_eq!(
        (
            written.records,
            written.synthesized_switches,
            written.ftrace_events
        ),
        (13, 1, 14)
    );
    // The gap on CPU 0 closed by 500 -> 501 at 501's switch, runnable.
    assert!(seen.switches.contains(&(0, 500, 501, SYNTHETIC_PREV_STATE)));
    assert_eq!(seen.switches.len(), 9);
    // Wakings name their waker; the timer's is flagged as an interrupt.
    // (Per CPU, CPU 0's first: each CPU's events are one bundle.)
    assert_eq!(
        seen.wakings,
        vec![(101, 100, false), (102, 101, false), (102, 101, true)]
    );
    // New task and exit.
    assert_eq!(seen.ftrace_other, 2);
    let at = |ms: u64| ms * MS + 1000;
    let a = &seen.slices[&thread_uuid(101)];
    let lock = format!("lock wait {LOCK_NAME}");
    assert_eq!(
        a,
        &vec![
            ("runnable (woken by w102 102)".to_string(), at(15), at(18)),
            (lock.clone(), at(10), at(18)),
            ("runnable (woken by a timer)".to_string(), at(22), at(23)),
            ("poll (poll)".to_string(), at(21), at(23)),
        ]
    );
    // main: woken before its switch-out, runnable from it; nothing after
    // its exit.
    let main = &seen.slices[&thread_uuid(100)];
    assert_eq!(main[1], (lock.clone(), at(24), at(26)));
    assert_eq!(main[0].1, at(24));
    assert_eq!(main.len(), 2);
    // 102 asleep until the end of the run.
    assert_eq!(seen.slices[&thread_uuid(102)], vec![(lock, at(23), at(40))]);
    // Flows: 102 -> 101 and 101 -> main; not the timer's.
    assert_eq!((seen.flows, written.flows), (2, 2));
    // Runnable threads: 101 woken, back; 102 preempted; ...
    let runnable = &seen.counters[&RUNNABLE_UUID];
    assert_eq!(runnable, &vec![1.0, 2.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
}

#[test]
fn the_chain_is_closed_per_cpu_with_one_switch_from_the_last_next() {
    let (x, n, m, t) = (
        task(1, 1, "x"),
        task(2, 2, "n"),
        task(3, 3, "m"),
        task(9, 9, "t"),
    );
    let records = vec![
        switch(1, 0, x, None, n, false),
        switch(1, 1, t, lock_wait(), x, false),
        switch(2, 0, m, None, t, true),
        switch(3, 0, t, lock_wait(), m, false),
    ];
    let (cpus, synthesized) = sched::per_cpu(&records, |ts| ts);
    assert_eq!(synthesized, 1);
    let pairs: Vec<(i32, i32)> = cpus[&0]
        .iter()
        .map(|e| match e.event.as_ref().unwrap() {
            Event::SchedSwitch(s) => (s.prev_pid.unwrap(), s.next_pid.unwrap()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(pairs, vec![(1, 2), (2, 3), (3, 9), (9, 3)]);
    assert_eq!(cpus[&0][1].timestamp, Some(2 * MS));
    // CPU 1's first switch needs nothing before it.
    assert_eq!(cpus[&1].len(), 1);
}

#[test]
fn an_empty_run_is_a_valid_trace_of_its_threads() {
    let trace = SchedTrace {
        kernel_release: "6.18.0".into(),
        ..Default::default()
    };
    let (seen, written) = rendered(&trace);
    assert_eq!(
        (written.records, written.ftrace_events, written.slices),
        (0, 0, 0)
    );
    assert!(seen.switches.is_empty() && seen.slices.is_empty() && seen.flows == 0);
    // The report's threads are described all the same (`check` would
    // fail on a use before), and have no events.
    let (t, _) = build(&build_report(sample_inputs()), &trace);
    let threads: Vec<i32> = t
        .packet
        .iter()
        .filter_map(|p| match &p.data {
            Some(Data::TrackDescriptor(d)) => d.thread.as_ref()?.tid,
            _ => None,
        })
        .collect();
    assert_eq!(threads, vec![100, 101, 102]);
}

#[test]
fn a_thread_with_no_events_has_a_track_and_nothing_on_it() {
    let mut trace = story();
    // Only 101's first sleep, unfinished: 100 and 102 (the report's) idle.
    trace.records.truncate(1);
    let (seen, _) = rendered(&trace);
    assert_eq!(
        seen.slices.keys().copied().collect::<Vec<_>>(),
        vec![thread_uuid(101)]
    );
    assert_eq!(seen.slices[&thread_uuid(101)][0].2, 40 * MS + 1000);
}

#[test]
fn syscalls_per_second_and_storms_come_from_the_report_timeline() {
    let mut report = build_report(sample_inputs());
    report.timeline.interval_ns = 100 * MS;
    for (i, calls) in [100u64, 5_000, 100].iter().enumerate() {
        report.timeline.buckets.push(crate::report::TimelineBucket {
            t_ns: i as u64 * 100 * MS,
            duration_ns: 100 * MS,
            user_ns: 0,
            sys_ns: 0,
            voluntary_switches: 0,
            involuntary_switches: 0,
            syscalls: *calls,
            lock_wait_ns: 0,
        });
    }
    let storm = crate::report::Finding {
        id: crate::findings::syscall_storm::ID.into(),
        title: "getppid storm".into(),
        severity: 0.5,
        evidence: vec![],
        culprit: crate::report::Culprit {
            kind: crate::report::CulpritKind::Syscall,
            name: "getppid".into(),
            frames: vec![],
        },
        remedy: "call it less".into(),
        expected_gain: crate::report::ExpectedGain {
            time_ns: 0,
            share: 0.0,
            basis: String::new(),
            estimate: true,
            range: None,
            assumes: None,
            no_estimate: None,
        },
    };
    report.findings = vec![storm];
    let trace = SchedTrace {
        kernel_release: "6.18.0".into(),
        ..Default::default()
    };
    let (t, _) = build(&report, &trace);
    let seen = check(&t.encode_to_vec());
    assert_eq!(
        seen.counters[&timeline::SYSCALLS_UUID],
        vec![1_000.0, 50_000.0, 1_000.0]
    );
    let storms: Vec<(String, u64, u64)> = t
        .packet
        .iter()
        .filter_map(|p| match &p.data {
            Some(Data::TrackEvent(e)) if e.track_uuid == Some(timeline::STORM_UUID) => {
                Some((e.name.clone().unwrap_or_default(), p.timestamp?, 0))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        storms,
        vec![
            ("syscall storm: getppid".into(), 100 * MS, 0),
            (String::new(), 200 * MS, 0)
        ]
    );
}

/// Records in any order and combination (switch-ins never switched out,
/// wake-ups of running threads, exits twice, other programs' tasks on
/// every side, equal times): the trace still keeps every invariant.
#[test]
fn arbitrary_records_never_break_an_invariant() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    for round in 0..20 {
        let tasks: Vec<Task> = (0..6)
            .map(|i| task(if i < 4 { 100 } else { 500 + i }, 100 + i, "t"))
            .collect();
        let mut records = Vec::new();
        for _ in 0..400 {
            let ts_ns = next(2_000) * 1_000;
            let cpu = next(3) as u32;
            let (a, b) = (tasks[next(6) as usize], tasks[next(6) as usize]);
            let tracked = |t: Task| t.pid == 100;
            let left = match next(4) {
                0 => Left::Preempted,
                1 => Left::Other,
                2 => Left::Syscall { nr: 7, lock: None },
                _ => Left::Syscall {
                    nr: 202,
                    lock: Some(LOCK),
                },
            };
            let kind = match next(6) {
                0 | 1 => Kind::Switch {
                    prev: a,
                    next: b,
                    prev_state: [0, 1, 2, 0x10, 0x100][next(5) as usize],
                    left: tracked(a).then_some(left),
                    next_tracked: tracked(b),
                },
                2 | 3 => Kind::Waking {
                    woken: a,
                    waker: b,
                    in_timer: next(4) == 0,
                    waker_tracked: tracked(b),
                    target_cpu: cpu as i32,
                },
                4 => Kind::Exit { task: a },
                _ => Kind::WakeupNew {
                    task: a,
                    waker: b,
                    target_cpu: 0,
                },
            };
            records.push(Record { ts_ns, cpu, kind });
        }
        let trace = SchedTrace {
            records,
            end_mono_ns: if round % 2 == 0 { 0 } else { 3_000_000 },
            kernel_release: "6.18.0".into(),
            lock_names: vec![(LOCK, LOCK_NAME.into())],
            ..Default::default()
        };
        let (seen, written) = rendered(&trace);
        assert_eq!(written.records, 400);
        assert_eq!(seen.flows as u64, written.flows);
    }
}
