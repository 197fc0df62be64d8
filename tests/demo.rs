//! `kerntax demo` runs each lab scenario under the profiler; the stories'
//! figures must come out exact (issue #2 Ruby, #3 lock stories, #4 ProL2TP
//! and the RocketMQ spin locks).

mod common;

use common::*;
use kerntax::report::{Finding, Report};

/// Issue #5: `r` has finding `id`, whose culprit is named `culprit`.
fn assert_finding<'a>(r: &'a Report, id: &str, culprit: &str) -> &'a Finding {
    let ids: Vec<_> = r
        .findings
        .iter()
        .map(|f| (&f.id, &f.culprit.name))
        .collect();
    let f = r
        .findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no {id} among {ids:?}"));
    assert_eq!(f.culprit.name, culprit, "{f:?}");
    assert!(f.evidence.iter().all(|e| e.holds()), "{f:?}");
    assert!(f.severity > 0.0 && f.expected_gain.time_ns > 0, "{f:?}");
    f
}

/// Issue #5: a fixed program does not trigger its bad twin's finding.
fn assert_no_finding(r: &Report, id: &str) {
    assert!(
        r.findings.iter().all(|f| f.id != id),
        "{id} in {:?}",
        r.findings
    );
}

#[test]
fn demo_lists_its_scenarios() {
    let out = kerntax().args(["demo", "--list"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("ruby-switch"));
}

#[test]
fn ruby_switch_bad_makes_one_sigprocmask_per_switch_and_fixed_none() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = kerntax()
        .args(["demo", "ruby-switch", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Issue 13: one screen for the story: what each variant printed, the
    // bad variant's first finding with its culprit, the comparison, and
    // where the whole reports are.
    assert!(stdout.lines().count() <= 60, "{stdout}");
    assert!(
        stdout.contains("ran bad")
            && stdout.contains("ran fixed")
            && stdout.contains("bad, first finding: [syscall.storm]")
            && stdout.contains("culprit: rt_sigprocmask")
            && stdout.contains("bad vs fixed")
            && stdout.contains("wall time")
            && stdout.contains("system CPU share"),
        "{stdout}"
    );
    assert!(!stdout.contains("WAIT SITES"), "{stdout}");
    // The lab program prints its own throughput.
    assert!(
        stdout.contains("ruby-switch bad: 2000000 switches in"),
        "{stdout}"
    );
    let index = dir.path().canonicalize().unwrap().join("index.html");
    assert!(stdout.contains(&format!("{}", index.display())), "{stdout}");
    let page = std::fs::read_to_string(&index).unwrap();
    for variant in ["bad", "fixed"] {
        for ext in ["html", "json"] {
            let file = format!("ruby-switch-{variant}.{ext}");
            assert!(page.contains(&format!("href=\"{file}\"")), "{page}");
            assert!(dir.path().join(&file).exists(), "{file}");
        }
    }

    let bad = read_report(&dir.path().join("ruby-switch-bad.json"));
    let fixed = read_report(&dir.path().join("ruby-switch-fixed.json"));
    ruby_switch_holds(
        &[
            ("bad".to_string(), bad.clone()),
            ("fixed".to_string(), fixed.clone()),
        ]
        .into_iter()
        .collect(),
    );
    gain_is_an_estimate_of_the_fixs("ruby-switch", &bad, &fixed);
    assert!(
        stdout.contains("first finding predicts") && stdout.contains("measured without kerntax"),
        "{stdout}"
    );
    assert!(
        stdout.contains("resolved in fixed") && stdout.contains("throughput switches/s"),
        "{stdout}"
    );
    let diff = kerntax()
        .arg("diff")
        .arg(dir.path().join("ruby-switch-bad.json"))
        .arg(dir.path().join("ruby-switch-fixed.json"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&diff.stdout);
    assert!(
        diff.status.success(),
        "{}",
        String::from_utf8_lossy(&diff.stderr)
    );
    assert!(text.contains("resolved   syscall.storm"), "{text}");
    // Issue #6: a page per variant.
    let page = std::fs::read_to_string(dir.path().join("ruby-switch-bad.html")).unwrap();
    assert!(page.contains("syscall.storm") && page.contains("id=\"flame-syscalls\""));

    // Issue 13: --verbose prints each variant's whole report as well.
    let verbose = kerntax()
        .args(["demo", "ruby-switch", "--verbose", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&verbose.stdout);
    assert!(verbose.status.success(), "{stdout}");
    assert_eq!(stdout.matches("FINDINGS").count(), 2, "{stdout}");
}

/// What `ruby_switch_bad_makes_one_sigprocmask_per_switch_and_fixed_none`
/// asserts of the reports of a run of each variant, live or recorded.
fn ruby_switch_holds(runs: &Runs) {
    let (bad, fixed) = (&runs["bad"], &runs["fixed"]);
    // 2,000,000 swapcontext switches plus the one getcontext that set up the green thread.
    let sigmask = syscall(bad, "rt_sigprocmask");
    assert_eq!(sigmask.calls, 2_000_001);
    assert!(
        has_frame(&sigmask.callsites[0].frames, "swapcontext"),
        "{:?}",
        sigmask.callsites[0].frames
    );
    let sites: Vec<kerntax::frame::Frame> = sigmask
        .callsites
        .iter()
        .flat_map(|c| c.frames.clone())
        .collect();
    assert!(has_frame(&sites, "scheduler_swapcontext"), "{sites:?}");
    assert!(has_frame(&sites, "green_thread_swapcontext"), "{sites:?}");
    // getcontext, the bootstrap swapcontext and the green thread's first hop back.
    assert_eq!(syscall(fixed, "rt_sigprocmask").calls, 3);
    assert!(bad.summary.syscalls > 100 * fixed.summary.syscalls);

    // Issue #5: the storm is found, named, and its remedy given; the fixed
    // variant has none, and the demo says so next to the throughput.
    let storm = assert_finding(bad, "syscall.storm", "rt_sigprocmask");
    assert!(has_frame(&storm.culprit.frames, "swapcontext"), "{storm:?}");
    assert!(
        storm.remedy.contains("_setjmp/_longjmp"),
        "{}",
        storm.remedy
    );
    assert_no_finding(fixed, "syscall.storm");
}

/// Issues 19 and 39: the bad variant's first finding predicts its fix's
/// gain from the run's critical path, with a range; the fix's measured
/// gain (the lab's variants do the same work, so in wall time, measured
/// without kerntax as `kerntax demo` and `bench/gain` measure it) is within
/// 10 points of that range. Both are printed (the README's table of
/// predicted against measured gains).
fn gain_is_an_estimate_of_the_fixs(scenario: &str, bad: &Report, fixed: &Report) {
    let f = &bad.findings[0];
    let g = &f.expected_gain;
    assert!(g.estimate, "{f:?}");
    let [low, high] = g.range.expect("a predicted gain has a range");
    assert!(low <= g.share && g.share <= high, "{g:?}");
    let profiled = 1.0 - fixed.duration_ns as f64 / bad.duration_ns as f64;
    let measured = unprofiled_gain(scenario);
    eprintln!(
        "gain {scenario}: [{}] predicted {:.0}% ({:.0}-{:.0}%), measured {:.0}% (profiled runs: \
         {:.0}%; the host's other work {:.2} CPUs)",
        f.id,
        g.share * 100.0,
        low * 100.0,
        high * 100.0,
        measured * 100.0,
        profiled * 100.0,
        host_load_cpus(bad)
    );
    if SPINNING_FIXES.contains(&scenario) {
        return;
    }
    assert!(
        low - TOLERANCE <= measured && measured <= high + TOLERANCE,
        "{scenario}: predicted {low:.2}-{high:.2}, measured {measured:.2}"
    );
}

/// Issue 39's tolerance: 10 points of the run's time.
const TOLERANCE: f64 = 0.10;

/// Scenarios whose fix spins, so that its wall time on this 2-vCPU VM is
/// the hypervisor's: a spinner whose lock holder's vCPU is descheduled
/// burns its slice. RocketMQ's ABS lock runs 4 x 500,000 puts in 0.36 s,
/// or for minutes at a time in 0.61-0.67 s while the mutex it replaces
/// runs 0.47-0.66 s (suite run 13: 7 alternate runs of each, the fix's
/// fastest 22% slower than the mutex's; 7 runs a minute earlier, 40%
/// faster every time). Their gain is printed, not held to the estimate.
const SPINNING_FIXES: &[&str] = &["rocketmq-lock"];

/// Runs of each variant `unprofiled_gain` takes the fastest of (a host's
/// slow phase is seconds long: alternate runs leave each variant some runs
/// outside it).
const GAIN_RUNS: usize = 5;

/// The share of the bad variant's wall time the fixed one saves, run
/// without kerntax: the two alternately, `GAIN_RUNS` of each, the fastest
/// of each kept. One profiled run of each says little: this host has slow
/// phases seconds long in which every variant runs 2-3x slower at once (one
/// met by the fixed run alone made rocketmq-lock's gain 13% in suite run 9,
/// 50-60% in ten runs in a row), and kerntax's own cost per system call
/// slows a futex-heavy bad variant more than its fix (rocketmq-lock's mutex:
/// 0.9 s profiled, 0.5 s not).
fn unprofiled_gain(scenario: &str) -> f64 {
    let s = kerntax::demo::find(scenario).unwrap();
    let program = std::path::Path::new(env!("KERNTAX_LAB_DIR")).join(s.program);
    let (bad, fixed) = (s.variants[0].1, s.variants[s.variants.len() - 1].1);
    kerntax::measure::unprofiled_gain(&program, bad, fixed, GAIN_RUNS).unwrap()
}

/// Each variant's report, by its label.
type Runs = std::collections::HashMap<String, Report>;

/// Runs one demo scenario, again while the rest of the host was busy
/// during its bad variant, and returns its reports by variant label.
fn demo(scenario: &str) -> Runs {
    let mut runs = demo_once(scenario);
    for attempt in 2..=LOADED_HOST_ATTEMPTS {
        let load = host_load_cpus(&runs["bad"]);
        if load <= LOADED_HOST_CPUS {
            break;
        }
        eprintln!(
            "{scenario}: the host's other work held {load:.2} CPUs during the bad variant's \
             profiled run: running it again ({attempt} of {LOADED_HOST_ATTEMPTS})"
        );
        runs = demo_once(scenario);
    }
    gain_is_an_estimate_of_the_fixs(scenario, &runs["bad"], &runs["fixed"]);
    runs
}

/// The CPUs the rest of the host (other processes, and a hypervisor's
/// steal) held during a run.
fn host_load_cpus(r: &Report) -> f64 {
    r.others_cpus() + r.host.steal_cpus
}

/// A profiled run during which the rest of the host held more than this
/// many CPUs predicts its fix's gain on a host that busy, and the gain
/// measured without kerntax (the fastest of alternate runs) is the quiet
/// host's: the two are not of one program. A contended lock shows it
/// most: icinga-namespace's bad variant beside two busy loops on this
/// 2-vCPU host runs 280-314 ms (460-600 ms alone; its threads run less
/// at once, so they contend less), its fix gains 53-64% there against
/// 82-88% alone, and CI once (stop 53) predicted 37-60% against 75%
/// measured, the profiled runs' own gain 48%. Quiet runs hold 0.0-0.12
/// CPUs of other work; one busy loop 0.56.
const LOADED_HOST_CPUS: f64 = 0.3;

/// Profiled runs of a scenario `demo` makes, at most, for one on a host
/// not loaded (the last is held as it is): a slow phase of this host lasts
/// seconds, a scenario's runs about as long, and a host loaded throughout
/// loads the unprofiled runs too (each rerun costs CI 5-10 s).
const LOADED_HOST_ATTEMPTS: usize = 2;

/// One `kerntax demo` of a scenario.
fn demo_once(scenario: &str) -> Runs {
    let dir = tempfile::tempdir().unwrap();
    let out = kerntax()
        .args(["demo", scenario, "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: Runs = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy();
            (
                name.trim_start_matches(&format!("{scenario}-")).to_string(),
                read_report(&p),
            )
        })
        .collect();
    runs
}

fn futex_calls(r: &Report) -> u64 {
    r.syscalls
        .iter()
        .find(|s| s.name == "futex")
        .map_or(0, |s| s.calls)
}

#[test]
fn icinga_bad_ranks_the_namespace_mutex_first_and_frozen_reads_take_no_lock() {
    if !bpf_available() {
        return;
    }
    icinga_bad_ranks_the_namespace_mutex_first_and_frozen_reads_take_no_lock_holds(&demo(
        "icinga-namespace",
    ));
}

/// What `icinga_bad_ranks_the_namespace_mutex_first_and_frozen_reads_take_no_lock` asserts of a run of each variant, live or recorded.
fn icinga_bad_ranks_the_namespace_mutex_first_and_frozen_reads_take_no_lock_holds(runs: &Runs) {
    let bad = &runs["bad"];
    let top = &bad.locks[0];
    assert_eq!(
        (top.symbol.as_deref(), top.kind),
        (Some("g_namespace_lock"), kerntax::report::LockKind::Mutex)
    );
    assert!(top.waits > 1000 && top.wakes > 1000, "{top:?}");
    assert!(
        has_frame(&top.waiter_stacks[0].frames, "ns_get"),
        "{:?}",
        top.waiter_stacks[0].frames
    );
    let rw = &runs["rwlock"];
    assert!(
        rw.locks
            .iter()
            .all(|l| l.symbol.as_deref() != Some("g_namespace_lock"))
    );
    let fixed = &runs["fixed"];
    assert!(fixed.locks.iter().all(|l| {
        !l.symbol
            .as_deref()
            .is_some_and(|s| s.starts_with("g_namespace"))
    }));
    assert!(
        futex_calls(bad) > 10 * futex_calls(fixed),
        "{} vs {}",
        futex_calls(bad),
        futex_calls(fixed)
    );
    let hot = assert_finding(bad, "lock.exclusive-hot", "mutex g_namespace_lock");
    assert!(has_frame(&hot.culprit.frames, "ns_get"), "{hot:?}");
    // The lock's churn, which a shared lock also ends, comes after it.
    let at = |id: &str| bad.findings.iter().position(|f| f.id == id);
    if let Some(churn) = at("lock.handoff-churn") {
        assert!(
            at("lock.exclusive-hot").unwrap() < churn,
            "{:?}",
            bad.findings
        );
    }
    assert_no_finding(rw, "lock.exclusive-hot");
    assert_no_finding(fixed, "lock.exclusive-hot");
}

#[test]
fn zabbix_bad_queues_pollers_on_the_global_config_semaphore() {
    if !bpf_available() {
        return;
    }
    zabbix_bad_queues_pollers_on_the_global_config_semaphore_holds(&demo("zabbix-config"));
}

/// What `zabbix_bad_queues_pollers_on_the_global_config_semaphore` asserts of a run of each variant, live or recorded.
fn zabbix_bad_queues_pollers_on_the_global_config_semaphore_holds(runs: &Runs) {
    let bad = &runs["bad"];
    let top = &bad.locks[0];
    assert_eq!(
        (top.kind, top.semnum),
        (kerntax::report::LockKind::SysvSem, Some(0))
    );
    assert_eq!(top.pids.len(), 8, "8 poller processes share it");
    // The macro nobody needed is among the waits on it.
    assert!(
        top.waiter_stacks
            .iter()
            .any(|s| has_frame(&s.frames, "DCget_user_macro")),
        "{:?}",
        top.waiter_stacks
    );
    let fixed = &runs["fixed"];
    let global_waits: u64 = fixed
        .locks
        .iter()
        .filter(|l| l.semnum == Some(0))
        .map(|l| l.waits)
        .sum();
    assert!(
        global_waits <= 16,
        "the fixed pollers take the global lock once each for the macro: {global_waits}"
    );
    assert!(
        fixed
            .locks
            .iter()
            .any(|l| l.kind == kerntax::report::LockKind::SysvSem
                && l.semnum.is_some_and(|n| (1..=4).contains(&n)))
    );
    let semid = top.semid.unwrap();
    let global = assert_finding(
        bad,
        "lock.global-serializes",
        &format!("sysv-sem semid {semid}, sem 0"),
    );
    assert!(
        global.remedy.contains("DCget_user_macro"),
        "{}",
        global.remedy
    );
    assert_no_finding(fixed, "lock.global-serializes");
}

#[test]
fn rocketmq_mutex_hands_off_by_futex() {
    if !bpf_available() {
        return;
    }
    let mut runs = demo("rocketmq-lock");
    if mutex_barely_contended(&runs) {
        eprintln!("mutex barely contended: running it again");
        runs = demo("rocketmq-lock");
    }
    rocketmq_mutex_hands_off_by_futex_holds(&runs);
}

/// The mutex was barely contended: two threads contend only while they
/// run at once, and a machine busy elsewhere can leave the lab one CPU.
fn mutex_barely_contended(runs: &Runs) -> bool {
    runs["bad"].locks.first().map_or(0, |l| l.wakes) <= 1000
}

/// What `rocketmq_mutex_hands_off_by_futex` asserts of a run of each
/// variant, live or recorded.
fn rocketmq_mutex_hands_off_by_futex_holds(runs: &Runs) {
    let bad = &runs["bad"];
    let top = &bad.locks[0];
    assert_eq!(
        (top.symbol.as_deref(), top.kind),
        (Some("g_putmessage_lock"), kerntax::report::LockKind::Mutex)
    );
    assert!(top.wakes > 1000 && top.cpu_ns > 0, "{top:?}");
    // put_message ends in a tail call to pthread_mutex_unlock: its caller shows.
    assert!(
        has_frame(&top.waker_stacks[0].frames, "producer"),
        "{:?}",
        top.waker_stacks[0].frames
    );
    assert!(
        has_frame(&top.waiter_stacks[0].frames, "put_message"),
        "{:?}",
        top.waiter_stacks[0].frames
    );
    let churn = assert_finding(bad, "lock.handoff-churn", "mutex g_putmessage_lock");
    assert!(has_frame(&churn.culprit.frames, "put_message"), "{churn:?}");
    assert_no_finding(&runs["fixed"], "lock.handoff-churn");
}

/// Issue #4: a poll() over every tunnel's fd with one ready must be plain
/// from the report, and the epoll variant must show the same interest set
/// answered without the scan.
#[test]
fn prol2tp_bad_polls_every_tunnel_for_one_ready_fd_and_fixed_uses_epoll() {
    if !bpf_available() {
        return;
    }
    prol2tp_bad_polls_every_tunnel_for_one_ready_fd_and_fixed_uses_epoll_holds(&demo(
        "prol2tp-tunnels",
    ));
}

/// What `prol2tp_bad_polls_every_tunnel_for_one_ready_fd_and_fixed_uses_epoll` asserts of a run of each variant, live or recorded.
fn prol2tp_bad_polls_every_tunnel_for_one_ready_fd_and_fixed_uses_epoll_holds(runs: &Runs) {
    let (bad, fixed) = (&runs["bad"], &runs["fixed"]);
    // 1,000 tunnels brought up one after another, 20 messages each: the
    // n-th tunnel's turns poll n fds, so the mean is (1 + 1000) / 2.
    let poll = bad.polls.iter().find(|p| p.syscall == "poll").unwrap();
    assert_eq!((poll.calls, poll.max_fds), (20_000, 1000));
    assert_eq!(poll.fds_per_call, 500.5);
    assert_eq!((poll.ready_per_call, poll.timeouts), (1.0, 0));
    assert!(poll.ready_ratio.unwrap() < 0.01, "{poll:?}");
    assert!(
        has_frame(&poll.callsites[0].frames, "event_loop_once"),
        "{:?}",
        poll.callsites[0].frames
    );
    // Most of its CPU time is the kernel's poll scan.
    let scan = bad
        .cpu_samples
        .functions
        .iter()
        .find(|f| f.name.starts_with("do_sys_poll"))
        .expect("do_sys_poll among the sampled functions");
    assert!(
        scan.total * 2 > bad.cpu_samples.samples,
        "{scan:?} of {}",
        bad.cpu_samples.samples
    );

    assert!(fixed.polls.iter().all(|p| p.syscall != "poll"));
    let epoll = fixed
        .polls
        .iter()
        .find(|p| p.syscall == "epoll_wait")
        .unwrap();
    assert_eq!((epoll.calls, epoll.max_fds), (20_000, 1000));
    assert_eq!((epoll.fds_per_call, epoll.ready_per_call), (500.5, 1.0));
    assert_eq!(syscall(fixed, "epoll_ctl").calls, 1000);
    assert!(
        epoll.cpu_ns * 10 < poll.cpu_ns,
        "epoll {} ns vs poll {} ns of system time",
        epoll.cpu_ns,
        poll.cpu_ns
    );
    let scan = assert_finding(bad, "poll.low-readiness", "poll");
    assert!(
        has_frame(&scan.culprit.frames, "event_loop_once"),
        "{scan:?}"
    );
    assert_no_finding(fixed, "poll.low-readiness");
}

/// Issue #4: the spin lock burns CPU in its acquire loop, the k-backoff lock
/// yields, and the report says where and how often.
#[test]
fn rocketmq_spin_locks_show_as_spinning_and_yield_storms() {
    if !bpf_available() {
        return;
    }
    rocketmq_spin_locks_show_as_spinning_and_yield_storms_holds(&demo("rocketmq-lock"));
}

/// What `rocketmq_spin_locks_show_as_spinning_and_yield_storms` asserts of a run of each variant, live or recorded.
fn rocketmq_spin_locks_show_as_spinning_and_yield_storms_holds(runs: &Runs) {
    let spin = &runs["spin"];
    assert!(
        spin.spin.spin_share > 0.2,
        "4 threads on 2 CPUs spin for one lock: {:?}",
        spin.spin.spin_share
    );
    assert!(
        has_frame(&spin.spin.spin_stacks[0].frames, "spin_lock"),
        "{:?}",
        spin.spin.spin_stacks[0].frames
    );
    // Spinning never enters the kernel: no lock wait, no yields.
    assert!(spin.locks.iter().all(|l| !l.contention), "{:?}", spin.locks);
    assert!(spin.spin.yields.is_empty());

    let spin_yield = &runs["spin-yield"];
    let yields: u64 = spin_yield.spin.yields.iter().map(|y| y.calls).sum();
    let sched_yield = syscall(spin_yield, "sched_yield");
    assert!(yields > 0);
    assert_eq!(
        yields, sched_yield.calls,
        "per-thread yields add up exactly"
    );
    assert!(
        has_frame(&sched_yield.callsites[0].frames, "spin_yield_lock"),
        "{:?}",
        sched_yield.callsites[0].frames
    );
    assert!(
        spin_yield
            .spin
            .spin_stacks
            .iter()
            .any(|s| has_frame(&s.frames, "spin_yield_lock"))
    );

    // Neither spin lock ever sleeps in the kernel: the only futex calls
    // are main's pthread_join, against ~10^5 futex handoffs of the mutex.
    for v in [spin, spin_yield] {
        assert!(futex_calls(v) <= 4, "{}", futex_calls(v));
    }
    assert!(futex_calls(&runs["bad"]) > 10_000);

    // The ABS lock spins and yields in abs_lock, and when spinning keeps
    // failing parks in abs_park on the same word, which the report names.
    let abs = &runs["fixed"];
    assert!(
        abs.spin
            .spin_stacks
            .iter()
            .all(|s| has_frame(&s.frames, "abs_lock"))
    );
    for lock in abs.locks.iter().filter(|l| l.contention) {
        assert_eq!(lock.symbol.as_deref(), Some("g_putmessage_spinlock"));
        assert!(has_frame(&lock.waiter_stacks[0].frames, "abs_park"));
    }

    // Issue #5: both spin locks waste CPU, one spinning, one yielding.
    let waste = assert_finding(spin, "spin.waste", "spin_lock");
    assert!(waste.title.contains("spin"), "{waste:?}");
    let storm = spin_yield.findings.iter().find(|f| f.id == "spin.waste");
    assert!(storm.is_some(), "{:?}", spin_yield.findings);
}

/// A lab story's checks, for its live runs (the tests above) and its
/// recorded ones (issue 36).
struct Story {
    scenario: &'static str,
    /// Whether the live test would run the story again: the machine hid
    /// its problem.
    hidden: fn(&Runs) -> bool,
    holds: fn(&Runs),
}

fn never(_: &Runs) -> bool {
    false
}

const STORIES: &[Story] = &[
    Story {
        scenario: "ruby-switch",
        hidden: never,
        holds: ruby_switch_holds,
    },
    Story {
        scenario: "icinga-namespace",
        hidden: never,
        holds: icinga_bad_ranks_the_namespace_mutex_first_and_frozen_reads_take_no_lock_holds,
    },
    Story {
        scenario: "zabbix-config",
        hidden: never,
        holds: zabbix_bad_queues_pollers_on_the_global_config_semaphore_holds,
    },
    Story {
        scenario: "prol2tp-tunnels",
        hidden: never,
        holds: prol2tp_bad_polls_every_tunnel_for_one_ready_fd_and_fixed_uses_epoll_holds,
    },
    Story {
        scenario: "rocketmq-lock",
        hidden: mutex_barely_contended,
        holds: rocketmq_mutex_hands_off_by_futex_holds,
    },
    Story {
        scenario: "rocketmq-lock",
        hidden: never,
        holds: rocketmq_spin_locks_show_as_spinning_and_yield_storms_holds,
    },
];

/// Runs recorded of each story, at least (scripts/record-corpus.sh).
const MIN_RECORDED: usize = 3;

/// Issue 36: every recorded run of every lab story
/// (tests/recordings/lab/STORY/VARIANT-K.rec, scripts/record-corpus.sh)
/// analysed with this build's rules holds what its live test asserts of a
/// live run. No root and no BPF.
#[test]
fn recorded_lab_runs_hold_what_live_runs_do_issue_36() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recordings/lab");
    let mut failures = Vec::new();
    for story in STORIES {
        let variants = kerntax::demo::find(story.scenario).unwrap().variants;
        let dir = root.join(story.scenario);
        let mut checked = 0;
        for k in 1..=99 {
            let runs: Option<Runs> = variants
                .iter()
                .map(|(v, _)| {
                    recorded(&dir.join(format!("{v}-{k}.rec"))).map(|r| (v.to_string(), r))
                })
                .collect();
            let Some(runs) = runs else { continue };
            if (story.hidden)(&runs) {
                eprintln!(
                    "{} run {k}: the live test would run it again",
                    story.scenario
                );
                continue;
            }
            checked += 1;
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (story.holds)(&runs)));
            if let Err(e) = result {
                failures.push(format!("{} run {k}: {}", story.scenario, panic_text(&*e)));
            }
        }
        assert!(
            checked >= MIN_RECORDED,
            "{}: {checked} runs checked",
            story.scenario
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
