#!/usr/bin/env bash
# Records the corpus that tests/replay.rs analyses without root: RUNS runs
# (default 3) of each variant of every lab story (the recordings `kerntax
# demo` writes) and of every corpus program (tests/real/NAME/run with
# KERNTAX_RECORD), into tests/recordings/{lab,real}/NAME/VARIANT-K.rec. A
# new run takes the next free K, so runs accumulate: a run that once failed
# in the live suite stays beside the others (see the README's Contributors
# section). Needs root, as the live suite does; ~25 minutes for 3 runs.
#
# Usage: scripts/record-corpus.sh [-n RUNS] [lab | real | NAME...]
#   (NAME: a lab story or a corpus program; none: all of both)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
runs=3
if [ "${1:-}" = -n ]; then
    runs=${2:?-n RUNS}
    shift 2
fi
cargo build --release --quiet
kerntax=$PWD/target/release/kerntax
out=$PWD/tests/recordings
lab_names=$("$kerntax" demo --list | awk '/^[a-z0-9-]+$/ {print $1}')
real_names=$(for d in tests/real/*/run; do basename "$(dirname "$d")"; done)
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(lab real)
wanted() {
    local w
    for w in "${want[@]}"; do
        [ "$w" = "$1" ] || [ "$w" = "$2" ] && return 0
    done
    return 1
}
# The next free VARIANT-K.rec in DIR.
next() {
    local k=1
    while [ -e "$1/$2-$k.rec" ]; do k=$((k + 1)); done
    echo "$1/$2-$k.rec"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((i = 1; i <= runs; i++)); do
    for name in $lab_names; do
        wanted lab "$name" || continue
        rm -rf "$tmp/demo"
        "$kerntax" demo "$name" --out "$tmp/demo" >/dev/null
        mkdir -p "$out/lab/$name"
        for rec in "$tmp/demo/$name"-*.rec; do
            variant=$(basename "$rec" .rec)
            variant=${variant#"$name"-}
            dest=$(next "$out/lab/$name" "$variant")
            cp "$rec" "$dest"
            echo "recorded $dest"
        done
    done
    for name in $real_names; do
        wanted real "$name" || continue
        mkdir -p "$out/real/$name"
        for variant in bad healthy; do
            dest=$(next "$out/real/$name" "$variant")
            if KERNTAX="$kerntax" KERNTAX_RECORD="$dest" tests/real/"$name"/run "$variant" \
                "$tmp/report.json" >"$tmp/out" 2>&1; then
                echo "recorded $dest"
            else
                rm -f "$dest"
                echo "record-corpus: $name $variant failed:" >&2
                tail -n 5 "$tmp/out" >&2
            fi
        done
    done
done
du -sh "$out"
