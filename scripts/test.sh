#!/usr/bin/env bash
# Sets up and runs the whole test suite: unit tests, and integration tests
# that run the real binary on the lab and fixture programs (as root; with
# KERNTAX_REQUIRE_BPF=1 a BPF test that cannot attach fails, not skips).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo build --release --quiet
# One test at a time: the tests that check no BPF program is left behind
# must not see another test's kerntax.
cargo test --release --quiet -- --test-threads=1
