//! rsync-fsync (issue 37, a blind case: first profiled with the binary
//! before io.synchronous, whose first finding was wait.bottleneck on
//! rsync's pipeline): Debian's rsync copying 400 files of 4 KB with
//! `--fsync` against without. Ground truth (without kerntax): 400 fsync;
//! see README.md.
use super::*;

#[test]
fn rsync_flushing_every_file_waits_for_the_disk_and_without_fsync_does_not() {
    live("rsync-fsync");
}

/// What `rsync_flushing_every_file_waits_for_the_disk_and_without_fsync_does_not` asserts of a bad and a healthy run, live or recorded.
pub fn rsync_flushing_every_file_waits_for_the_disk_and_without_fsync_does_not_holds(
    bad: &Report,
    healthy: &Report,
) {
    // rsync's receiver paces its generator and sender either way
    // (wait.bottleneck, in the healthy run too); with --fsync what paces
    // it is the disk, and the finding that leads says so: the flushes, or
    // the receiver with its own wait named as uninterruptible I/O in fsync.
    let lead = bad.findings.first().expect("a finding");
    match lead.id.as_str() {
        "io.synchronous" => {}
        "wait.bottleneck" => assert!(
            lead.remedy.contains("(uninterruptible I/O in fsync)"),
            "{}",
            lead.remedy
        ),
        other => panic!("first finding {other}: {:?}", ids(bad)),
    }
    // One per file copied, each waiting for the disk: the receiver's time
    // in them is I/O in the off-CPU table (16-34% of its time here, around
    // io.synchronous's fifth: the finding comes and goes with kerntax's own
    // cost, and says fsync when it comes).
    let calls = syscall(bad, "fsync").calls;
    assert!((400..=402).contains(&calls), "{calls}");
    let io_ns: u64 = bad
        .offcpu
        .iter()
        .flat_map(|t| t.reasons.iter())
        .filter(|x| x.reason == kerntax::report::OffCpuReason::Io)
        .filter_map(|x| x.syscalls.get("fsync"))
        .sum();
    assert!(io_ns as f64 >= 0.1 * bad.duration_ns as f64, "{io_ns}");
    if let Some(f) = bad.findings.iter().find(|f| f.id == "io.synchronous") {
        assert!(f.evidence.iter().all(|e| e.holds()), "{f:?}");
        assert_eq!(f.culprit.name, "fsync", "{f:?}");
        // rsync is stripped: no name exists for its own functions; libc's
        // entry is named.
        assert!(
            f.culprit
                .frames
                .first()
                .is_some_and(|x| x.contains("fsync")),
            "{f:?}"
        );
    }

    assert!(healthy.syscalls.iter().all(|s| s.name != "fsync"));
    lacks(healthy, "io.synchronous");
}
