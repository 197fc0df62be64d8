#!/usr/bin/env bash
# Fuzzes kerntax's parsers of outside input with libFuzzer (src/fuzz.rs):
#
#   fuzz/run.sh [--seconds S | --runs N] [--seed K] [HARNESS...]
#
# (default: every harness, 5 s each, a random seed). With --runs and --seed
# a run is the same inputs every time: scripts/test.sh's short runs are.
#
# Builds one instrumented binary on stable Rust (coverage through -C flags,
# no nightly, no cargo-fuzz), then runs each harness from its committed
# seeds (fuzz/corpus/NAME; what the run adds goes to a scratch copy, the
# seeds stay as committed): every input at most 1 s, the process at most
# 2 GiB resident (an unbounded allocation fails), overflow checks and
# debug assertions on. Prints one row per harness (executions, seconds,
# coverage, corpus size) and fails if any harness failed, leaving the input
# in fuzz/artifacts/NAME/ (add it to fuzz/regressions/NAME/ with the fix:
# `cargo test --test fuzz` replays those on every run).
set -euo pipefail
cd "$(dirname "$0")"
seconds=5
runs=
seed=()
harnesses=()
while [ $# -gt 0 ]; do
    case $1 in
        --seconds) seconds=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --seed) seed=(-seed="$2"); shift 2 ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) harnesses+=("$1"); shift ;;
    esac
done
if [ ${#harnesses[@]} -eq 0 ]; then
    harnesses=(perf_map proc_maps proc_status elf report_json recording jvm_reply html)
fi
target=x86_64-unknown-linux-gnu
# With --target, the flags reach the code that is fuzzed, not build scripts.
RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares \
--cfg fuzzing" cargo build --release --quiet --target "$target"
bin=$PWD/target/$target/release/kerntax-fuzz
printf '%-12s %12s %8s %8s %8s %s\n' harness executions seconds coverage corpus result
failed=0
for h in "${harnesses[@]}"; do
    work=$(mktemp -d)
    log=$(mktemp)
    mkdir -p "artifacts/$h"
    limit=(-max_total_time="$seconds")
    [ -n "$runs" ] && limit=(-runs="$runs")
    dict=()
    [ -f "dicts/$h.dict" ] && dict=(-dict="dicts/$h.dict")
    status=0
    KERNTAX_FUZZ_HARNESS=$h "$bin" "$work" "corpus/$h" "${limit[@]}" "${seed[@]}" "${dict[@]}" \
        -timeout=1 -rss_limit_mb=2048 -artifact_prefix="artifacts/$h/" \
        -print_final_stats=1 >"$log" 2>&1 || status=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    cov=$( (grep -o 'cov: [0-9]*' "$log" || true) | tail -n 1 | cut -d' ' -f2)
    took=$( (grep -o 'Done [0-9]* runs in [0-9]* second' "$log" || true) | tail -n 1 | awk '{print $5}')
    corpus=$(find "$work" -type f | wc -l)
    if [ "$status" -eq 0 ]; then
        result=ok
    else
        result="FAILED (status $status): $(ls "artifacts/$h" | head -n 1)"
        failed=1
        grep -E 'panicked|ERROR|SUMMARY|timeout|out-of-memory' "$log" | head -n 5 >&2 || true
    fi
    printf '%-12s %12s %8s %8s %8s %s\n' "$h" "${execs:-?}" "${took:-?}" "${cov:-?}" "$corpus" "$result"
    rm -rf "$work" "$log"
done
exit "$failed"
