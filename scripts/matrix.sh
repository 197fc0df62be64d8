#!/usr/bin/env bash
# The kernel matrix (issue 35): boots each stock Debian kernel users run
# (5.10 of Debian 11, 6.1 of Debian 12, 6.12 of Debian 13; this machine's
# own kernel is the suite's) under qemu (scripts/kernels.sh) and runs inside
# it, as root on this checkout's build: tests/exact_counts.rs,
# tests/any_kernel.rs (`kerntax run -- /bin/true`, what the kernel lacks
# and its cost, every lab story bad and fixed, two corpus programs) and the
# faults of tests/faults.rs that hang on how the kernel sends a process's
# mappings (an exec mid-run, a child gone before kerntax read its map,
# libraries mapped in turn at one address). It
# also prints what the verifier reports of each program there. Fails if
# any kernel fails. scripts/test.sh runs it after the suite.
#
#   scripts/matrix.sh [KVER...]      (default: 5.10 6.1 6.12)
# Needs the release build and test binaries (scripts/test.sh builds them)
# and qemu-system-x86 (installed here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
kerntax_self=$(realpath "$0")
source scripts/setup.sh
kerntax_install qemu-system-x86 xz-utils zstd cpio

kernels=("$@")
[ ${#kernels[@]} -gt 0 ] || kernels=(5.10 6.1 6.12)

# The test binaries, as cargo built them (their paths are this checkout's,
# which the guest sees read-only at the same place).
mapfile -t bins < <(cargo test --release --no-run --message-format=json \
    --test exact_counts --test any_kernel --test faults 2>/dev/null |
    grep -o '"executable":"[^"]*/deps/[^"]*"' | cut -d'"' -f4)
[ ${#bins[@]} -eq 3 ] || { echo "matrix: the test binaries were not built" >&2; exit 2; }
# Of tests/faults.rs, the faults that the kernel's mapping events and
# user-memory copies decide (both tests named issue_35 among them).
faults_run="a_target_that_execs_mid_run issue_35 libraries_mapped_in_turn lost_mapping_change"
kx=$PWD/target/release/kerntax
cargo_bin=$(dirname "$(command -v cargo)")

scripts/kernels.sh prepare "${kernels[@]}"

summary=()
# Kernels run side by side, one emulating thread each, as many as this
# machine has CPUs (after the suite, which wants them all).
jobs=${KERNTAX_MATRIX_JOBS:-$(nproc)}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
one() { # KVER: runs the matrix's tests in it; its log in $logs/KVER
    local k=$1 t0 rc=0
    t0=$(date +%s)
    # In the guest: BPF tests must run (KERNTAX_REQUIRE_BPF), cargo's
    # directory on PATH for the corpus scripts' set-up check, the test
    # binaries one test at a time as in the suite.
    local cmd="export KERNTAX_REQUIRE_BPF=1 CI=true PATH=\$PATH:$cargo_bin
cd $PWD
echo '--- what the verifier reports of each program (instructions loaded, verified)'
KERNTAX_DEBUG=1 $kx run -- /bin/true 2>&1 | grep -E 'debug: (kt_|loading and attaching)' | sed 's/^kerntax: debug: //'
rc=0
for b in ${bins[*]}; do
    echo \"--- \$(basename \$b)\"
    only=
    case \$(basename \$b) in faults-*) only=\"$faults_run\" ;; esac
    # The fallbacks test acts out 5.10 on the host; here the kernel is real.
    \$b --test-threads=1 --skip as_on_a_kernel_without \$only || rc=1
done
exit \$rc"
    scripts/kernels.sh run "$k" -c 2 -t 1800 -s "$PWD" -- "$cmd" >"$logs/$k" 2>&1 || rc=$?
    echo "$rc $(($(date +%s) - t0))" >"$logs/$k.rc"
}
for k in "${kernels[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    echo "matrix: kernel $k started" >&2
    one "$k" &
done
wait
failed=()
for k in "${kernels[@]}"; do
    read -r rc secs <"$logs/$k.rc" || { rc=1; secs=?; }
    echo "===== kernel $k" >&2
    cat "$logs/$k" >&2
    if [ "$rc" = 0 ]; then
        summary+=("kernel $k: passed in $secs s")
    else
        failed+=("$k")
        summary+=("kernel $k: FAILED (exit $rc) after $secs s")
    fi
done
printf 'matrix: %s\n' "${summary[@]}" >&2
if [ ${#failed[@]} -gt 0 ]; then
    echo "matrix: failed on ${failed[*]}" >&2
    exit 1
fi
