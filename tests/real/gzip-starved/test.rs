//! gzip-starved (issue 37: a program starved by the rest of the host):
//! Debian's gzip compressing 40 MB while 3 other processes (sha256sum of
//! /dev/zero) keep the 2 CPUs busy, against gzip alone. Ground truth (GNU
//! time, /proc; without kerntax): with the neighbours gzip waited 47-50% of
//! its wall time (3.97-4.18 s for 2.1 s of CPU), the host busy 2.03 CPUs,
//! the neighbours 1.49-1.52; alone it waited 0% (2.40-2.45 s), the host
//! 1.01 CPUs busy.
use super::*;

#[test]
fn gzip_among_busy_neighbours_waits_for_their_cpus_and_alone_does_not() {
    live("gzip-starved");
}

/// What `gzip_among_busy_neighbours_waits_for_their_cpus_and_alone_does_not` asserts of a bad and a healthy run, live or recorded.
pub fn gzip_among_busy_neighbours_waits_for_their_cpus_and_alone_does_not_holds(
    bad: &Report,
    healthy: &Report,
) {
    let f = first(bad, "sched.starved");
    // The neighbours, named (2N-1 of them on N CPUs: 3 here), each with
    // about half a CPU.
    assert!(bad.host.measured);
    let hogs: Vec<_> = bad
        .host
        .others
        .iter()
        .filter(|p| p.comm == "sha256sum")
        .collect();
    let cpus = bad.summary.cpus as usize;
    assert_eq!(hogs.len(), 2 * cpus - 1, "{:?}", bad.host);
    for h in &hogs {
        assert!((0.3..0.7).contains(&h.cpus), "{h:?}");
    }
    assert!(f.culprit.name.contains("sha256sum"), "{f:?}");
    assert!(f.title.contains("sha256sum (pid"), "{}", f.title);
    assert!(bad.others_cpus() >= 0.6 * cpus as f64, "{:?}", bad.host);
    // About half of the time it wanted a CPU, it waited (ground truth
    // 47-50%), and it is one thread: never oversubscribed by itself.
    let share = f
        .evidence
        .iter()
        .find(|e| e.metric == "runqueue_share_of_wanted")
        .map(|e| e.value)
        .unwrap();
    assert!((0.35..0.65).contains(&share), "{share}");
    assert!(f.remedy.contains("nice"), "{}", f.remedy);
    lacks(bad, "sched.oversubscribed");

    // Alone: nobody else on the CPUs, nothing to say.
    assert!(healthy.host.measured);
    assert!(healthy.others_cpus() < 0.5, "{:?}", healthy.host);
    assert!(healthy.findings.is_empty(), "{:?}", ids(healthy));
}
