#!/usr/bin/env python3
"""A text picture of a kerntax --perfetto trace: what Perfetto's timeline
shows for each thread over a short span, one lane per thread.

Usage: lanes.py TRACE [SPAN_US] [COLUMNS]

Reads TRACE with Perfetto's own schema (PyPI `perfetto`, the venv that
scripts/test.sh makes: target/perfetto-venv/bin/python). Starts at the first
lock-wait slice, covers SPAN_US microseconds (default 2000) in COLUMNS
columns (default 80). Each thread's lane, from its sched_switch and
sched_waking events: `#` running, `-` runnable, `.` asleep; below it, the
kerntax slices on its track in that span (name, start, length, releaser); the target's threads only
and the flows that end on it. For the README and for looking at a trace
without a browser; it asserts nothing.
"""
import sys
from collections import defaultdict

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

path = sys.argv[1]
span_ns = int(float(sys.argv[2] if len(sys.argv) > 2 else 2000) * 1000)
cols = int(sys.argv[3] if len(sys.argv) > 3 else 80)

trace = pb.Trace()
trace.ParseFromString(open(path, "rb").read())

changes = defaultdict(list)  # tid -> [(ts, state)]
names = {}
thread_of_track = {}
slices = defaultdict(list)  # tid -> [(ts, end, name, args)]
open_slices = defaultdict(list)
for p in trace.packet:
    if p.HasField("track_descriptor"):
        d = p.track_descriptor
        if d.HasField("thread"):
            thread_of_track[d.uuid] = d.thread.tid
            names[d.thread.tid] = d.thread.thread_name
    if p.HasField("ftrace_events"):
        for e in p.ftrace_events.event:
            if e.HasField("sched_switch"):
                s = e.sched_switch
                changes[s.prev_pid].append((e.timestamp, "-" if s.prev_state == 0 else "."))
                changes[s.next_pid].append((e.timestamp, "#"))
                names.setdefault(s.next_pid, s.next_comm)
            elif e.HasField("sched_waking"):
                changes[e.sched_waking.pid].append((e.timestamp, "-"))
    if p.HasField("track_event"):
        t = p.track_event
        tid = thread_of_track.get(t.track_uuid)
        if tid is None:
            continue
        if t.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            args = {a.name: (a.string_value or a.int_value) for a in t.debug_annotations}
            open_slices[tid].append((p.timestamp, t.name, args))
        elif t.type == pb.TrackEvent.TYPE_SLICE_END and open_slices[tid]:
            ts, name, args = open_slices[tid].pop()
            slices[tid].append((ts, p.timestamp, name, args))

starts = [s[0] for v in slices.values() for s in v if s[2].startswith("lock wait")]
if not starts:
    sys.exit("lanes.py: no lock-wait slice in the trace")
t0 = min(starts)
t1 = t0 + span_ns
step = span_ns / cols

def state_at(events, ts):
    st = "."
    for when, s in events:
        if when > ts:
            break
        st = s
    return st

print(f"{span_ns / 1000:.0f} us from the first lock wait; one column = {step / 1000:.0f} us; "
      "# running, - runnable, . asleep")
targets = set(thread_of_track.values())
for tid in sorted(changes):
    if tid not in targets:
        continue
    ev = sorted(changes[tid])
    lane = "".join(state_at(ev, t0 + i * step) for i in range(cols))
    print(f"{names.get(tid, '?')[:12]:>12} {tid:>7} |{lane}|")
    for ts, end, name, args in sorted(slices[tid]):
        if end < t0 or ts > t1:
            continue
        extra = ", ".join(f"{k}={v}" for k, v in args.items() if k in ("releaser", "site", "class"))
        print(f"{'':>21} {(ts - t0) / 1000:7.1f} us +{(end - ts) / 1000:6.1f} us  {name}"
              + (f"  ({extra})" if extra else ""))
