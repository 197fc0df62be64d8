# Shared by the real-program corpus scripts (tests/real/*/run): installing
# Debian packages idempotently, profiling a command or a server with kerntax,
# and cleaning up. Sourced, never run.
#
# Contract of a program's script `tests/real/NAME/run VARIANT OUT.json`:
# it installs what it needs (only what is missing), prepares its data under
# a temporary directory, runs the workload on loopback only, bounded in time
# (a few seconds), profiled by kerntax ($KERNTAX, default: the release
# binary of this checkout) into OUT.json, stops everything it started, and
# prints the program's own throughput as one `throughput: ...` line.
# With KERNTAX=none it runs the same workload without kerntax (for the
# ground truth measured with perf, bpftrace or the program's own figures).
# With KERNTAX_RECORD=FILE kerntax also writes its recording there
# (scripts/record-corpus.sh).

set -euo pipefail

real_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../../scripts/setup.sh
source "$real_top/scripts/setup.sh"
KERNTAX=${KERNTAX:-$real_top/target/release/kerntax}

# Installs the given Debian packages where missing (as setup.sh does).
real_install() {
    kerntax_install "$@"
}

# A fresh work directory, removed at exit.
real_workdir() {
    real_dir=$(mktemp -d "${TMPDIR:-/tmp}/kerntax-real.XXXXXX")
    chmod 755 "$real_dir"
    real_cleanup_add "rm -rf '$real_dir'"
}

real_cleanups=()
real_cleanup_add() {
    real_cleanups+=("$1")
}
real_cleanup() {
    local i
    for ((i = ${#real_cleanups[@]} - 1; i >= 0; i--)); do
        eval "${real_cleanups[$i]}" || true
    done
}
trap real_cleanup EXIT

# real_profile_run OUT.json -- CMD ARGS: profiles a batch command.
real_profile_run() {
    local out=$1
    shift 2
    if [ "$KERNTAX" = none ]; then
        "$@"
    else
        "$KERNTAX" run --json "$out" ${KERNTAX_RECORD:+--record "$KERNTAX_RECORD"} -- "$@"
    fi
}

# real_profile_attach OUT.json PID SECS: profiles a running server for SECS
# seconds in the background, returning once kerntax says it profiles (its
# "kerntax: profiling pid" line), so that a load started next is profiled
# from its first second (a fixed half-second sleep let a JVM's load start
# before kerntax had attached); real_profile_wait waits for the report.
real_profile_attach() {
    local out=$1 pid=$2 secs=$3 said i
    if [ "$KERNTAX" = none ]; then
        real_attach_pid=
        return
    fi
    said=$(mktemp "${TMPDIR:-/tmp}/kerntax-attach.XXXXXX")
    real_cleanup_add "rm -f '$said'"
    "$KERNTAX" attach "$pid" --duration "$secs" --json "$out" \
        ${KERNTAX_RECORD:+--record "$KERNTAX_RECORD"} 2> >(tee "$said" >&2) &
    real_attach_pid=$!
    for ((i = 0; i < 600; i++)); do
        grep -q '^kerntax: profiling pid' "$said" && return 0
        kill -0 "$real_attach_pid" 2>/dev/null || return 0
        sleep 0.05
    done
    echo "real: kerntax attach said nothing in 30 s" >&2
}
real_profile_wait() {
    if [ -n "${real_attach_pid:-}" ]; then
        wait "$real_attach_pid"
    fi
}

# Waits up to 10 s until TCP port $1 on 127.0.0.1 accepts connections.
real_wait_port() {
    local i
    for ((i = 0; i < 100; i++)); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    echo "real: nothing listens on port $1" >&2
    return 1
}

# The first TCP port from $1 up on 127.0.0.1 that nothing listens on and
# no socket uses (a server left over from an earlier run, or a client's
# connection on it as its local port, must not make this one fail: CI once
# saw PostgreSQL's bind fail on a port nothing listened on). Callers start
# below the kernel's ephemeral range (32768 up), where clients' own ports
# are not drawn from.
real_free_port() {
    local port=$1
    while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null ||
        { command -v ss >/dev/null && [ -n "$(ss -Htan "( sport = :$port )")" ]; }; do
        port=$((port + 1))
    done
    echo "$port"
}
