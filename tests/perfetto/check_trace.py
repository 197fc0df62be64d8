#!/usr/bin/env python3
"""Checks a kerntax --perfetto trace against Perfetto's own schema.

Usage: check_trace.py TRACE EXPECT.json

Parses TRACE with the upstream generated schema (PyPI `perfetto`'s
perfetto_trace_pb2) and asserts: no field the schema does not know, in any
message; a sched_switch for every thread listed in EXPECT's "threads"; a
sched_waking whose waker (FtraceEvent.pid) is one of EXPECT's "releasers"
for one of its "woken"; each CPU's switches chained (prev_pid = the CPU's
last next_pid); slices whose name starts with EXPECT's
"lock_slice_prefix" on at least EXPECT's "lock_slice_threads" threads; every
flow id started once and terminated once. With TRACE_PROCESSOR_SHELL set,
also that trace processor's stats show no mismatched sched_switch tids
(skipped otherwise: no trace processor binary is installable offline).
Prints one `key=value` line per figure, then `ok`.
"""
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict

from google.protobuf.unknown_fields import UnknownFieldSet
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


def unknown_fields(msg, path, out):
    """Every unknown field in msg and the messages under it."""
    unknown = UnknownFieldSet(msg)
    for f in unknown:
        out.append(f"{path}: unknown field {f.field_number}")
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        values = value if field.is_repeated else [value]
        for i, v in enumerate(values):
            unknown_fields(v, f"{path}.{field.name}[{i}]", out)


def main():
    trace_path, expect_path = sys.argv[1], sys.argv[2]
    expect = json.load(open(expect_path))
    trace = pb.Trace()
    trace.ParseFromString(open(trace_path, "rb").read())

    problems = []
    unknown_fields(trace, "trace", problems)
    assert not problems, "\n".join(problems[:20])

    switched = set()
    wakings = []  # (waker tid, woken tid)
    tracks = {}  # uuid -> tid
    slice_names = defaultdict(set)  # tid -> names of slices begun on its track
    flow_starts, flow_ends = Counter(), Counter()
    utsname = None
    last_next, mismatched = {}, 0
    for p in trace.packet:
        if p.HasField("system_info"):
            utsname = p.system_info.utsname
        if p.HasField("track_descriptor") and p.track_descriptor.HasField("thread"):
            tracks[p.track_descriptor.uuid] = p.track_descriptor.thread.tid
        if p.HasField("ftrace_events"):
            cpu = p.ftrace_events.cpu
            for e in p.ftrace_events.event:
                if e.HasField("sched_switch"):
                    # What trace processor counts as mismatched_sched_switch_tids.
                    last = last_next.get(cpu)
                    if last is not None and last != e.sched_switch.prev_pid:
                        mismatched += 1
                    last_next[cpu] = e.sched_switch.next_pid
                    switched.add(e.sched_switch.prev_pid)
                    switched.add(e.sched_switch.next_pid)
                if e.HasField("sched_waking"):
                    wakings.append((e.pid, e.sched_waking.pid))
        if p.HasField("track_event"):
            te = p.track_event
            if te.type == pb.TrackEvent.TYPE_SLICE_BEGIN and te.track_uuid in tracks:
                slice_names[tracks[te.track_uuid]].add(te.name)
            flow_starts.update(te.flow_ids)
            flow_ends.update(te.terminating_flow_ids)

    assert mismatched == 0, f"{mismatched} switches whose prev is not their CPU's last next"
    assert utsname is not None and utsname.sysname == "Linux" and utsname.release, utsname
    missing = [t for t in expect["threads"] if t not in switched]
    assert not missing, f"threads with no sched_switch: {missing}"
    releasers, woken = set(expect["releasers"]), set(expect["woken"])
    released = [w for w in wakings if w[0] in releasers and w[1] in woken]
    assert released, f"no sched_waking by {sorted(releasers)} of {sorted(woken)}"
    prefix = expect["lock_slice_prefix"]
    lock_threads = [t for t, names in slice_names.items() if any(n.startswith(prefix) for n in names)]
    assert len(lock_threads) >= expect["lock_slice_threads"], (
        f"'{prefix}' slices on {lock_threads}; all: {dict(slice_names)}")
    assert flow_starts and all(c == 1 for c in flow_starts.values()), "a flow id started twice"
    assert flow_starts == flow_ends, "flow ids not paired: " + str(
        set(flow_starts) ^ set(flow_ends))

    print(f"packets={len(trace.packet)}")
    print(f"switched_threads={len(switched)}")
    print(f"wakings={len(wakings)}")
    print(f"wakings_by_releasers={len(released)}")
    print(f"lock_slice_threads={len(lock_threads)}")
    print(f"flows={len(flow_starts)}")

    shell = os.environ.get("TRACE_PROCESSOR_SHELL")
    if shell:
        query = ("select name, value from stats where name = 'mismatched_sched_switch_tids'")
        out = subprocess.run([shell, "-q", "/dev/stdin", trace_path], input=query,
                             capture_output=True, text=True, check=True).stdout
        rows = [l for l in out.splitlines() if "mismatched_sched_switch_tids" in l]
        assert rows and all(l.replace('"', "").split(",")[-1].strip() == "0" for l in rows), out
        print("trace_processor_mismatched_sched_switch_tids=0")
    else:
        print("trace_processor=skipped (TRACE_PROCESSOR_SHELL not set)")
    print("ok")


if __name__ == "__main__":
    main()
