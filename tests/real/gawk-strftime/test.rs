//! gawk-strftime (issue 19): a library call issuing a syscall per call.
//! gawk formats 1,000,000 timestamps with strftime(); with TZ unset glibc
//! stats /etc/localtime on every call (1,000,023 newfstatat, 9,999 of
//! 10,000 on /etc/localtime under strace), with TZ set 24 in all.
use super::*;

#[test]
fn gawk_formatting_dates_with_tz_unset_stats_the_zone_file_per_call_and_with_tz_set_does_not() {
    live("gawk-strftime");
}

/// What `gawk_formatting_dates_with_tz_unset_stats_the_zone_file_per_call_and_with_tz_set_does_not` asserts of a bad and a healthy run, live or recorded.
pub fn gawk_formatting_dates_with_tz_unset_stats_the_zone_file_per_call_and_with_tz_set_does_not_holds(
    bad: &Report,
    healthy: &Report,
) {
    let f = first(bad, "syscall.storm");
    assert_eq!(f.culprit.name, "newfstatat", "{f:?}");
    // One per line, and a few of gawk's own.
    let calls = syscall(bad, "newfstatat").calls;
    assert!((1_000_000..1_001_000).contains(&calls), "{calls}");
    // The file its calls name, and the glibc function that makes them.
    assert!(
        f.title.contains("on /etc/localtime"),
        "{}: {:?}",
        f.title,
        syscall(bad, "newfstatat").paths
    );
    assert!(has_frame(&f.culprit.frames, "__tzfile_read"), "{f:?}");
    assert!(f.remedy.contains("TZ=:/etc/localtime"), "{}", f.remedy);
    nothing_idle_is_contention(bad);
    lacks(healthy, "syscall.storm");
    // The loader's and gawk's own stats only (the test's environment has
    // a long library path: a few hundred).
    let stats = healthy
        .syscalls
        .iter()
        .find(|s| s.name == "newfstatat")
        .map_or(0, |s| s.calls);
    assert!(stats < 1_000, "{stats}");
}
