#!/usr/bin/env bash
# Sets up and runs the whole test suite (or the cargo test selection given
# as arguments): unit tests, and integration tests that run the real binary
# on the lab and fixture programs (as root; with KERNTAX_REQUIRE_BPF=1 a BPF
# test that cannot attach fails, not skips); then the kernel matrix.
set -euo pipefail
kerntax_self=$(realpath "$0")
cd "$(dirname "$0")/.."
source scripts/setup.sh
# The HTML report is checked in headless Chromium, the pprof output with
# `go tool pprof` (Debian's Go if there is no Go already).
kerntax_install chromium
# The JVM tests (tests/java.rs) compile their fixture with javac.
kerntax_install openjdk-17-jdk-headless
# tests/top.rs drives `kerntax top`'s screen in tmux.
kerntax_install tmux
# tests/ruby_frames.rs reads a live Debian Ruby's frames.
kerntax_install ruby3.1
# tests/node_frames.rs reads a live node's JavaScript frames.
kerntax_install nodejs
# tests/go_frames.rs builds its fixture with every Go here: Debian 12's Go
# 1.19 (the table layout Debian's Go programs carry) beside any other.
kerntax_install golang-1.19-go
if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
    kerntax_install golang-go
fi
# tests/perfetto.rs reads --perfetto traces with Perfetto's own schema: PyPI
# `perfetto` (pure Python; it brings protobuf) in a venv of Debian's Python,
# made once and kept in target/.
kerntax_install python3.11-venv
perfetto_venv=$PWD/target/perfetto-venv
if ! "$perfetto_venv/bin/python" -c 'import perfetto.protos.perfetto.trace.perfetto_trace_pb2' 2>/dev/null; then
    echo "kerntax setup: making $perfetto_venv (pip install perfetto)" >&2
    rm -rf "$perfetto_venv"
    /usr/bin/python3.11 -m venv "$perfetto_venv"
    "$perfetto_venv/bin/pip" install -q perfetto==0.59.1 ||
        echo "kerntax setup: could not install perfetto; tests/perfetto.rs will say so" >&2
fi
export KERNTAX_PERFETTO_PYTHON=$perfetto_venv/bin/python
# tests/agent.rs pushes to a real Parca server, built once per machine into
# a cache keyed by its version (scripts/parca.sh; ~6 min and ~2.3 GB of Go
# modules the first time), alongside kerntax's own build.
parca_log=$(mktemp)
scripts/parca.sh >"$parca_log.path" 2>"$parca_log" &
parca_build=$!
cargo build --release --quiet
if wait "$parca_build"; then
    KERNTAX_PARCA=$(tail -n 1 "$parca_log.path")
    export KERNTAX_PARCA
else
    tail -n 20 "$parca_log" >&2
    echo "kerntax setup: could not build Parca; tests/agent.rs will say so" >&2
fi
rm -f "$parca_log" "$parca_log.path"
# One test at a time: the tests that check no BPF program is left behind
# must not see another test's kerntax.
# Arguments go to cargo test (e.g. `--test real` runs one test binary).
cargo test --release --quiet "$@" -- --test-threads=1
# The kernel matrix (issue 35): the exact counts, the lab's stories and two
# corpus programs inside Debian's 5.10, 6.1 and 6.12 kernels under qemu
# (scripts/matrix.sh), after the suite, which ran on this machine's kernel.
# The whole suite runs it; a selection (arguments) only with
# KERNTAX_MATRIX=1, and KERNTAX_MATRIX=0 leaves it out.
if [ "${KERNTAX_MATRIX:-$([ $# -eq 0 ] && echo 1 || echo 0)}" = 1 ]; then
    scripts/matrix.sh
fi
