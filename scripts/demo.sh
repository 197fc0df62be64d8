#!/usr/bin/env bash
# Sets up, builds and runs `kerntax demo` (arguments are passed on, e.g. a
# scenario name or --list).
set -euo pipefail
kerntax_self=$(realpath "$0")
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo build --release --quiet
exec ./target/release/kerntax demo "$@"
