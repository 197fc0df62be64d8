//! kerntax's own figures: its CPU time and memory (for the report and the
//! debug phase lines) and the clocks BPF's timestamps are on.

use std::time::Instant;

use crate::sched_trace::SchedTrace;

/// kerntax's own resource usage so far (all its threads).
pub(super) fn self_usage() -> libc::rusage {
    // SAFETY: a zeroed rusage is valid; getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru
}

/// kerntax's own CPU time so far (user + system).
pub fn self_cpu_ns() -> u64 {
    let ru = self_usage();
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    ns(ru.ru_utime) + ns(ru.ru_stime)
}

pub(super) fn peak_rss_bytes() -> u64 {
    self_usage().ru_maxrss as u64 * 1024
}

/// A `kB` field of /proc/self/status (0 if unreadable): for the debug
/// print of each phase's memory.
pub fn self_status_kib(field: &str) -> u64 {
    crate::target::status_field("self", field)
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// With KERNTAX_DEBUG set, prints how long each phase took.
pub(super) struct Phases {
    pub(super) on: bool,
    pub(super) last: Instant,
}

impl Phases {
    pub(super) fn mark(&mut self, what: &str) {
        if self.on {
            eprintln!(
                "kerntax: debug: {what}: {:.1} ms; RSS {:.1} MiB, peak {:.1} MiB",
                self.last.elapsed().as_secs_f64() * 1e3,
                self_status_kib("VmRSS") as f64 / 1024.0,
                self_status_kib("VmHWM") as f64 / 1024.0,
            );
        }
        self.last = Instant::now();
    }
}

/// CLOCK_MONOTONIC now, ns: bpf_ktime_get_ns's clock.
pub(super) fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

pub(super) fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The trace with the clocks its writer needs: BOOTTIME's lead over
/// MONOTONIC (traces are on BOOTTIME), and the wall clock at its start.
pub(super) fn clocks(t: SchedTrace) -> SchedTrace {
    let mono = monotonic_ns();
    let (boot, real) = (
        clock_ns(libc::CLOCK_BOOTTIME),
        clock_ns(libc::CLOCK_REALTIME),
    );
    SchedTrace {
        boottime_offset_ns: boot.saturating_sub(mono),
        start_realtime_ns: real.saturating_sub(mono.saturating_sub(t.start_mono_ns)),
        ..t
    }
}

/// `t` in ns since the Unix epoch (0 before it).
pub fn unix_ns(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
