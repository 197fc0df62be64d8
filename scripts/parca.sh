#!/usr/bin/env bash
# Builds the Parca server that tests/agent.rs pushes to, once per machine,
# into a cache directory keyed by its version, and prints the binary's path.
#
# Parca v0.28.0 is Apache-2.0 and its Go module is served by the Go module
# proxy, but `go install ...@v0.28.0` fails here (it looks up the version
# list, which the proxy refuses), so it is built from a throw-away module
# that requires it. The first build downloads ~2.3 GB of modules and takes
# ~6.5 min on 2 cores; later calls only check the binary.
set -euo pipefail
version=v0.28.0
cache=${KERNTAX_E2E_CACHE:-$HOME/.cache/kerntax-e2e}
dir=$cache/parca-$version
bin=$dir/parca
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
    echo "$bin"
    exit 0
fi

# Parca's go.mod needs a recent Go (1.24 or newer). A Go that is too old, or
# none, gets Go's own toolchain module from the same proxy.
need_minor=24
go_bin=$(command -v go || true)
[ -z "$go_bin" ] && [ -x /usr/local/go/bin/go ] && go_bin=/usr/local/go/bin/go
go_minor() { "$1" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p'; }
if [ -z "$go_bin" ] || [ "$(go_minor "$go_bin")" -lt "$need_minor" ] 2>/dev/null || [ -z "$(go_minor "$go_bin")" ]; then
    toolchain=go1.26.8
    tdir=$cache/$toolchain
    if [ ! -x "$tdir/bin/go" ]; then
        echo "kerntax setup: fetching Go $toolchain from the Go module proxy" >&2
        rm -rf "$tdir.tmp" && mkdir -p "$tdir.tmp"
        curl -sSfL -o "$tdir.tmp/t.zip" \
            "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-$toolchain.linux-amd64.zip"
        (cd "$tdir.tmp" && /usr/bin/python3.11 -m zipfile -e t.zip x)
        rm -rf "$tdir" && mv "$tdir.tmp/x/golang.org/toolchain@v0.0.1-$toolchain.linux-amd64" "$tdir"
        chmod +x "$tdir"/bin/* "$tdir"/pkg/tool/*/*
        rm -rf "$tdir.tmp"
    fi
    go_bin=$tdir/bin/go
fi

echo "kerntax setup: building Parca $version into $dir (first time on this machine: ~7 min)" >&2
work=$dir.build
rm -rf "$work" && mkdir -p "$work"
cd "$work"
cat > go.mod <<MOD
module kerntax.local/parca-build

go 1.24

require github.com/parca-dev/parca $version
MOD
cat > tools.go <<'GO'
//go:build tools

package tools

import _ "github.com/parca-dev/parca/cmd/parca"
GO
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
"$go_bin" build -o parca github.com/parca-dev/parca/cmd/parca >&2
mkdir -p "$dir"
mv parca "$bin"
cd / && rm -rf "$work"
echo "$bin"
