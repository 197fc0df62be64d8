//! redis-aof (issue 37, a blind case: first profiled with the binary
//! before io.synchronous, which reported nothing): Debian's redis-server
//! with its append-only file flushed on every write (`appendfsync
//! always`) against once a second (`everysec`, its default), under 20
//! redis-benchmark clients doing SET. Ground truth (without kerntax):
//! 21.1-27.9 k SET/s against 57.3-58.0 k; see README.md.
use super::*;

#[test]
fn redis_flushing_its_log_per_write_waits_for_the_disk_and_once_a_second_does_not() {
    live("redis-aof");
}

fn fdatasyncs(r: &Report) -> u64 {
    r.syscalls
        .iter()
        .find(|s| s.name == "fdatasync")
        .map_or(0, |s| s.calls)
}

/// What `redis_flushing_its_log_per_write_waits_for_the_disk_and_once_a_second_does_not` asserts of a bad and a healthy run, live or recorded.
pub fn redis_flushing_its_log_per_write_waits_for_the_disk_and_once_a_second_does_not_holds(
    bad: &Report,
    healthy: &Report,
) {
    let f = first(bad, "io.synchronous");
    assert_eq!(f.culprit.name, "fdatasync", "{f:?}");
    // Redis's own function, named on a stripped distribution binary (its
    // dynamic symbols), on the main thread.
    assert!(has_frame(&f.culprit.frames, "flushAppendOnlyFile"), "{f:?}");
    assert!(f.title.contains("flushAppendOnlyFile"), "{}", f.title);
    assert!(f.title.contains("of redis-server's time"), "{}", f.title);
    // Hundreds of flushes a second, not one.
    let per_s = fdatasyncs(bad) as f64 / (bad.duration_ns as f64 / 1e9);
    assert!(per_s >= 200.0, "{per_s}");

    // Once a second, by a background thread: nothing to batch.
    let per_s = fdatasyncs(healthy) as f64 / (healthy.duration_ns as f64 / 1e9);
    assert!(per_s <= 5.0, "{per_s}");
    lacks(healthy, "io.synchronous");
}
