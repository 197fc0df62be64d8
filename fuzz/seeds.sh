#!/usr/bin/env bash
# Remakes the seed corpus (fuzz/corpus/NAME) from real files on this
# machine: /proc files of live processes, a JVM's perf map, small ELF
# programs built with each kind of debug info, the golden report. Seeds are
# committed; run this again only to refresh them. Needs cc and java.
set -euo pipefail
cd "$(dirname "$0")"
rm -rf corpus && mkdir -p corpus/{perf_map,proc_maps,proc_status,elf,report_json,recording,jvm_reply,html}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# /proc: this shell's and init's maps and status, an epoll fd's fdinfo.
head -c 3000 /proc/self/maps >corpus/proc_maps/self
head -c 3000 /proc/$PPID/maps >corpus/proc_maps/parent
cat /proc/self/status >corpus/proc_status/self
cat /proc/1/status >corpus/proc_status/init
/usr/bin/python3.11 - >corpus/proc_status/fdinfo-epoll <<'PY'
import os, select, socket
ep = select.epoll()
socks = [socket.socket() for _ in range(3)]
for s in socks:
    ep.register(s.fileno(), select.EPOLLIN)
print(open(f"/proc/self/fdinfo/{ep.fileno()}").read(), end="")
PY

# A JVM's perf map, cut to a few slices (a whole one is ~1 MB).
cat >"$tmp/Seed.java" <<'JAVA'
public class Seed {
    static long spin(int n) { long s = 0; for (int i = 0; i < n; i++) s += i * 31L ^ s; return s; }
    public static void main(String[] a) { long s = 0; for (int i = 0; i < 20000; i++) s += spin(1000); System.out.println(s); }
}
JAVA
(cd "$tmp" && javac Seed.java && java -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit \
    -cp . Seed >/dev/null && pid_map=$(ls /tmp/perf-*.map -t | head -n 1) && mv "$pid_map" jvm.map)
head -n 40 "$tmp/jvm.map" >corpus/perf_map/jvm-head
tail -n 40 "$tmp/jvm.map" >corpus/perf_map/jvm-tail
grep -m 40 ' void \| java\.' "$tmp/jvm.map" >corpus/perf_map/jvm-methods || true
printf '7f8dc0ecb000 100 LazyCompile:*handle /srv/app.js:10\n7f8dc0ecc000 40 py::worker:/srv/w.py\n' \
    >corpus/perf_map/node-python

# ELF: one small C program with each kind of debug info, and a real binary.
cat >"$tmp/p.c" <<'C'
#include <pthread.h>
#include <stdio.h>
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
long g_table[16];
static inline long inner(long x) { return x * 3 + g_table[x & 15]; }
__attribute__((noinline)) long work(long n) { long s = 0; for (long i = 0; i < n; i++) { pthread_mutex_lock(&g_lock); s += inner(i); pthread_mutex_unlock(&g_lock); } return s; }
int main(int argc, char **argv) { printf("%ld\n", work(argc * 1000)); return 0; }
C
cc -O2 -g -o corpus/elf/dwarf5 "$tmp/p.c" -lpthread
cc -O1 -gdwarf-4 -o corpus/elf/dwarf4 "$tmp/p.c" -lpthread
cc -O2 -g -gz=zlib -o corpus/elf/dwarf-zlib "$tmp/p.c" -lpthread
cc -O2 -g -fno-asynchronous-unwind-tables -fno-unwind-tables -o corpus/elf/debug-frame "$tmp/p.c" -lpthread
cc -O2 -s -o corpus/elf/stripped "$tmp/p.c" -lpthread
cc -O2 -g -shared -fPIC -o corpus/elf/shared.so "$tmp/p.c"
cp /usr/bin/true corpus/elf/true

# Reports: the golden one (a lab run's, every section), and version 1.
cp ../tests/golden/report.json corpus/report_json/golden
# A recording as written, and the JSON inside two small ones.
cp ../tests/recordings/lab/prol2tp-tunnels/fixed-1.rec corpus/recording/prol2tp-fixed.rec
gzip -dc <../tests/recordings/lab/prol2tp-tunnels/bad-1.rec >corpus/recording/prol2tp-bad.json
gzip -dc <../tests/recordings/lab/ruby-switch/fixed-1.rec >corpus/recording/ruby-switch-fixed.json
sed 's/"schema_version": *[0-9]*/"schema_version": 1/' ../tests/golden/report.json \
    >corpus/report_json/version1

# Attach listener answers: success with VM.flags' output, refusals.
printf '0\n-XX:CICompilerCount=2 -XX:+PreserveFramePointer -XX:+UseG1GC\n' >corpus/jvm_reply/flags
printf '0\n' >corpus/jvm_reply/perfmap
printf -- '-1\njava.lang.IllegalArgumentException: Unknown diagnostic command\n' >corpus/jvm_reply/refused
printf '101\n' >corpus/jvm_reply/protocol

# Target strings: C++ and Java frames, markup, terminal escapes.
printf 'std::vector<int>::push_back(int const&)\0void Spin.work()\0<script>alert(1)</script>\0\033[31mred' \
    >corpus/html/frames
printf 'g_config_lock\0<img src=x onerror=alert(1)>\0"quoted" & '"'"'single'"'"'\0' >corpus/html/markup
find corpus -type f -empty -delete
find corpus -type f | sort
