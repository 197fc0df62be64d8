#!/usr/bin/python3.11
"""How much of a run's CPU samples kerntax names (issue 38's closing figures).

Usage: share.py REPORT.json [PROGRAM_REGEX]

Prints, over the target's on-CPU samples with user frames:
  frames_named      user frames that carry a name, weighted by samples
                    (unnamed: `module+0x...`, `[unknown]`, and the anonymous
                    stand-ins a runtime's code had before it was read:
                    `Interpreter`, `[jit]`, V8's interpreter trampolines)
  frames_with_line  user frames that carry a source line, weighted alike
  samples_program   samples with a frame matching PROGRAM_REGEX (the
                    program's own code: `^main\\.`, `^JavaLocks\\.`, a
                    script's path), when given
and the cost per run of each of kerntax's BPF programs that ran
(`profiler.programs`: ns per run; needs kernel.bpf_stats_enabled).
"""
import json
import re
import sys

ANONYMOUS = re.compile(
    r"^(\[unknown\]|\[jit\]|Interpreter|Builtins_InterpreterEntryTrampoline|"
    r"Builtins_BaselineOutOfLinePrologue|Builtins_JSEntry|\S+\+0x[0-9a-f]+)( \(|$)"
)

LINE = re.compile(r"\([^()]*:\d+(, \w+)?\)( \[inlined\])?$")


def main():
    report = json.load(open(sys.argv[1]))
    program = re.compile(sys.argv[2]) if len(sys.argv) > 2 else None
    frames = named = lined = samples = matched = 0
    for s in report["cpu_samples"]["folded"]:
        user = [f for f in s["frames"] if not f.endswith("[k]")]
        if not user:
            continue
        n = s["count"]
        samples += n
        frames += n * len(user)
        named += n * sum(1 for f in user if not ANONYMOUS.match(f))
        lined += n * sum(1 for f in user if LINE.search(f))
        if program and any(program.search(f) for f in user):
            matched += n
    print(f"samples {samples}")
    print(f"frames_named {named / max(frames, 1):.3f}")
    print(f"frames_with_line {lined / max(frames, 1):.3f}")
    if program:
        print(f"samples_program {matched / max(samples, 1):.3f}")
    for p in report["profiler"].get("programs", []):
        if p["runs"]:
            print(f"program {p['name']} runs {p['runs']} ns_per_run {p['run_ns'] / p['runs']:.0f}")


main()
