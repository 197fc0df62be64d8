#!/usr/bin/env bash
# Installs what building and testing kerntax needs on Debian 12, idempotently:
# only missing packages are installed, and Rust only when cargo is absent.
# Sourced by scripts/demo.sh and scripts/test.sh; safe to run on its own.
set -euo pipefail

# BPF and apt need root. Not root: the calling script runs again through
# sudo when there is one (with the caller's PATH, for its cargo), else says
# what to do. `kerntax_self` is the calling script's absolute path (it has
# changed directory by now); sourced, "$@" are its arguments.
if [ "$(id -u)" -ne 0 ]; then
    self=${kerntax_self:-$0}
    if command -v sudo >/dev/null 2>&1; then
        echo "kerntax setup: not root; running $self again through sudo (BPF and apt need root)" >&2
        keep=("PATH=$PATH")
        [ -d "${RUSTUP_HOME:-$HOME/.rustup}" ] && keep+=("RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}")
        [ -d "${CARGO_HOME:-$HOME/.cargo}" ] && keep+=("CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}")
        exec sudo env "${keep[@]}" "$self" "$@"
    fi
    echo "kerntax setup: BPF and apt need root, and there is no sudo: run it as root, e.g. su -c '$self'" >&2
    exit 1
fi

# clang builds the BPF programs; autoconf..m4 build the vendored libelf/zlib
# of libbpf-sys; gcc and libc6-dev build the lab and fixture programs;
# linux-libc-dev gives the syscall and errno name tables; libc6-dbg gives libc
# frames file:line; util-linux (setpriv, unshare) and strace are used by tests;
# python3.11 (Debian's, /usr/bin) runs the Python frame tests' fixtures.
packages=(clang autoconf automake autopoint flex bison gawk m4 make gcc libc6-dev
          linux-libc-dev libc6-dbg pkg-config util-linux strace ca-certificates curl
          python3.11)
# Installs those of the given Debian packages that are missing.
kerntax_install() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "kerntax setup: installing ${missing[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}
kerntax_install "${packages[@]}"

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "kerntax setup: installing Rust (rustup, stable)" >&2
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal >/dev/null
    export PATH="$HOME/.cargo/bin:$PATH"
fi
