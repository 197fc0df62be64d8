//! The scheduling records as ftrace events, per CPU: what Perfetto builds
//! its CPU tracks and each thread's state track (Running, Runnable,
//! Sleeping, "woken by") from, as it does for its own recordings.
//!
//! The per-CPU chain: Perfetto ends the running slice of a CPU at a switch
//! only if the switch's prev_pid is the previous switch's next_pid there
//! (else it counts `mismatched_sched_switch_tids` and loses the state).
//! kerntax sees only the switches with a target thread on one side, so on
//! a CPU it sees `X -> N` (N another program's task), misses `N -> ... ->
//! M`, then sees `M -> T`. The gap is closed with one synthetic switch
//! `N -> M` at the time of `M -> T`, prev_state R: the trace then says N
//! ran until M took the CPU back for T, which is all kerntax knows (other
//! programs' tasks are drawn, not measured). A target thread can be N only
//! when its own switch-out was lost (`loss.trace_ringbuf_full`).

use std::collections::BTreeMap;

use super::proto::{
    CLONE_THREAD, Event, FtraceEvent, SchedProcessExit, SchedSwitch, SchedWaking,
    TRACE_FLAG_HARDIRQ, TaskNewtask,
};
use crate::sched_trace::{Kind, Record, Task};

/// prev_state of a synthetic switch: 0, runnable (not known to sleep).
pub const SYNTHETIC_PREV_STATE: i64 = 0;

/// Each CPU's ftrace events in time order, its chain made consistent;
/// and how many switches were synthesized. `records` are sorted by time;
/// `ts` maps a record's time to the trace's clock.
pub fn per_cpu(
    records: &[Record],
    ts: impl Fn(u64) -> u64,
) -> (BTreeMap<u32, Vec<FtraceEvent>>, u64) {
    let mut cpus: BTreeMap<u32, Vec<FtraceEvent>> = BTreeMap::new();
    let mut last_next: BTreeMap<u32, Task> = BTreeMap::new();
    let mut synthesized = 0;
    for r in records {
        let at = ts(r.ts_ns);
        let events = cpus.entry(r.cpu).or_default();
        match r.kind {
            Kind::Switch {
                prev,
                next,
                prev_state,
                ..
            } => {
                if let Some(last) = last_next.get(&r.cpu)
                    && last.tid != prev.tid
                {
                    events.push(switch(at, last, &prev, SYNTHETIC_PREV_STATE));
                    synthesized += 1;
                }
                events.push(switch(at, &prev, &next, prev_state));
                last_next.insert(r.cpu, next);
            }
            Kind::Waking {
                woken,
                waker,
                in_timer,
                target_cpu,
                ..
            } => events.push(FtraceEvent {
                timestamp: Some(at),
                pid: Some(waker.tid),
                common_flags: in_timer.then_some(TRACE_FLAG_HARDIRQ),
                event: Some(Event::SchedWaking(waking(&woken, target_cpu))),
            }),
            Kind::WakeupNew {
                task,
                waker,
                target_cpu,
            } => events.push(FtraceEvent {
                timestamp: Some(at),
                pid: Some(waker.tid),
                common_flags: None,
                event: Some(Event::SchedWakeupNew(waking(&task, target_cpu))),
            }),
            Kind::New { task, parent } => events.push(FtraceEvent {
                timestamp: Some(at),
                pid: Some(parent.tid),
                common_flags: None,
                event: Some(Event::TaskNewtask(TaskNewtask {
                    pid: Some(task.tid as i32),
                    comm: Some(task.comm.to_str()),
                    clone_flags: Some(if task.pid == parent.pid {
                        CLONE_THREAD
                    } else {
                        0
                    }),
                })),
            }),
            Kind::Exit { task } => events.push(FtraceEvent {
                timestamp: Some(at),
                pid: Some(task.tid),
                common_flags: None,
                event: Some(Event::SchedProcessExit(SchedProcessExit {
                    comm: Some(task.comm.to_str()),
                    pid: Some(task.tid as i32),
                    tgid: Some(task.pid as i32),
                    prio: Some(task.prio),
                })),
            }),
        }
    }
    (cpus, synthesized)
}

fn switch(at: u64, prev: &Task, next: &Task, prev_state: i64) -> FtraceEvent {
    FtraceEvent {
        timestamp: Some(at),
        pid: Some(prev.tid),
        common_flags: None,
        event: Some(Event::SchedSwitch(SchedSwitch {
            prev_comm: Some(prev.comm.to_str()),
            prev_pid: Some(prev.tid as i32),
            prev_prio: Some(prev.prio),
            prev_state: Some(prev_state),
            next_comm: Some(next.comm.to_str()),
            next_pid: Some(next.tid as i32),
            next_prio: Some(next.prio),
        })),
    }
}

fn waking(task: &Task, target_cpu: i32) -> SchedWaking {
    SchedWaking {
        comm: Some(task.comm.to_str()),
        pid: Some(task.tid as i32),
        prio: Some(task.prio),
        success: Some(1),
        target_cpu: Some(target_cpu),
    }
}
