//! The invariant check of a written trace (tests only): the bytes decoded
//! with the same messages and checked for what Perfetto needs.

use std::collections::{BTreeMap, HashMap, HashSet};

use prost::Message;

use super::SEQUENCE_ID;
use super::proto::*;

/// What `check` found, for the tests to assert on.
#[derive(Debug, Default)]
pub struct Seen {
    /// Per thread track: (name, begin, end) of its slices.
    pub slices: BTreeMap<u64, Vec<(String, u64, u64)>>,
    pub switches: Vec<(u32, i32, i32, i64)>,
    /// (waker tid, woken tid, from an interrupt)
    pub wakings: Vec<(u32, i32, bool)>,
    pub flows: usize,
    pub counters: HashMap<u64, Vec<f64>>,
    pub ftrace_other: usize,
}

/// Decodes a trace and checks the invariants: uname first, every track
/// described before an event uses it, each CPU's switches chained
/// (prev_pid = the last next_pid), times in order (per CPU, across track
/// events, and by packet), slices nested per track, flows paired (one
/// start, one end, in that order).
pub fn check(bytes: &[u8]) -> Seen {
    let trace = Trace::decode(bytes).expect("the trace decodes");
    let mut seen = Seen::default();
    let (mut uname, mut described) = (false, HashSet::new());
    let mut counter_tracks = HashSet::new();
    let (mut last_packet_ts, mut last_event_ts) = (0u64, 0u64);
    let mut cpu_last: HashMap<u32, (u64, Option<i32>)> = HashMap::new();
    let mut open: HashMap<u64, Vec<(String, u64)>> = HashMap::new();
    let mut flow_start: HashMap<u64, u64> = HashMap::new();
    let mut flow_end: HashMap<u64, u64> = HashMap::new();
    for p in &trace.packet {
        match p.data.as_ref().expect("every packet has data") {
            Data::SystemInfo(s) => {
                let u = s.utsname.as_ref().unwrap();
                assert_eq!(u.sysname.as_deref(), Some("Linux"));
                assert!(u.release.as_deref().is_some_and(|r| !r.is_empty()));
                uname = true;
            }
            Data::ClockSnapshot(_) => {}
            Data::TrackDescriptor(d) => {
                let uuid = d.uuid.unwrap();
                assert!(described.insert(uuid), "track {uuid:#x} described twice");
                if d.counter.is_some() {
                    counter_tracks.insert(uuid);
                }
                if let Some(parent) = d.parent_uuid {
                    assert!(described.contains(&parent), "parent after child");
                }
            }
            Data::FtraceEvents(b) => {
                assert!(uname, "ftrace events before the uname");
                let cpu = b.cpu.unwrap();
                let first = b.event[0].timestamp.unwrap();
                assert!(first >= last_packet_ts, "bundle out of order");
                last_packet_ts = first;
                for e in &b.event {
                    let ts = e.timestamp.unwrap();
                    let (last_ts, last_next) = cpu_last.entry(cpu).or_insert((0, None));
                    assert!(ts >= *last_ts, "cpu {cpu}: {ts} after {last_ts}");
                    *last_ts = ts;
                    match e.event.as_ref().unwrap() {
                        Event::SchedSwitch(s) => {
                            if let Some(n) = *last_next {
                                assert_eq!(s.prev_pid, Some(n), "cpu {cpu} chain broken at {ts}");
                            }
                            assert_eq!(e.pid.map(|p| p as i32), s.prev_pid);
                            *last_next = s.next_pid;
                            seen.switches.push((
                                cpu,
                                s.prev_pid.unwrap(),
                                s.next_pid.unwrap(),
                                s.prev_state.unwrap(),
                            ));
                        }
                        Event::SchedWaking(w) => seen.wakings.push((
                            e.pid.unwrap(),
                            w.pid.unwrap(),
                            e.common_flags == Some(TRACE_FLAG_HARDIRQ),
                        )),
                        _ => seen.ftrace_other += 1,
                    }
                }
            }
            Data::TrackEvent(t) => {
                assert!(uname, "track events before the uname");
                let ts = p.timestamp.expect("a track event has a time");
                assert!(
                    ts >= last_event_ts && ts >= last_packet_ts,
                    "track event out of order"
                );
                (last_event_ts, last_packet_ts) = (ts, ts);
                assert_eq!(p.trusted_packet_sequence_id, Some(SEQUENCE_ID));
                let track = t.track_uuid.unwrap();
                assert!(
                    described.contains(&track),
                    "track {track:#x} used before described"
                );
                let counter = counter_tracks.contains(&track);
                match t.r#type.unwrap() {
                    TYPE_COUNTER => {
                        assert!(counter);
                        let v = t.double_counter_value.or(t.counter_value.map(|v| v as f64));
                        seen.counters.entry(track).or_default().push(v.unwrap());
                    }
                    TYPE_SLICE_BEGIN => {
                        assert!(!counter);
                        let stack = open.entry(track).or_default();
                        stack.push((t.name.clone().unwrap(), ts));
                    }
                    TYPE_SLICE_END => {
                        let (name, begin) = open
                            .get_mut(&track)
                            .and_then(Vec::pop)
                            .expect("a slice ends that never began");
                        seen.slices
                            .entry(track)
                            .or_default()
                            .push((name, begin, ts));
                    }
                    TYPE_INSTANT => assert!(!counter),
                    other => panic!("event type {other}"),
                }
                for id in &t.flow_ids {
                    assert!(
                        flow_start.insert(*id, ts).is_none(),
                        "flow {id} started twice"
                    );
                }
                for id in &t.terminating_flow_ids {
                    assert!(flow_end.insert(*id, ts).is_none(), "flow {id} ended twice");
                }
            }
        }
    }
    assert!(
        open.values().all(Vec::is_empty),
        "slices left open: {open:?}"
    );
    assert_eq!(
        flow_start.keys().collect::<HashSet<_>>(),
        flow_end.keys().collect::<HashSet<_>>(),
        "unpaired flows"
    );
    for (id, start) in &flow_start {
        assert!(*start <= flow_end[id], "flow {id} ends before it starts");
    }
    seen.flows = flow_start.len();
    seen
}
