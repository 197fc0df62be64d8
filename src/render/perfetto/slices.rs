//! kerntax's reasons on each target thread's track, as TrackEvent slices:
//! every sleep from its switch-out to its switch-in, named by `names`
//! (lock wait on *lock*, waiting for work at *site*, poll, I/O, ...), with
//! a nested "runnable" slice from the wake-up to the switch-in; a flow
//! arrow from an instant on the waking thread's track (when it is one of
//! the target's) to that nested slice; and a counter of the target's
//! runnable threads (woken or preempted, not yet back on a CPU).
//!
//! Slices nest strictly by construction: a thread's sleeps follow one
//! another, and the runnable part ends with its sleep. Events are built
//! in one pass over the time-sorted records, each track's in order; the
//! caller's stable sort by time keeps that order at equal times.

use std::collections::HashMap;

use super::names::{Namer, arg, text};
use super::proto::{
    TYPE_COUNTER, TYPE_INSTANT, TYPE_SLICE_BEGIN, TYPE_SLICE_END, TrackEvent, Value,
};
use crate::sched_trace::{Kind, Left, Record, Task};

/// A wake-up that comes before its thread's switch-out still ends the
/// sleep that switch-out begins, if the switch-out follows within this
/// (src/bpf/sched.h, KT_EARLY_WAKE_MAX_NS).
pub const EARLY_WAKE_MAX_NS: u64 = 1_000_000;

/// prev_state bits of a task that is gone (ftrace's X and Z).
const DEAD_STATES: i64 = 0x10 | 0x20;

pub fn thread_uuid(tid: u32) -> u64 {
    0x2_0000_0000 | u64::from(tid)
}

/// The counter track of the target's runnable threads.
pub const RUNNABLE_UUID: u64 = 0x3_0000_0001;

/// A track event at a time on the trace's clock.
pub struct Timed {
    pub ts: u64,
    pub event: TrackEvent,
}

#[derive(Clone, Copy)]
struct Wake {
    at: u64,
    waker: Task,
    in_timer: bool,
    /// Whether the waker is one of the target's threads (a flow's start).
    tracked: bool,
}

#[derive(Default)]
struct Thread {
    /// The sleep under way: when it began and why.
    sleep: Option<(u64, Left)>,
    wake: Option<Wake>,
    runnable: bool,
    exited: bool,
}

pub struct Built {
    pub events: Vec<Timed>,
    pub slices: u64,
    pub flows: u64,
}

struct Builder<'a> {
    namer: &'a Namer<'a>,
    threads: HashMap<u32, Thread>,
    runnable: i64,
    out: Built,
}

fn event(kind: i32, track: u64) -> TrackEvent {
    TrackEvent {
        r#type: Some(kind),
        track_uuid: Some(track),
        ..Default::default()
    }
}

impl Builder<'_> {
    fn push(&mut self, ts: u64, event: TrackEvent) {
        self.out.events.push(Timed { ts, event });
    }

    fn set_runnable(&mut self, tid: u32, on: bool, ts: u64) {
        let t = self.threads.entry(tid).or_default();
        if t.runnable == on {
            return;
        }
        t.runnable = on;
        self.runnable += if on { 1 } else { -1 };
        let mut e = event(TYPE_COUNTER, RUNNABLE_UUID);
        e.counter_value = Some(self.runnable);
        self.push(ts, e);
    }

    /// Emits `tid`'s sleep [begin, end] and the runnable part after its
    /// wake-up, with the flow from the waker.
    fn close(&mut self, tid: u32, end: u64, unfinished: bool) {
        let t = self.threads.entry(tid).or_default();
        let Some((begin, left)) = t.sleep.take() else {
            return;
        };
        let wake = t.wake.take();
        let named = self.namer.sleep(tid, left);
        let track = thread_uuid(tid);
        let mut b = event(TYPE_SLICE_BEGIN, track);
        b.name = Some(named.name);
        b.categories = vec![named.category.to_string()];
        b.debug_annotations = named.args;
        if let Some(w) = &wake {
            let who = if w.in_timer {
                "a timer's expiry".to_string()
            } else {
                format!(
                    "{} {} (pid {})",
                    w.waker.comm.to_str(),
                    w.waker.tid,
                    w.waker.pid
                )
            };
            b.debug_annotations.push(text("releaser", who));
            b.debug_annotations.push(arg(
                "releaser in target",
                Value::Bool(w.tracked && !w.in_timer),
            ));
        }
        if unfinished {
            b.debug_annotations
                .push(arg("unfinished at the end of the run", Value::Bool(true)));
        }
        self.push(begin, b);
        self.out.slices += 1;
        if let Some(w) = wake {
            let from = w.at.max(begin).min(end);
            let mut r = event(TYPE_SLICE_BEGIN, track);
            r.name = Some(if w.in_timer {
                "runnable (woken by a timer)".to_string()
            } else {
                format!(
                    "runnable (woken by {} {})",
                    w.waker.comm.to_str(),
                    w.waker.tid
                )
            });
            r.categories = vec!["sched".into()];
            if w.tracked && !w.in_timer {
                self.out.flows += 1;
                let id = self.out.flows;
                let mut i = event(TYPE_INSTANT, thread_uuid(w.waker.tid));
                i.name = Some(format!("wakes {} {}", w.waker.comm.to_str(), tid));
                i.categories = vec!["sched".into()];
                i.flow_ids = vec![id];
                // Pushed before the slice it points to: at equal times the
                // flow starts first.
                self.push(w.at.min(from), i);
                r.terminating_flow_ids = vec![id];
            }
            self.push(from, r);
            self.push(end, event(TYPE_SLICE_END, track));
            self.out.slices += 1;
        }
        self.push(end, event(TYPE_SLICE_END, track));
    }

    fn record(&mut self, r: &Record, ts: u64) {
        match r.kind {
            Kind::Switch {
                prev,
                next,
                prev_state,
                left,
                next_tracked,
            } => {
                if let Some(left) = left {
                    self.switched_out(prev.tid, left, prev_state, ts);
                }
                if next_tracked {
                    self.close(next.tid, ts, false);
                    self.threads.entry(next.tid).or_default().wake = None;
                    self.set_runnable(next.tid, false, ts);
                }
            }
            Kind::Waking {
                woken,
                waker,
                in_timer,
                waker_tracked,
                ..
            } => {
                let t = self.threads.entry(woken.tid).or_default();
                if t.wake.is_none() {
                    t.wake = Some(Wake {
                        at: ts,
                        waker,
                        in_timer,
                        tracked: waker_tracked,
                    });
                }
                if t.sleep.is_some() {
                    self.set_runnable(woken.tid, true, ts);
                }
            }
            Kind::WakeupNew { task, .. } => self.set_runnable(task.tid, true, ts),
            Kind::New { .. } => {}
            Kind::Exit { task } => {
                self.close(task.tid, ts, false);
                self.threads.entry(task.tid).or_default().exited = true;
                self.set_runnable(task.tid, false, ts);
            }
        }
    }

    fn switched_out(&mut self, tid: u32, left: Left, prev_state: i64, ts: u64) {
        // A sleep whose switch-in was never seen (its record lost) ends here.
        self.close(tid, ts, true);
        let t = self.threads.entry(tid).or_default();
        if matches!(left, Left::Preempted) {
            t.wake = None;
            self.set_runnable(tid, true, ts);
            return;
        }
        if t.exited || prev_state & DEAD_STATES != 0 {
            t.wake = None;
            return;
        }
        t.sleep = Some((ts, left));
        // Woken already, on its way off the CPU: runnable from the start.
        match t.wake {
            Some(w) if ts.saturating_sub(w.at) <= EARLY_WAKE_MAX_NS => {
                self.set_runnable(tid, true, ts)
            }
            _ => t.wake = None,
        }
    }
}

/// The thread tracks' events from the time-sorted `records`; `ts` maps
/// their time to the trace's clock; sleeps still under way end at `end`.
pub fn build(namer: &Namer<'_>, records: &[Record], ts: impl Fn(u64) -> u64, end: u64) -> Built {
    let mut b = Builder {
        namer,
        threads: HashMap::new(),
        runnable: 0,
        out: Built {
            events: Vec::new(),
            slices: 0,
            flows: 0,
        },
    };
    for r in records {
        b.record(r, ts(r.ts_ns));
    }
    let mut open: Vec<u32> = b
        .threads
        .iter()
        .filter(|(_, t)| t.sleep.is_some())
        .map(|(&tid, _)| tid)
        .collect();
    open.sort_unstable();
    for tid in open {
        b.close(tid, end, true);
    }
    b.out
}
