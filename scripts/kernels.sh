#!/usr/bin/env bash
# Boots a stock Debian kernel under qemu with this machine's root filesystem
# shared read-only, and runs a command in it as root: kerntax's kernel
# matrix (scripts/matrix.sh) runs its tests on the kernels users have this
# way, not only on the one this machine boots.
#
#   scripts/kernels.sh prepare KVER...            download and unpack, build each initramfs
#   scripts/kernels.sh run KVER [-c CPUS] [-t SECS] [-s DIR]... -- CMD [ARGS...]
#                                                 boot KVER, run CMD, print its stdout and
#                                                 stderr, exit with its status; -s: a
#                                                 directory of this machine's /tmp the
#                                                 command needs (a checkout there)
#   KVER: 5.10 (Debian 11), 6.1 (Debian 12), 6.12 (Debian 13): the newest
#   Debian build of that line, from this machine's Debian mirror.
#
# Exit status of `run`: CMD's; 124 the guest ran out of time; 125 it died
# before CMD ran (the console's end is printed); 2 usage or set-up errors.
#
# The guest: Debian's generic linux-image-*-amd64, booted directly with a
# busybox initramfs that loads the virtio and 9p modules from the same
# package; "/" is this machine's root read-only over 9p; /tmp, /run and
# /dev/shm are fresh tmpfs (with the -s directories of this machine's /tmp
# in it, read-only); proc, sysfs, devtmpfs, tracefs, debugfs, bpffs
# and cgroup2 are mounted; CMD runs through /bin/sh as root with HOME=/tmp,
# no network, its output written to a run directory shared read-write and
# printed when the guest has powered off.
#
# CPUs: the default is 2, emulated by one host thread (qemu's TCG with
# thread=single) where /dev/kvm cannot run a stock kernel (this machine's
# is nested PVM): the lab's lock stories need two CPUs to contend, and one
# thread keeps the emulation of live kernel text patching (which attaching
# BPF programs does) coherent across CPUs, which several threads did not
# (a guest once oopsed at a patched jump label). Timings under emulation
# mean nothing; what the kernel loads, verifies and counts is its own.
#
# Cache (idempotent; delete any part to redo it): $KERNTAX_KERNELS_DIR,
# default /var/tmp/kerntax-kernels: apt/ (a private apt state: this
# machine's own sources and package state are untouched), debs/, x/
# (unpacked), KVER/ (vmlinuz, initrd, release), runs/ (one per run).
set -euo pipefail

ROOT=${KERNTAX_KERNELS_DIR:-/var/tmp/kerntax-kernels}
die() { echo "kernels: $*" >&2; exit 2; }
say() { echo "kernels: $*" >&2; }

APT=(-o "Dir::Etc::SourceList=$ROOT/apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
    -o "Dir::State::Lists=$ROOT/apt/lists" -o "Dir::Cache=$ROOT/apt/cache"
    -o Dir::State::status=/dev/null -o Debug::NoLocking=1 -o APT::Sandbox::User=root)

suite_of() {
    case $1 in
    5.10) echo bullseye ;;
    6.1) echo bookworm ;;
    6.12) echo trixie ;;
    *) die "unknown kernel '$1' (5.10, 6.1 or 6.12)" ;;
    esac
}

# This machine's Debian mirror (scheme and host), as its own apt uses it.
mirror() {
    local m
    m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ {print $2; exit}')
    [ -n "$m" ] || m=$(awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' \
        /etc/apt/sources.list 2>/dev/null)
    [ -n "$m" ] || die "no Debian mirror in this machine's apt sources"
    m=${m%/}
    echo "${m%/debian}"
}

apt_lists() {
    mkdir -p "$ROOT/apt/lists/partial" "$ROOT/apt/cache/archives/partial" "$ROOT/debs"
    local m key=/usr/share/keyrings/debian-archive-keyring.gpg s
    m=$(mirror)
    : >"$ROOT/apt/sources.list.new"
    for s in bullseye bookworm trixie; do
        echo "deb [signed-by=$key] $m/debian $s main" >>"$ROOT/apt/sources.list.new"
        echo "deb [signed-by=$key] $m/debian-security $s-security main" >>"$ROOT/apt/sources.list.new"
    done
    mv "$ROOT/apt/sources.list.new" "$ROOT/apt/sources.list"
    if ! ls "$ROOT/apt/lists/" | grep -qi packages || [ "${1:-}" = refresh ]; then
        say "apt-get update (private lists in $ROOT/apt)"
        apt-get "${APT[@]}" -qq update >&2
    fi
}

# The newest linux-image-<abi>-amd64 of kernel line $1 (from the
# metapackage's dependencies, whose version begins with the line).
image_package() {
    apt-cache "${APT[@]}" show linux-image-amd64 2>/dev/null |
        awk -v pre="$1." '/^Version:/ {v = $2} /^Depends:/ {if (index(v, pre) == 1) print v, $2}' |
        sort -V | tail -n 1 | cut -d' ' -f2
}

download() { # package
    ls "$ROOT/debs/$1"_*.deb >/dev/null 2>&1 && return 0
    (cd "$ROOT/debs" && apt-get "${APT[@]}" -qq download "$1" >&2)
}

ko_cat() {
    case $1 in *.xz) xz -dc "$1" ;; *.zst) zstd -dcq "$1" ;; *) cat "$1" ;; esac
}

# Appends module $2 and, first, the modules it depends on (as its .modinfo
# names them: the package has no modules.dep, depmod writes it at install).
declare -A SEEN
ORDER=()
module_closure() { # moddir name
    local dir=$1 name=${2//-/_} path dep
    [ -n "${SEEN[$name]:-}" ] && return 0
    SEEN[$name]=1
    path=$(find "$dir/kernel" \( -name "$name.ko*" -o -name "${name//_/-}.ko*" \) -print -quit)
    if [ -z "$path" ]; then
        grep -qE "/(${name}|${name//_/-})\.ko$" "$dir/modules.builtin" 2>/dev/null ||
            say "module $name not found (taken as built in)"
        return 0
    fi
    for dep in $(ko_cat "$path" | grep -a -o 'depends=[A-Za-z0-9_,-]*' | head -n 1 | cut -d= -f2 | tr , ' '); do
        module_closure "$dir" "$dep"
    done
    ORDER+=("$path")
}

write_init() { # file
    cat >"$1" <<'EOF'
#!/bin/busybox sh
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sysfs /sys
$B mount -t devtmpfs devtmpfs /dev
echo 1 >/proc/sys/kernel/printk
for m in $($B cat /modules); do $B insmod /lib/modules/$m || echo "kernels-init: insmod $m failed"; done
fail() { echo "kernels-init: $*"; $B sync; $B poweroff -f; }
o=trans=virtio,version=9p2000.L,msize=262144
R=/newroot
$B mount -t 9p -o $o,ro,cache=loose hostroot $R || fail "mounting the host's root failed"
$B mount -o bind $R/tmp /hosttmp
$B mount -t tmpfs -o mode=1777 tmpfs $R/tmp
$B mount -t tmpfs -o mode=755 tmpfs $R/run
$B mkdir -p $R/run/kernels
$B mount -t 9p -o $o out $R/run/kernels || fail "mounting the run directory failed"
# Directories of the host's /tmp the command needs (a checkout there),
# read-only at their own paths in the fresh /tmp.
for p in $($B cat $R/run/kernels/show 2>/dev/null); do
    $B mkdir -p $R/tmp/$p && $B mount -o bind /hosttmp/$p $R/tmp/$p || fail "showing /tmp/$p failed"
done
$B mount -t proc proc $R/proc
$B mount -t sysfs sysfs $R/sys
$B mount -t devtmpfs devtmpfs $R/dev
$B mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts $R/dev/pts 2>/dev/null
$B mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm 2>/dev/null
$B mount -t tracefs tracefs $R/sys/kernel/tracing 2>/dev/null
$B mount -t debugfs debugfs $R/sys/kernel/debug 2>/dev/null
$B mount -t bpf bpf $R/sys/fs/bpf 2>/dev/null
$B mount -t cgroup2 cgroup2 $R/sys/fs/cgroup 2>/dev/null
# The guest's clock against this machine's (the emulated RTC keeps the
# host's time): a TSC calibrated wrong at boot by a busy emulator once ran
# a 6.12 guest's clock 15 times too fast, and every time and rate of that
# run with it (CI failed on a storm of 6.7 k calls/s that was 100 k/s).
# 2 s of the RTC must be 1.5-2.7 s of the guest's clock (each second's edge
# is seen within one read of it); else the command is not run and the host
# boots the guest again.
centis() { echo $(( ${1%.*} * 100 + 1${1#*.} - 100 )); }
rtc=/sys/class/rtc/rtc0/since_epoch
if [ -r $rtc ]; then
    read s0 <$rtc; s=$s0
    while [ "$s" = "$s0" ]; do read s <$rtc; done
    read u0 rest </proc/uptime
    while [ "$s" -lt $((s0 + 3)) ]; do read s <$rtc; done
    read u1 rest </proc/uptime
    cs=$(( $(centis $u1) - $(centis $u0) ))
    echo "$cs" >$R/run/kernels/clock
    if [ "$cs" -lt 150 ] || [ "$cs" -gt 270 ]; then
        echo "kernels-init: 2 s of the RTC were $cs/100 s of this kernel's clock"
        : >$R/run/kernels/clock_off
        $B sync; $B umount $R/run/kernels; $B poweroff -f
    fi
fi
echo "kernels-init: running"
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TERM=dumb LANG=C.UTF-8
$B chroot $R /bin/sh -c 'cd / && exec /bin/sh /run/kernels/cmd.sh' \
    >$R/run/kernels/stdout 2>$R/run/kernels/stderr </dev/null
echo $? >$R/run/kernels/rc
echo "kernels-init: done"
$B sync
$B umount $R/run/kernels
$B poweroff -f
EOF
    chmod 755 "$1"
}

prepare() { # KVER
    local kv=$1 dir=$ROOT/$1 init version
    suite_of "$kv" >/dev/null
    # Ready when built by this script's init (a changed init rebuilds it).
    init=$(mktemp)
    write_init "$init"
    version=$(md5sum <"$init" | cut -d' ' -f1)
    rm -f "$init"
    [ "$(cat "$dir/ready" 2>/dev/null)" = "$version" ] && return 0
    command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is missing (apt-get install qemu-system-x86)"
    apt_lists
    local pkg
    pkg=$(image_package "$kv")
    [ -n "$pkg" ] || die "no linux-image package of $kv in the apt lists"
    if ! download "$pkg"; then
        say "download failed: refreshing the lists"
        apt_lists refresh
        pkg=$(image_package "$kv")
        download "$pkg" || die "cannot download $pkg"
    fi
    download busybox-static || die "cannot download busybox-static"
    say "kernel $kv: $pkg"
    local rel=${pkg#linux-image-} x=$ROOT/x/${pkg#linux-image-} bb=$ROOT/x/busybox
    if [ ! -d "$x/boot" ]; then
        rm -rf "$x.tmp" && mkdir -p "$x.tmp"
        dpkg-deb -x "$(ls "$ROOT/debs/$pkg"_*.deb | head -n 1)" "$x.tmp"
        mv "$x.tmp" "$x"
    fi
    if [ ! -d "$bb" ]; then
        rm -rf "$bb.tmp" && mkdir -p "$bb.tmp"
        dpkg-deb -x "$(ls "$ROOT"/debs/busybox-static_*.deb | sort -V | tail -n 1)" "$bb.tmp"
        mv "$bb.tmp" "$bb"
    fi
    local busybox moddir c
    busybox=$(ls "$bb/bin/busybox" "$bb/usr/bin/busybox" 2>/dev/null | head -n 1) || true
    [ -n "$busybox" ] || die "no busybox in $bb"
    for c in "$x/lib/modules/$rel" "$x/usr/lib/modules/$rel"; do [ -d "$c" ] && moddir=$c; done
    [ -n "${moddir:-}" ] || die "no modules in $x"
    local stage=$ROOT/$kv.stage m
    rm -rf "$stage" && mkdir -p "$stage"/{bin,dev,proc,sys,newroot,hosttmp,lib/modules}
    cp "$busybox" "$stage/bin/busybox"
    mknod "$stage/dev/console" c 5 1
    mknod "$stage/dev/null" c 1 3
    SEEN=()
    ORDER=()
    for m in virtio_pci 9pnet_virtio 9p; do module_closure "$moddir" "$m"; done
    : >"$stage/modules"
    for m in "${ORDER[@]}"; do
        local b
        b=$(basename "$m")
        b=${b%.xz}
        b=${b%.zst}
        ko_cat "$m" >"$stage/lib/modules/$b"
        echo "$b" >>"$stage/modules"
    done
    write_init "$stage/init"
    mkdir -p "$dir"
    (cd "$stage" && find . | "$stage/bin/busybox" cpio -o -H newc 2>/dev/null | gzip -1) >"$dir/initrd"
    cp "$x/boot/vmlinuz-$rel" "$dir/vmlinuz"
    echo "$rel" >"$dir/release"
    rm -rf "$stage"
    echo "$version" >"$dir/ready"
    say "kernel $kv ($rel) ready in $dir"
}

run() { # KVER [-c N] [-t S] [-s DIR]... -- CMD...
    local kv=$1 cpus=2 secs=900 show=()
    shift
    while [ $# -gt 0 ]; do
        case $1 in
        -c) cpus=$2; shift ;;
        -t) secs=$2; shift ;;
        -s) show+=("$2"); shift ;;
        --) shift; break ;;
        *) die "unknown option $1 (the command goes after --)" ;;
        esac
        shift
    done
    [ $# -ge 1 ] || die "no command (kernels.sh run $kv -- CMD)"
    mkdir -p "$ROOT"
    (flock 9; prepare "$kv") 9>"$ROOT/.lock" || die "preparing kernel $kv failed"
    local dir=$ROOT/$kv out
    mkdir -p "$ROOT/runs"
    out=$(mktemp -d "$ROOT/runs/$kv-$(date -u +%Y%m%dT%H%M%S)-XXXX")
    chmod 755 "$out"
    if [ $# -eq 1 ]; then printf '%s\n' "$1"; else printf '%q ' "$@"; echo; fi >"$out/cmd.sh"
    # The guest's /tmp is its own: what it needs of this one is shown.
    local d
    for d in "${show[@]}"; do
        d=$(realpath "$d")
        case $d in /tmp/*) echo "${d#/tmp/}" >>"$out/show" ;; esac
    done
    # A real KVM runs the stock kernel; PVM nesting (kvm_pvm) does not.
    local accel=(-accel tcg,thread=single -cpu max)
    if [ -c /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] && [ "${KERNTAX_KERNELS_ACCEL:-}" != tcg ]; then
        accel=(-accel kvm -cpu host)
    fi
    # Under emulation the kernel distrusts the TSC and reads the HPET, a
    # trap per clock read: clock_gettime leaves the vDSO for a system call
    # (a storm of them in the lab's timed loops) and every BPF clock read
    # costs tens of microseconds.
    local clock=""
    [ "${accel[1]}" = kvm ] || clock="tsc=reliable clocksource=tsc"
    local t0 rc boot
    t0=$(date +%s)
    # A guest whose clock does not keep time (the init's check) did not run
    # the command: it is booted again, twice at most.
    for boot in 1 2 3; do
        rc=0
        rm -f "$out/clock" "$out/clock_off"
        timeout -k 5 "$secs" qemu-system-x86_64 -nodefaults -no-user-config "${accel[@]}" \
            -machine q35 -smp "$cpus" -m 2048 \
            -kernel "$dir/vmlinuz" -initrd "$dir/initrd" \
            -append "console=ttyS0 rdinit=/init panic=-1 quiet loglevel=4 nokaslr $clock" \
            -display none -monitor none -serial "file:$out/console.log" -no-reboot -nic none \
            -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
            -virtfs "local,path=$out,mount_tag=out,security_model=none,multidevs=remap" \
            </dev/null >"$out/qemu.log" 2>&1 || rc=$?
        if [ -f "$out/rc" ] || [ ! -f "$out/clock_off" ]; then break; fi
        say "boot $boot: the guest's clock did not keep time (2 s of the RTC were $(cat "$out/clock")/100 s of it)"
        cp "$out/console.log" "$out/console.$boot.log"
    done
    [ -f "$out/stdout" ] && cat "$out/stdout"
    [ -f "$out/stderr" ] && cat "$out/stderr" >&2
    if [ -f "$out/rc" ]; then
        rc=$(cat "$out/rc")
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        say "the guest ran out of its ${secs} s"
        rc=124
    else
        say "the guest ended before the command ran (qemu exit $rc); its console ends:"
        tail -n 30 "$out/console.log" | tr -d '\r' >&2
        cat "$out/qemu.log" >&2
        rc=125
    fi
    local kept=""
    [ -f "$out/clock" ] && kept="; 2 s of the RTC were $(cat "$out/clock")/100 s of its clock"
    say "kernel $(cat "$dir/release") (${accel[1]}, $cpus CPUs$kept): exit $rc after $(($(date +%s) - t0)) s; run directory $out"
    return "$rc"
}

[ $# -ge 1 ] || { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//;$d' >&2; exit 2; }
cmd=$1
shift
case $cmd in
prepare) mkdir -p "$ROOT"; for k in "$@"; do (flock 9; prepare "$k") 9>"$ROOT/.lock"; done ;;
run) run "$@" ;;
*) die "unknown command '$cmd' (prepare or run)" ;;
esac
