//! Issue 35: what holds on every kernel kerntax runs on, Linux 5.10 to the
//! newest. scripts/matrix.sh runs this file, with tests/exact_counts.rs,
//! inside each stock Debian kernel of the matrix (5.10, 6.1, 6.12) under
//! emulation; the suite runs it on this machine's kernel, and once more as
//! if this kernel lacked every facility newer than 5.10's (so the
//! fallbacks run on every kernel too).
//!
//! Sized for emulation (a lab story's bad run is a second or two there):
//! every lab story's bad variant gives its finding and its fixed variant
//! none of it, two corpus programs give their first finding, and the
//! report says exactly what the kernel lacks and what it costs.

mod common;

use std::path::PathBuf;

use common::*;
use kerntax::collect::features::{ALL, KernelFeatures};
use kerntax::report::Report;

/// Every facility newer than Linux 5.10 (KERNTAX_KERNEL_WITHOUT's names).
fn all_newer_than_5_10() -> String {
    ALL.iter()
        .map(|f| f.about().name)
        .collect::<Vec<_>>()
        .join(",")
}

/// `kerntax run --json -- ARGV` with `env`; the report and stderr.
fn profile(env: &[(&str, &str)], argv: &[&str]) -> (Report, String) {
    let p = run_with_env(env, &[], argv);
    assert!(p.output.status.success(), "{argv:?}: {}", p.stderr);
    (p.report, p.stderr)
}

fn lab(program: &str) -> String {
    PathBuf::from(env!("KERNTAX_LAB_DIR"))
        .join(program)
        .to_string_lossy()
        .into_owned()
}

fn ids(r: &Report) -> Vec<(&str, &str)> {
    r.findings
        .iter()
        .map(|f| (f.id.as_str(), f.culprit.name.as_str()))
        .collect()
}

/// The kernel's release as (major, minor).
fn release() -> (u32, u32) {
    kerntax::preflight::kernel_version().expect("a kernel release")
}

/// Issue 35: `kerntax run -- /bin/true` exits 0 on every kernel, and its
/// report names what the kernel lacks: each facility whose release is
/// newer than this kernel's (the README's table, src/collect/features.rs),
/// none older; the text says each one's cost once.
#[test]
fn true_runs_and_the_report_says_what_this_kernel_lacks() {
    if !bpf_available() {
        return;
    }
    let (r, stderr) = profile(&[], &["/bin/true"]);
    assert_eq!(r.exit_status, Some(0));
    let lacks: Vec<&str> = r
        .profiler
        .kernel_lacks
        .iter()
        .map(|g| g.facility.as_str())
        .collect();
    let version = |s: &str| -> (u32, u32) {
        let (a, b) = s.split_once('.').unwrap();
        (a.parse().unwrap(), b.parse().unwrap())
    };
    let expected: Vec<&str> = ALL
        .iter()
        .map(|f| f.about())
        .filter(|a| version(a.since) > release())
        .map(|a| a.name)
        .collect();
    assert_eq!(lacks, expected, "kernel {}", r.profiler.kernel);
    for g in &r.profiler.kernel_lacks {
        if !g.costs.is_empty() {
            let line = format!("{} (Linux {}+): {}", g.what, g.since, g.costs);
            assert_eq!(stderr.matches(&line).count(), 1, "{line}\n{stderr}");
        }
    }
    assert_eq!(
        stderr.contains("lacks what newer kernels give kerntax"),
        r.profiler.kernel_lacks.iter().any(|g| !g.costs.is_empty()),
        "{stderr}"
    );
}

/// The ruby-switch story: one rt_sigprocmask per green-thread switch.
fn ruby_switch(env: &[(&str, &str)]) {
    let (bad, _) = profile(env, &[&lab("ruby_switch"), "bad", "100000"]);
    let f = bad.findings.first().expect("a finding");
    assert_eq!(
        (f.id.as_str(), f.culprit.name.as_str()),
        ("syscall.storm", "rt_sigprocmask")
    );
    // One per switch, and the few of the C library's start-up.
    let calls = syscall(&bad, "rt_sigprocmask").calls;
    assert!((100_000..100_010).contains(&calls), "{calls}");
    assert!(
        f.culprit
            .frames
            .iter()
            .any(|x| x.contains("(ruby_switch.c:")),
        "{f:?}"
    );
    // Fixed, 10 M switches: 150-160 ms. At 100 k its 5-11 ms let any
    // neighbour's burst of a few ms read as sched.starved (a run of
    // 2026-12-02 on a host with CPU steal: "processes that ended before
    // the run did").
    // Nothing about the program: on a host whose other jobs take its CPUs
    // (a build beside the test), `sched.starved` names them, and rightly.
    let (fixed, _) = profile(env, &[&lab("ruby_switch"), "fixed", "10000000"]);
    assert!(
        fixed.findings.iter().all(|f| f.id == "sched.starved"),
        "{:?}",
        ids(&fixed)
    );
}

/// A lock story: the bad variant's first finding is about `lock` (a lock
/// finding; which one depends on how many CPUs and how fast: emulated CPUs
/// take turns in long slices), the fixed variant has no lock finding on
/// it. Run once more if the machine hid the contention (two threads
/// contend only while they run at once).
fn lock_story(env: &[(&str, &str)], program: &str, bad: &[&str], fixed: &[&str], lock: &str) {
    let first_on_lock = |r: &Report| {
        r.findings
            .first()
            .is_some_and(|f| f.id.starts_with("lock.") && f.culprit.name == lock)
    };
    let mut argv = vec![lab(program)];
    argv.extend(bad.iter().map(|s| s.to_string()));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (mut r, _) = profile(env, &argv);
    if !first_on_lock(&r) {
        eprintln!("{program} {bad:?}: {:?}; running it again", ids(&r));
        r = profile(env, &argv).0;
    }
    assert!(first_on_lock(&r), "{program} {bad:?}: {:?}", ids(&r));
    let mut argv = vec![lab(program)];
    argv.extend(fixed.iter().map(|s| s.to_string()));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (r, _) = profile(env, &argv);
    assert!(
        !r.findings
            .iter()
            .any(|f| f.id.starts_with("lock.") && f.culprit.name == lock),
        "{program} {fixed:?}: {:?}",
        ids(&r)
    );
}

fn icinga(env: &[(&str, &str)]) {
    lock_story(
        env,
        "icinga_namespace",
        &["bad", "4", "200000"],
        &["fixed", "4", "200000"],
        "mutex g_namespace_lock",
    );
}

fn zabbix(env: &[(&str, &str)]) {
    // The global config semaphore is semaphore 0 of its set (the shards
    // of the fixed variant are 1 to 4); the set's id is the kernel's.
    // 8 pollers and 20,000 items, as the demo runs it. With 2,000 items
    // the bad run lasted 75-126 ms and its pollers' start and end weighed
    // on the averages; with 4 pollers on 2 CPUs their 8 us of work outside
    // the lock kept them runnable as much as queued: on a host with 8-45%
    // CPU steal (2026-12-02) the lock's waiting share was 18-23% against
    // lock.contended-site's 20%, and one CI run and 1 of 5 by hand named
    // only sched.oversubscribed. With 8 (5 of 5 there) the first finding
    // is lock.futile-churn or lock.global-serializes on sem 0 with room:
    // 38-49% futile (>= 30%), 3.9-5.8 pollers queued (>= 1.0), 1.1-1.2
    // CPUs idle (>= 0.5).
    let (bad, _) = profile(env, &[&lab("zabbix_config"), "bad", "8", "20000"]);
    let lock = bad
        .findings
        .first()
        .map(|f| f.culprit.name.clone())
        .unwrap_or_default();
    assert!(
        lock.starts_with("sysv-sem semid ") && lock.ends_with(", sem 0"),
        "{:?}",
        ids(&bad)
    );
    assert!(bad.findings[0].id.starts_with("lock."), "{:?}", ids(&bad));
    // Fixed, the global lock is taken once per poller; its 8 pollers share
    // 4 shards' semaphores two by two, which may contend (as the demo's
    // do): no lock finding on the global one.
    let (fixed, _) = profile(env, &[&lab("zabbix_config"), "fixed", "8", "20000"]);
    assert!(
        !fixed
            .findings
            .iter()
            .any(|f| f.id.starts_with("lock.") && f.culprit.name.ends_with(", sem 0")),
        "{:?}",
        ids(&fixed)
    );
}

fn prol2tp(env: &[(&str, &str)]) {
    let (bad, _) = profile(env, &[&lab("prol2tp_tunnels"), "bad", "300", "10"]);
    let f = bad.findings.first().expect("a finding");
    assert_eq!(
        (f.id.as_str(), f.culprit.name.as_str()),
        ("poll.low-readiness", "poll")
    );
    let (fixed, _) = profile(env, &[&lab("prol2tp_tunnels"), "fixed", "300", "10"]);
    assert!(
        !fixed.findings.iter().any(|f| f.id.starts_with("poll.")),
        "{:?}",
        ids(&fixed)
    );
}

fn rocketmq(env: &[(&str, &str)]) {
    // 8 producers, not 4: under emulation (two CPUs taking turns in long
    // slices) 4 left 0.7-0.9 of them waiting, 18-22% of their time, on
    // both sides of the contended-site rule's 20% (no finding in 2 of 2
    // tries on 5.10 and 6.1 in one of issue 35's runs); 8 leave 2.5-3.7
    // waiting and the lock serializing them, on every kernel.
    lock_story(
        env,
        "rocketmq_lock",
        &["mutex", "8", "100000", "0"],
        &["abs", "8", "100000", "0"],
        "mutex g_putmessage_lock",
    );
    // 8 spinners, not 4, for the same reason: under emulation 4 spent
    // 28-48% of their samples spinning (6 runs on 6.12), and one CI run
    // fell below spin.waste's 20%; 8 spent 54-61% in 6 of 6.
    let (spin, _) = profile(env, &[&lab("rocketmq_lock"), "spin", "8", "300000", "0"]);
    assert!(
        spin.findings
            .iter()
            .any(|f| f.id == "spin.waste" && f.culprit.name == "spin_lock"),
        "{:?}",
        ids(&spin)
    );
}

#[test]
fn ruby_switch_story() {
    if bpf_available() {
        ruby_switch(&[]);
    }
}

#[test]
fn icinga_story() {
    if bpf_available() {
        icinga(&[]);
    }
}

#[test]
fn zabbix_story() {
    if bpf_available() {
        zabbix(&[]);
    }
}

#[test]
fn prol2tp_story() {
    if bpf_available() {
        prol2tp(&[]);
    }
}

#[test]
fn rocketmq_story() {
    if bpf_available() {
        rocketmq(&[]);
    }
}

/// Issue 35: the fallbacks of kernels before 5.11 (per-thread state in a
/// hash map, the object with static functions, the VMA tree walk, the
/// legacy sched_switch program, bounded loops, fixed-size records...) run
/// here too: the stories and the exact counts come out the same.
#[test]
fn every_story_as_on_a_kernel_without_anything_newer_than_5_10() {
    if !bpf_available() {
        return;
    }
    let without = all_newer_than_5_10();
    let env = [("KERNTAX_KERNEL_WITHOUT", without.as_str())];
    let (r, stderr) = profile(&env, &["/bin/true"]);
    assert_eq!(r.profiler.kernel_lacks.len(), ALL.len(), "{stderr}");
    assert_eq!(
        KernelFeatures::all().without(&without).unwrap().gaps(),
        r.profiler.kernel_lacks
    );
    assert!(
        stderr.contains("BPF task storage (Linux 5.11+): at most 32,768 threads"),
        "{stderr}"
    );
    let fixture = fixture("calls");
    let fixture = fixture.to_str().unwrap();
    let (r, _) = profile(&env, &[fixture, "threads", "8", "20000"]);
    assert_eq!(syscall(&r, "getppid").calls, 160_000);
    assert_eq!((r.threads.len(), r.loss.task_storage_failed), (9, 0));
    let site = &syscall(&r, "getppid").callsites[0];
    assert!(has_frame(&site.frames, "thread_main"), "{:?}", site.frames);
    let (r, _) = profile(&env, &[fixture, "forkexec", "3", "1000"]);
    assert_eq!(syscall(&r, "getppid").calls, 3000);
    assert_eq!(syscall(&r, "execve").calls, 4);
    // A thread's exec takes its leader's id: its state moves with it.
    let (r, _) = profile(&env, &[fixture, "threadexec", "5000"]);
    assert_eq!(syscall(&r, "getppid").calls, 5000);
    ruby_switch(&env);
    icinga(&env);
    zabbix(&env);
    prol2tp(&env);
    rocketmq(&env);
}

/// A corpus program (tests/real) with a smaller workload; its report.
fn corpus(name: &str, variant: &str, env: &[(&str, &str)]) -> Report {
    corpus_run(name, variant, env).0
}

/// Corpus: coreutils dd, one byte a call: a storm of reads and writes,
/// counted exactly; 64 KiB blocks: none.
#[test]
fn corpus_dd_blocks() {
    if !bpf_available() {
        return;
    }
    // Half a MiB: dd's shell then takes well under 1% of the run (at a
    // quarter, its start-up alone came near the share at which the storm
    // rule counts a thread as working, and halved the busy share).
    let bytes = 512 * 1024;
    let size = [("DD_BYTES", "524288")];
    let bad = corpus("dd-blocks", "bad", &size);
    let f = bad
        .findings
        .first()
        .unwrap_or_else(|| panic!("no finding: {}", kerntax::render::text::render(&bad, false)));
    assert_eq!(f.id, "syscall.storm", "{:?}", ids(&bad));
    assert!(
        ["read", "write"].contains(&f.culprit.name.as_str()),
        "{f:?}"
    );
    for name in ["read", "write"] {
        let calls = syscall(&bad, name).calls;
        assert!((bytes..bytes + 100).contains(&calls), "{name}: {calls}");
    }
    let healthy = corpus("dd-blocks", "healthy", &size);
    assert!(
        !healthy.findings.iter().any(|f| f.id == "syscall.storm"),
        "{:?}",
        ids(&healthy)
    );
}

/// Corpus: Debian's CPython, 4 threads on the GIL: their first finding is
/// the GIL's serialising, its culprit read from the interpreter's own
/// frames (bounded loops stand for the open-coded iterator before 6.4;
/// fixed-size records carry the frames before 6.16).
#[test]
fn corpus_python_gil() {
    if !bpf_available() {
        return;
    }
    let size = [("GIL_ITERATIONS", "3000000")];
    let mut bad = corpus("python-gil", "bad", &size);
    let first_is_gil = |r: &Report| {
        r.findings
            .first()
            .is_some_and(|f| f.id.starts_with("lock.") && f.title.contains("(gil_work.py:"))
    };
    if !first_is_gil(&bad) {
        eprintln!("python-gil bad: {:?}; running it again", ids(&bad));
        bad = corpus("python-gil", "bad", &size);
    }
    assert!(first_is_gil(&bad), "{:?}", bad.findings.first());
    let f = &bad.findings[0];
    assert!(
        f.culprit
            .frames
            .iter()
            .any(|x| x.starts_with("work (gil_work.py:")),
        "{f:?}"
    );
    let healthy = corpus("python-gil", "healthy", &size);
    assert!(
        !healthy.findings.iter().any(|f| f.id.starts_with("lock.")),
        "{:?}",
        ids(&healthy)
    );
}

/// Issue 35: the README's table of facilities by kernel says what
/// src/collect/features.rs does: each facility once, with its release,
/// and a mark under each kernel of the matrix exactly where that kernel is
/// at least as new (the matrix checks the probe agrees on each).
#[test]
fn the_readmes_kernel_table_is_the_facilities() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let head = "| facility (`KERNTAX_KERNEL_WITHOUT` name) | Linux | 5.10 | 6.1 | 6.12 | 6.18 |";
    let table = &readme[readme.find(head).expect("the README's kernel table")..];
    let kernels = [(5, 10), (6, 1), (6, 12), (6, 18)];
    let mut seen = vec![];
    for row in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let name = cells[1]
            .split('`')
            .nth(1)
            .unwrap_or_else(|| panic!("{row}"));
        let about = ALL
            .iter()
            .map(|f| f.about())
            .find(|a| a.name == name)
            .unwrap_or_else(|| panic!("no facility {name}"));
        assert_eq!(cells[2], about.since, "{row}");
        let (a, b) = about.since.split_once('.').unwrap();
        let since: (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
        for (i, k) in kernels.iter().enumerate() {
            let mark = if since <= *k { "✓" } else { "–" };
            assert_eq!(cells[3 + i], mark, "{row}: {k:?}");
        }
        seen.push(name);
    }
    let mut all: Vec<&str> = ALL.iter().map(|f| f.about().name).collect();
    all.sort_unstable();
    seen.sort_unstable();
    assert_eq!(seen, all);
}
