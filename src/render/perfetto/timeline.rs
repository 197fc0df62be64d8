//! The trace's tracks, and what it draws from the report's timeline: the
//! processes and threads of the target (named as the report and the
//! records name them), the counter tracks under the target process, the
//! target's syscalls a second per timeline interval, and the syscall
//! storms the report found, as slices over the intervals whose rate passes
//! the storm rule's threshold (`findings::syscall_storm::MIN_CALLS_PER_S`).

use std::collections::BTreeMap;

use super::names::text;
use super::proto::{
    CounterDescriptor, ProcessDescriptor, TYPE_COUNTER, TYPE_SLICE_BEGIN, TYPE_SLICE_END,
    ThreadDescriptor, TrackDescriptor, TrackEvent, UNIT_COUNT,
};
use super::slices::{RUNNABLE_UUID, Timed, thread_uuid};
use super::{process_uuid, tracked_threads};
use crate::findings::syscall_storm;
use crate::report::Report;
use crate::sched_trace::Record;

pub const SYSCALLS_UUID: u64 = 0x3_0000_0002;
pub const STORM_UUID: u64 = 0x3_0000_0003;

/// Every process and thread of the target, then the counter tracks.
pub fn descriptors(report: &Report, records: &[Record]) -> Vec<TrackDescriptor> {
    let mut threads: BTreeMap<u32, (u32, String)> = report
        .threads
        .iter()
        .map(|t| (t.tid, (t.pid, t.comm.clone())))
        .collect();
    threads.extend(tracked_threads(records));
    let mut processes: BTreeMap<u32, String> = report
        .processes
        .iter()
        .map(|p| (p.pid, p.comm.clone()))
        .collect();
    for (tid, (pid, comm)) in &threads {
        if tid == pid || !processes.contains_key(pid) {
            processes.entry(*pid).or_insert_with(|| comm.clone());
        }
    }
    processes.entry(report.target_pid).or_default();
    let mut out: Vec<TrackDescriptor> = processes
        .iter()
        .map(|(&pid, name)| TrackDescriptor {
            uuid: Some(process_uuid(pid)),
            process: Some(ProcessDescriptor {
                pid: Some(pid as i32),
                cmdline: if pid == report.target_pid {
                    report.command.clone().unwrap_or_default()
                } else {
                    vec![]
                },
                process_name: (!name.is_empty()).then(|| name.clone()),
            }),
            ..Default::default()
        })
        .collect();
    out.extend(threads.iter().map(|(&tid, (pid, name))| TrackDescriptor {
        uuid: Some(thread_uuid(tid)),
        thread: Some(ThreadDescriptor {
            pid: Some(*pid as i32),
            tid: Some(tid as i32),
            thread_name: Some(name.clone()),
        }),
        ..Default::default()
    }));
    let parent = process_uuid(report.target_pid);
    for (uuid, name) in [
        (
            RUNNABLE_UUID,
            "runnable threads (woken or preempted, waiting for a CPU)",
        ),
        (SYSCALLS_UUID, "syscalls/s (all the target's threads)"),
    ] {
        out.push(TrackDescriptor {
            uuid: Some(uuid),
            name: Some(name.into()),
            parent_uuid: Some(parent),
            counter: Some(CounterDescriptor {
                unit: Some(UNIT_COUNT),
                unit_name: None,
            }),
            ..Default::default()
        });
    }
    out.push(TrackDescriptor {
        uuid: Some(STORM_UUID),
        name: Some("syscall storms (kerntax findings)".into()),
        parent_uuid: Some(parent),
        ..Default::default()
    });
    out
}

/// The syscalls/s counter and the storm slices, from the report's
/// timeline; `start` is its start on the trace's clock.
pub fn counters(report: &Report, start: u64) -> Vec<Timed> {
    let storm = report.findings.iter().find(|f| f.id == syscall_storm::ID);
    let mut out = Vec::new();
    let mut in_storm = false;
    let mut last_end = start;
    for b in &report.timeline.buckets {
        let at = start + b.t_ns;
        let per_s = if b.duration_ns > 0 {
            b.syscalls as f64 * 1e9 / b.duration_ns as f64
        } else {
            0.0
        };
        out.push(Timed {
            ts: at,
            event: TrackEvent {
                r#type: Some(TYPE_COUNTER),
                track_uuid: Some(SYSCALLS_UUID),
                double_counter_value: Some(per_s),
                ..Default::default()
            },
        });
        let storming = storm.is_some() && per_s >= syscall_storm::MIN_CALLS_PER_S;
        if storming && !in_storm {
            let f = storm.expect("storming only with a storm finding");
            out.push(Timed {
                ts: at,
                event: TrackEvent {
                    r#type: Some(TYPE_SLICE_BEGIN),
                    track_uuid: Some(STORM_UUID),
                    name: Some(format!("syscall storm: {}", f.culprit.name)),
                    categories: vec!["syscalls".into()],
                    debug_annotations: vec![
                        text("finding", f.title.as_str()),
                        text("remedy", f.remedy.as_str()),
                    ],
                    ..Default::default()
                },
            });
        } else if !storming && in_storm {
            out.push(storm_end(at));
        }
        in_storm = storming;
        last_end = at + b.duration_ns;
    }
    if in_storm {
        out.push(storm_end(last_end));
    }
    out
}

fn storm_end(ts: u64) -> Timed {
    Timed {
        ts,
        event: TrackEvent {
            r#type: Some(TYPE_SLICE_END),
            track_uuid: Some(STORM_UUID),
            ..Default::default()
        },
    }
}
