//! Issue 12: kerntax on a JVM. The fixture `tests/fixtures/java/JavaLocks.java`
//! (compiled here with Debian's javac) runs 4 workers around one lock of a
//! known kind for 3 s, beside an idle 3-thread pool fed a tiny task every
//! 2 ms; its figures are the ground truth (acquisitions, the pool's tasks),
//! and the threads' names tell workers from the pool.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use kerntax::report::{Report, WaitClass, WaitSite};

/// The directory holding the compiled fixture (javac runs once per test binary).
fn classes() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("java-fixture");
        std::fs::create_dir_all(&dir).unwrap();
        let src = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/java/JavaLocks.java"
        );
        let out = Command::new("javac")
            .args(["-d", dir.to_str().unwrap(), src])
            .output()
            .expect("javac (Debian's openjdk-17-jdk-headless; scripts/test.sh installs it)");
        assert!(
            out.status.success(),
            "javac failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
    .clone()
}

fn java_run(mode: &str) -> Profiled {
    java_run_threads(mode, "4")
}

fn java_run_threads(mode: &str, threads: &str) -> Profiled {
    let cp = classes();
    let p = run(
        &[],
        &[
            "java",
            "-cp",
            cp.to_str().unwrap(),
            "JavaLocks",
            mode,
            threads,
            "3",
        ],
    );
    assert!(p.output.status.success(), "{}", p.stderr);
    // kerntax's options reach the JVM next to the user's.
    assert!(
        p.stderr.contains("-XX:+PreserveFramePointer"),
        "{}",
        p.stderr
    );
    p
}

fn site<'a>(r: &'a Report, function: &str) -> &'a WaitSite {
    r.waits
        .iter()
        .find(|s| s.function == function)
        .unwrap_or_else(|| {
            panic!(
                "no wait site {function}: {:?}",
                r.waits
                    .iter()
                    .map(|s| (&s.function, s.class))
                    .collect::<Vec<_>>()
            )
        })
}

fn tids_named(r: &Report, prefix: &str) -> Vec<u32> {
    r.threads
        .iter()
        .filter(|t| t.comm.starts_with(prefix))
        .map(|t| t.tid)
        .collect()
}

/// Every JIT frame was named from the JVM's perf map, and nothing says
/// the stacks were cut.
fn jit_frames_named(r: &Report) {
    let jvm = r
        .sampling
        .jit
        .iter()
        .find(|j| j.pid == r.target_pid)
        .unwrap_or_else(|| panic!("no JIT process in {:?}", r.sampling.jit));
    assert!(jvm.perf_map_entries > 100, "{jvm:?}");
    assert!(jvm.frames > 0 && jvm.frames_named == jvm.frames, "{jvm:?}");
    assert_eq!(jvm.problem, None);
    assert_eq!(r.loss.jit_frames_unnamed, 0);
    assert_eq!(r.loss.jit_stacks_cut, 0);
}

/// The idle pool waits for work in its queue, which is not contention,
/// and never at the workers' lock; no thread is called the bottleneck for
/// handing the pool its tasks. The queue's site is named by the innermost
/// platform method the JIT left a frame for: LinkedBlockingQueue.take, or
/// ThreadPoolExecutor.getTask when C2 inlined take into it (CI run of stop
/// 16). (A pool thread may block once on a monitor while classes load:
/// interpreted monitor waits share one site, `ObjectMonitor::EnterI`.)
fn idle_pool_apart(r: &Report) {
    let pool = tids_named(r, "pool-");
    assert_eq!(pool.len(), 3);
    let queue = [
        "java.util.concurrent.LinkedBlockingQueue.take",
        "java.util.concurrent.ThreadPoolExecutor.getTask",
    ];
    let take = r
        .waits
        .iter()
        .filter(|s| queue.contains(&s.function.as_str()))
        .max_by_key(|s| s.wait_ns)
        .unwrap_or_else(|| site(r, queue[0]));
    assert_ne!(take.class, WaitClass::Contention, "{take:?}");
    assert!(
        pool.iter().all(|t| take.waiter_tids.contains(t)),
        "{take:?}"
    );
    for s in r
        .waits
        .iter()
        .filter(|s| s.class == WaitClass::Contention && s.function.starts_with("JavaLocks."))
    {
        for t in &pool {
            assert!(
                !s.waiter_tids.contains(t),
                "pool thread {t} in contended site {}",
                s.function
            );
        }
    }
    assert!(
        !r.findings.iter().any(|f| f.id == "wait.bottleneck"),
        "{:?}",
        r.findings
    );
}

/// The first finding; without one, the locks' figures say why.
fn first_finding(r: &Report) -> &kerntax::report::Finding {
    r.findings.first().unwrap_or_else(|| {
        panic!(
            "no finding; locks {:?}",
            r.locks
                .iter()
                .map(|l| (
                    l.display_name(),
                    l.contention,
                    l.waits,
                    l.wait_ns,
                    l.threads
                ))
                .collect::<Vec<_>>()
        )
    })
}

/// The contended worker site: the Java method, all 4 workers, one parker
/// per waiter, released by the workers themselves in the same method.
fn workers_contend(r: &Report, method: &str) {
    let workers = tids_named(r, "worker-");
    assert_eq!(workers.len(), 4);
    let s = site(r, method);
    assert_eq!(s.class, WaitClass::Contention, "{s:?}");
    let comms: Vec<(u32, &str)> = s
        .waiter_tids
        .iter()
        .map(|t| {
            let c = r
                .threads
                .iter()
                .find(|x| x.tid == *t)
                .map_or("?", |x| x.comm.as_str());
            (*t, c)
        })
        .collect();
    assert_eq!(s.waiters, 4, "{comms:?} {s:?}");
    assert!(
        s.waiter_tids.iter().all(|t| workers.contains(t)),
        "{comms:?} {s:?}"
    );
    // A contended Java lock parks each waiter on its own parker.
    assert!(s.lock_words >= 4, "{s:?}");
    // HotSpot spins adaptively before it parks, so how many acquisitions
    // end in a park varies from run to run (706 to several thousand seen on
    // 2 CPUs); that the workers spend over half a thread waiting does not.
    assert!(s.waits > 200, "{s:?}");
    assert!(s.waiting_threads > 0.5, "{s:?}");
    let top = &s.releases[0];
    assert!(top.from_waiters && top.in_target, "{top:?}");
    assert_eq!(top.site.as_deref(), Some(method), "{top:?}");
}

#[test]
fn a_reentrant_lock_is_one_wait_site_named_by_the_java_method_with_its_idle_pool_apart_issue_12() {
    if !bpf_available() {
        return;
    }
    let p = java_run("reentrant");
    let r = &p.report;
    assert!(printed(&p, "acquisitions") > 10_000);
    assert!(printed(&p, "pool_tasks") > 500);
    jit_frames_named(r);
    workers_contend(r, "JavaLocks.reentrantWorker");
    let s = site(r, "JavaLocks.reentrantWorker");
    // Named through the lock's Java frames.
    assert!(
        s.stacks
            .iter()
            .any(|st| has_frame(&st.frames, "jdk.internal.misc.Unsafe.park")),
        "{:?}",
        s.stacks
    );
    idle_pool_apart(r);
    let f = first_finding(r);
    assert!(f.id.starts_with("lock."), "{:?}", r.findings);
    assert_eq!(
        f.culprit.name.split(" via ").next(),
        Some("JavaLocks.reentrantWorker")
    );
    assert!(f.remedy.contains("In Java"), "{}", f.remedy);
}

#[test]
fn a_synchronized_block_is_one_wait_site_named_by_the_java_method_issue_12() {
    if !bpf_available() {
        return;
    }
    let p = java_run("synchronized");
    let r = &p.report;
    jit_frames_named(r);
    workers_contend(r, "JavaLocks.synchronizedWorker");
    idle_pool_apart(r);
    let f = first_finding(r);
    assert!(f.id.starts_with("lock."), "{:?}", r.findings);
    assert_eq!(
        f.culprit.name.split(" via ").next(),
        Some("JavaLocks.synchronizedWorker")
    );
}

#[test]
fn a_compare_and_swap_spin_lock_without_pause_is_spinning_named_by_the_java_method_issue_12() {
    if !bpf_available() {
        return;
    }
    let p = java_run("spin");
    let r = &p.report;
    jit_frames_named(r);
    assert!(r.spin.cas_spin_samples >= 10, "{:?}", r.spin);
    let f = &r.findings[0];
    assert_eq!(f.id, "spin.waste", "{:?}", r.findings);
    assert_eq!(f.culprit.name, "JavaLocks.spinWorker");
    assert!(f.remedy.contains("Thread.onSpinWait"), "{}", f.remedy);
    idle_pool_apart(r);
}

#[test]
fn workers_with_a_lock_each_get_no_lock_or_spin_finding_issue_12() {
    if !bpf_available() {
        return;
    }
    let p = java_run("none");
    let r = &p.report;
    jit_frames_named(r);
    assert!(
        !r.findings.iter().any(|f| f.id.starts_with("lock.")
            || f.id == "spin.waste"
            || f.id == "wait.bottleneck"),
        "{:?}",
        r.findings
    );
    // No worker's wait that costs anything is contention. A worker may
    // still queue briefly on one of the JVM's own locks on its way through
    // the VM (issue 19, 1 suite run of many: 2 waits, 0.35 ms in all, for
    // the compile queue's lock as the interpreter asked for a compilation).
    assert!(
        !r.waits.iter().any(|s| s.function.starts_with("JavaLocks.")
            && s.class == WaitClass::Contention
            && s.wait_ns >= 10_000_000),
        "{:?}",
        r.waits
            .iter()
            .map(|s| (&s.function, s.class))
            .collect::<Vec<_>>()
    );
}

/// Issue 19: a server's request handlers, a ThreadPoolExecutor's 16
/// threads, idle most of the run in its LinkedBlockingQueue and queued on
/// one ReentrantLock within each request. The queue's consumers wake one
/// another by design (a take that leaves items behind signals the next),
/// which is no contention: the lock in the request path is the finding,
/// and the idle pool is waiting for work.
#[test]
fn request_handlers_queue_on_their_lock_and_their_idle_queue_is_not_contention_issue_19() {
    if !bpf_available() {
        return;
    }
    let p = java_run_threads("server", "16");
    let r = &p.report;
    // About 3,700 requests (16 every 12 ms for 3 s).
    assert!(printed(&p, "acquisitions") > 2_500);
    jit_frames_named(r);
    let handlers = tids_named(r, "pool-");
    assert_eq!(handlers.len(), 16);
    let queue = [
        "java.util.concurrent.LinkedBlockingQueue.take",
        "java.util.concurrent.ThreadPoolExecutor.getTask",
    ];
    let takes: Vec<&WaitSite> = r
        .waits
        .iter()
        .filter(|s| queue.contains(&s.function.as_str()))
        .collect();
    assert!(!takes.is_empty(), "{:?}", r.waits);
    let idle: f64 = takes.iter().map(|s| s.waiting_threads).sum();
    // The handlers idle in the queue most of the run.
    assert!(idle > 6.0, "{takes:?}");
    for s in &takes {
        assert_eq!(s.class, WaitClass::WaitingForWork, "{s:?}");
        assert_eq!(s.prior, kerntax::report::WaitPrior::QueueTake, "{s:?}");
    }
    // Most of the queue's waiting the handlers passed on to one another.
    let top = takes.iter().max_by_key(|s| s.wait_ns).unwrap();
    assert!(top.relay_share > 0.5, "{top:?}");
    let lock = site(r, "JavaLocks.handleRequest");
    assert_eq!(lock.class, WaitClass::Contention, "{lock:?}");
    assert_eq!(
        lock.prior,
        kerntax::report::WaitPrior::LockAcquire,
        "{lock:?}"
    );
    assert!(lock.waiters >= 8, "{lock:?}");
    let f = &r.findings[0];
    assert!(f.id.starts_with("lock."), "{:?}", r.findings);
    assert_eq!(
        f.culprit.name.split(" via ").next(),
        Some("JavaLocks.handleRequest"),
        "{:?}",
        r.findings
    );
    assert!(
        !r.findings
            .iter()
            .any(|f| f.id == "wait.bottleneck"
                || queue.iter().any(|q| f.culprit.name.starts_with(q))),
        "{:?}",
        r.findings
    );
}

/// A JVM started by the test, not by kerntax: `extra` are its options.
fn start_jvm(extra: &[&str]) -> Child {
    let cp = classes();
    let mut args: Vec<&str> = extra.to_vec();
    args.extend([
        "-cp",
        cp.to_str().unwrap(),
        "JavaLocks",
        "reentrant",
        "4",
        "8",
    ]);
    let child = Command::new("java")
        .args(&args)
        .env_remove("JAVA_TOOL_OPTIONS")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting java");
    // Past start-up and the first compilations.
    std::thread::sleep(Duration::from_secs(2));
    child
}

fn attach(pid: u32, secs: &str) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = kerntax()
        .args(["attach", &pid.to_string(), "--duration", secs, "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    read_report(&json)
}

#[test]
fn attached_to_a_running_jvm_kerntax_asks_it_for_its_perf_map_issue_12() {
    if !bpf_available() {
        return;
    }
    let mut jvm = start_jvm(&["-XX:+PreserveFramePointer"]);
    let r = attach(jvm.id(), "3");
    jvm.wait().unwrap();
    let j = &r.sampling.jit[0];
    assert_eq!(j.frame_pointers, Some(true), "{j:?}");
    jit_frames_named(&r);
    workers_contend(&r, "JavaLocks.reentrantWorker");
}

#[test]
fn a_jvm_without_frame_pointers_is_reported_with_its_stacks_cut_issue_12() {
    if !bpf_available() {
        return;
    }
    let mut jvm = start_jvm(&[]);
    let r = attach(jvm.id(), "3");
    jvm.wait().unwrap();
    let j = &r.sampling.jit[0];
    assert_eq!(j.frame_pointers, Some(false), "{j:?}");
    assert!(j.perf_map_entries > 100, "{j:?}");
    let problem = j.problem.as_deref().unwrap_or_default();
    assert!(problem.contains("-XX:+PreserveFramePointer"), "{problem}");
    assert!(r.loss.jit_stacks_cut > 0, "{:?}", r.loss);
}

/// A JVM that exits while attached (a job, a load generator whose end is
/// the profile's) can no longer be asked for its perf map at the end: its
/// frames are named from the map it wrote when asked as profiling started
/// (CI on 3450838: rocketmq-producer's JVM, exiting as its profile ended,
/// left every Java frame unnamed and its waits one site).
#[test]
fn a_jvm_gone_by_the_end_is_named_from_its_map_at_the_start_issue_37() {
    if !bpf_available() {
        return;
    }
    // It runs 8 s from its start (2 s before the attach); the profile would
    // run 20 s, and ends with it.
    let mut jvm = start_jvm(&["-XX:+PreserveFramePointer"]);
    let r = attach(jvm.id(), "20");
    jvm.wait().unwrap();
    assert!(r.duration_ns < 15_000_000_000, "{}", r.duration_ns);
    let j = &r.sampling.jit[0];
    assert_eq!(j.frame_pointers, Some(true), "{j:?}");
    let problem = j.problem.as_deref().unwrap_or_default();
    assert!(problem.contains("as profiling started"), "{problem}");
    // Compiled before the attach, the workers' code is named; what was
    // compiled since may not be.
    assert!(j.perf_map_entries > 100 && j.frames_named > 0, "{j:?}");
    eprintln!("named {} of {} JIT frames", j.frames_named, j.frames);
    // The workers' waits are one site, named by their Java method (how
    // much they wait, with HotSpot's adaptive spinning, varies: CPU time
    // taken by the JVM's exit too).
    let s = site(&r, "JavaLocks.reentrantWorker");
    assert_eq!(s.waiters, 4, "{s:?}");
    assert_eq!(s.prior, kerntax::report::WaitPrior::LockAcquire, "{s:?}");
}

/// Issue 38: HotSpot's own tables (vmStructs) give kerntax what it reads
/// an interpreted frame with, on every JDK here: the version, and the
/// interpreter's code inside the JIT's anonymous executable memory (where
/// the perf map's `Interpreter` stub is).
#[test]
fn every_jdk_here_describes_its_interpreter_in_its_own_tables_issue_38() {
    let cp = classes();
    let mut seen = 0;
    for java in jdks() {
        let mut child = Command::new(&java)
            .args(["-XX:+UnlockDiagnosticVMOptions", "-XX:+DumpPerfMapAtExit"])
            .args([
                "-cp",
                cp.to_str().unwrap(),
                "JavaLocks",
                "reentrant",
                "2",
                "2",
            ])
            .env_remove("JAVA_TOOL_OPTIONS")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(1));
        let pid = child.id();
        let maps = kerntax::stacks::maps::read(pid).unwrap();
        let mut jvms = kerntax::interp::hotspot::Jvms::default();
        kerntax::interp::Reader::learn(&mut jvms, pid, &maps);
        let described = jvms.describe(pid);
        child.wait().unwrap();
        let (major, interp) = described.unwrap_or_else(|e| panic!("{java}: {e}"));
        // The perf map written at exit names the same code Interpreter.
        let map = std::fs::read_to_string(format!("/tmp/perf-{pid}.map")).unwrap();
        let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
        let stub = map
            .lines()
            .find(|l| l.ends_with(" Interpreter"))
            .and_then(|l| {
                u64::from_str_radix(l.split(' ').next()?.trim_start_matches("0x"), 16).ok()
            })
            .unwrap_or_else(|| panic!("{java}: no Interpreter in its perf map"));
        assert!(
            interp.contains(&stub),
            "{java} {major}: {interp:x?} {stub:#x}"
        );
        let version = Command::new(&java).arg("-version").output().unwrap();
        let said = String::from_utf8_lossy(&version.stderr).to_string();
        assert!(
            said.contains(&format!("\"{major}")),
            "{java}: {major} {said}"
        );
        eprintln!("{java}: JDK {major}, its interpreter at {interp:x?}");
        seen += 1;
    }
    assert!(seen >= 1);
}

/// The java launchers installed, each JDK once: Debian's default, and any
/// other JDK under /usr/lib/jvm (the fixture's classes are Java 17's).
fn jdks() -> Vec<String> {
    let mut out: Vec<std::path::PathBuf> = Vec::new();
    let default = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("java"))
        .find(|p| p.exists());
    let mut more: Vec<std::path::PathBuf> = std::fs::read_dir("/usr/lib/jvm")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin/java"))
        .filter(|p| p.exists())
        .collect();
    more.sort();
    for p in default.into_iter().chain(more) {
        if let Ok(real) = std::fs::canonicalize(&p)
            && !out.contains(&real)
        {
            out.push(real);
        }
    }
    out.iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

/// The line of the first line of `JavaLocks.java` after `after` that holds
/// `what`: the fixture's source is the truth its class's line table (the
/// JVM's own stack traces) gives.
fn source_line(after: &str, what: &str) -> i32 {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/java/JavaLocks.java"
    ))
    .unwrap();
    let lines: Vec<&str> = src.lines().collect();
    let from = lines.iter().position(|l| l.contains(after)).unwrap();
    let at = lines[from..].iter().position(|l| l.contains(what)).unwrap();
    (from + at + 1) as i32
}

/// Issue 38: a Java program the JIT never compiles (`-Xint`: every method
/// interpreted, as a short run's and a cold path's are) reads as compiled
/// code does: its methods named from the JVM's own Method structures, with
/// their source lines, so the same wait site, lock and finding; before,
/// every Java frame was `Interpreter (jit)` and nothing was found. On every
/// JDK here (17: the line table's UNSIGNED5 with zero bytes, the source
/// file in the class; 25: without, in the constant pool).
#[test]
fn a_java_program_never_compiled_reads_as_one_compiled_issue_38() {
    if !bpf_available() {
        return;
    }
    let cp = classes();
    let lock_at = source_line("static void reentrantWorker", "lock.lock();");
    let unlock_at = source_line("static void reentrantWorker", "lock.unlock();");
    for java in jdks() {
        let p = run(
            &[],
            &[
                &java,
                "-Xint",
                "-cp",
                cp.to_str().unwrap(),
                "JavaLocks",
                "reentrant",
                "4",
                "3",
            ],
        );
        assert!(p.output.status.success(), "{java}: {}", p.stderr);
        let r = &p.report;
        let i = &r.sampling.interpreters;
        assert!(
            i.seen.iter().any(|s| s.contains("HotSpot JDK")),
            "{java}: {i:?}"
        );
        // Nearly every interpreted frame named: those left are methods
        // first met after the JVM exited (its shutdown).
        assert!(
            i.frames > 10_000 && i.frames_unreadable * 100 < i.frames,
            "{java}: {i:?}"
        );
        workers_contend(r, "JavaLocks.reentrantWorker");
        let s = site(r, "JavaLocks.reentrantWorker");
        let waiter = format!("JavaLocks.reentrantWorker (JavaLocks.java:{lock_at}, interpreted)");
        assert!(
            s.stacks[0].frames.iter().any(|f| *f == waiter),
            "{java}: {waiter} in {:?}",
            s.stacks[0].frames
        );
        let waker = format!("JavaLocks.reentrantWorker (JavaLocks.java:{unlock_at}, interpreted)");
        assert!(
            s.releases[0].stacks[0].frames.iter().any(|f| *f == waker),
            "{java}: {waker} in {:?}",
            s.releases[0].stacks[0].frames
        );
        // Which lock rule comes first rests on how many CPUs the
        // interpreted workers leave idle (lock.global-serializes wants half
        // a CPU idle; a CI run left less and named lock.contended-site), as
        // it does for the compiled run above: the lock and the method named
        // are what this asserts.
        let f = first_finding(r);
        assert!(f.id.starts_with("lock."), "{java}: {f:?}");
        assert!(
            f.culprit.name.starts_with("JavaLocks.reentrantWorker"),
            "{java}: {f:?}"
        );
    }
}
