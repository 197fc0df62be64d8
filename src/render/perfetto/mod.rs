//! `--perfetto FILE`: the run as one Perfetto protobuf trace (.pftrace),
//! which ui.perfetto.dev opens as it opens its own recordings.
//!
//! Not Chrome JSON: that loses the thread-state and CPU tracks, which are
//! the point of an off-CPU timeline. The trace holds, in order:
//! - a clock snapshot and `SystemInfo` with uname (sysname "Linux" and the
//!   release: Perfetto decodes sched_switch's prev_state by kernel version);
//! - track descriptors: each process and thread of the target, and the
//!   counter tracks, before any event uses them;
//! - per-CPU ftrace bundles of the target's switches (per-CPU chain made
//!   consistent: `sched`), wake-ups (the event's pid is the waker), new
//!   tasks and exits: Perfetto's CPU tracks and thread states;
//! - TrackEvent slices of kerntax's reasons on each thread's track, flows
//!   from the releasing thread to the woken one, and counters (`slices`;
//!   runnable threads, syscalls/s and syscall storms from the report's
//!   timeline: `timeline`).
//!
//! One clock: BPF stamps with CLOCK_MONOTONIC; every timestamp gets
//! BOOTTIME's lead over it added (`SchedTrace::boottime_offset_ns`), so the
//! trace is on BOOTTIME, the clock Perfetto assumes for ftrace events and
//! packets alike, and the clock snapshot lets it show wall-clock time.
//!
//! Unlike the other renderers this one reads the run's records as well as
//! the `Report`: the JSON report keeps no per-event data, so `kerntax
//! report` cannot write a trace. Names (locks, wait sites, classes) come
//! from the report.

#[cfg(test)]
mod check;
mod names;
pub mod proto;
mod sched;
mod slices;
#[cfg(test)]
mod tests;
mod timeline;

use std::collections::BTreeMap;
use std::path::Path;

use prost::Message;

use crate::report::Report;
use crate::sched_trace::{Kind, Record, SchedTrace};
use proto::*;

pub use sched::SYNTHETIC_PREV_STATE;
pub use slices::{EARLY_WAKE_MAX_NS, RUNNABLE_UUID, thread_uuid};

/// ftrace events per bundle at most: bundles interleave in time with the
/// track events, and each stays a small message to decode.
pub const BUNDLE_EVENTS: usize = 1024;

/// The one packet sequence kerntax's track events and descriptors are on.
pub const SEQUENCE_ID: u32 = 1;

pub fn process_uuid(pid: u32) -> u64 {
    0x1_0000_0000 | u64::from(pid)
}

/// What a trace holds, for the caller to state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub bytes: u64,
    pub records: u64,
    pub ftrace_events: u64,
    /// Switches added to keep each CPU's chain consistent (`sched`).
    pub synthesized_switches: u64,
    pub slices: u64,
    pub flows: u64,
}

/// The trace of `report`'s run from its scheduling records.
pub fn build(report: &Report, trace: &SchedTrace) -> (Trace, Written) {
    let mut records: Vec<Record> = trace.records.clone();
    records.sort_by_key(|r| r.ts_ns);
    let offset = trace.boottime_offset_ns;
    let ts = |mono: u64| mono + offset;
    let start = ts(trace.start_mono_ns);
    let last = records.last().map_or(0, |r| r.ts_ns);
    let end = ts(trace.end_mono_ns.max(last).max(trace.start_mono_ns));

    let mut packets = vec![
        TracePacket {
            timestamp: Some(start),
            data: Some(Data::ClockSnapshot(ClockSnapshot {
                clocks: vec![
                    clock(CLOCK_BOOTTIME, start),
                    clock(CLOCK_MONOTONIC, trace.start_mono_ns),
                    clock(CLOCK_REALTIME, trace.start_realtime_ns),
                ],
                primary_trace_clock: Some(CLOCK_BOOTTIME as i32),
            })),
            ..Default::default()
        },
        TracePacket {
            data: Some(Data::SystemInfo(SystemInfo {
                utsname: Some(Utsname {
                    sysname: Some("Linux".into()),
                    version: None,
                    release: Some(trace.kernel_release.clone()),
                    machine: Some(std::env::consts::ARCH.into()),
                }),
                num_cpus: (trace.cpus > 0).then_some(trace.cpus),
            })),
            ..Default::default()
        },
    ];
    let descriptors = timeline::descriptors(report, &records);
    for (i, d) in descriptors.into_iter().enumerate() {
        packets.push(on_sequence(None, Data::TrackDescriptor(d), i == 0));
    }

    let namer = names::Namer::new(report, &trace.lock_names);
    let built = slices::build(&namer, &records, ts, end);
    let mut timed: Vec<(u64, TracePacket)> = built
        .events
        .into_iter()
        .map(|t| {
            (
                t.ts,
                on_sequence(Some(t.ts), Data::TrackEvent(t.event), false),
            )
        })
        .collect();
    timed.extend(timeline::counters(report, start).into_iter().map(|t| {
        (
            t.ts,
            on_sequence(Some(t.ts), Data::TrackEvent(t.event), false),
        )
    }));
    let (cpus, synthesized) = sched::per_cpu(&records, ts);
    let mut ftrace_events = 0;
    for (cpu, events) in cpus {
        ftrace_events += events.len() as u64;
        for chunk in events.chunks(BUNDLE_EVENTS) {
            let first = chunk[0].timestamp.unwrap_or(0);
            let bundle = FtraceEventBundle {
                cpu: Some(cpu),
                event: chunk.to_vec(),
            };
            timed.push((
                first,
                TracePacket {
                    data: Some(Data::FtraceEvents(bundle)),
                    ..Default::default()
                },
            ));
        }
    }
    // Stable: each track's and each CPU's own order stays as built.
    timed.sort_by_key(|(t, _)| *t);
    packets.extend(timed.into_iter().map(|(_, p)| p));
    let out = Trace { packet: packets };
    let written = Written {
        bytes: out.encoded_len() as u64,
        records: records.len() as u64,
        ftrace_events,
        synthesized_switches: synthesized,
        slices: built.slices,
        flows: built.flows,
    };
    (out, written)
}

fn clock(id: u32, ts: u64) -> Clock {
    Clock {
        clock_id: Some(id),
        timestamp: Some(ts),
    }
}

fn on_sequence(ts: Option<u64>, data: Data, first: bool) -> TracePacket {
    TracePacket {
        timestamp: ts,
        trusted_packet_sequence_id: Some(SEQUENCE_ID),
        sequence_flags: first.then_some(SEQ_INCREMENTAL_STATE_CLEARED),
        data: Some(data),
    }
}

/// Writes the trace to `path` atomically; returns what it holds.
pub fn write(report: &Report, trace: &SchedTrace, path: &Path) -> anyhow::Result<Written> {
    let (t, written) = build(report, trace);
    crate::render::json::write_atomic(path, &t.encode_to_vec())?;
    Ok(written)
}

/// The target's threads in the records (tracked on either side of an
/// event), with their process and latest name.
fn tracked_threads(records: &[Record]) -> BTreeMap<u32, (u32, String)> {
    let mut out = BTreeMap::new();
    let mut note = |t: &crate::sched_trace::Task| {
        out.insert(t.tid, (t.pid, t.comm.to_str()));
    };
    for r in records {
        match &r.kind {
            Kind::Switch {
                prev,
                next,
                left,
                next_tracked,
                ..
            } => {
                if left.is_some() {
                    note(prev);
                }
                if *next_tracked {
                    note(next);
                }
            }
            Kind::Waking {
                woken,
                waker,
                waker_tracked,
                ..
            } => {
                note(woken);
                if *waker_tracked {
                    note(waker);
                }
            }
            Kind::New { task, parent } => {
                note(task);
                note(parent);
            }
            Kind::WakeupNew { task, .. } | Kind::Exit { task } => note(task),
        }
    }
    out
}
