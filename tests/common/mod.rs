//! Helpers for tests that run the real kerntax binary on fixture programs.
//!
//! BPF tests need root. Without it they skip with a message, unless
//! KERNTAX_REQUIRE_BPF=1 (as in CI), where not being able to attach fails.

#![allow(dead_code)]

pub mod process;

use std::path::PathBuf;
use std::process::{Command, Output};

use kerntax::report::{Report, SyscallReport};

pub fn kerntax() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kerntax"))
}

/// The JSON report kerntax wrote at `path`, which must be there and parse.
pub fn read_report(path: &std::path::Path) -> Report {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("no JSON report at {}: {e}", path.display()));
    serde_json::from_str(&text).expect("the JSON report parses as a Report")
}

/// The report a recording gives with this build's rules (issue 36), or
/// None if there is no file at `path`.
pub fn recorded(path: &std::path::Path) -> Option<Report> {
    let bytes = std::fs::read(path).ok()?;
    let rec = kerntax::recording::file::decode(&bytes)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Some(kerntax::analyze::recorded::report(&rec).report)
}

/// What a caught panic said, its first 600 characters.
pub fn panic_text(e: &(dyn std::any::Any + Send)) -> String {
    let msg = e
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    msg.chars().take(600).collect()
}

/// Runs `check` on each pair of recorded runs of one program or story,
/// `a-K.rec` with `b-K.rec` in `dir` for each K recorded, and returns
/// (pairs checked, failures as "FILE: message"). A pair `skip` says the
/// live test would have run again (the machine hid the problem) is not
/// checked.
pub fn replay_pairs(
    dir: &std::path::Path,
    (a, b): (&str, &str),
    skip: &dyn Fn(&Report) -> bool,
    check: &dyn Fn(&Report, &Report),
) -> (usize, Vec<String>) {
    let (mut checked, mut failures) = (0, Vec::new());
    for k in 1..=99 {
        let name = |v: &str| dir.join(format!("{v}-{k}.rec"));
        let (Some(ra), Some(rb)) = (recorded(&name(a)), recorded(&name(b))) else {
            continue;
        };
        if skip(&ra) {
            eprintln!("{}: the live test would run it again", name(a).display());
            continue;
        }
        checked += 1;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&ra, &rb)));
        if let Err(e) = result {
            let msg = panic_text(&*e);
            failures.push(format!(
                "{} with {}: {msg}",
                name(a).display(),
                name(b).display()
            ));
        }
    }
    (checked, failures)
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("KERNTAX_FIXTURE_DIR")).join(name)
}

/// Whether BPF tests can run here; panics if they must and cannot.
pub fn bpf_available() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let btf = std::path::Path::new("/sys/kernel/btf/vmlinux").exists();
    if root && btf {
        return true;
    }
    let why = if root { "no kernel BTF" } else { "not root" };
    if std::env::var("KERNTAX_REQUIRE_BPF").as_deref() == Ok("1") {
        panic!("KERNTAX_REQUIRE_BPF=1 but BPF tests cannot run: {why}");
    }
    eprintln!("skipping BPF test: {why} (set KERNTAX_REQUIRE_BPF=1 to make this fail)");
    false
}

/// A program or set-up a test needs is missing: a failure where the whole
/// suite must run (KERNTAX_REQUIRE_BPF=1 or CI=true, as in CI), else the
/// test skips, saying `why`.
pub fn unavailable(why: &str) {
    let must = std::env::var("KERNTAX_REQUIRE_BPF").as_deref() == Ok("1")
        || std::env::var("CI").as_deref() == Ok("true");
    assert!(!must, "{why} (scripts/test.sh sets it up)");
    eprintln!("skipping: {why}");
}

/// `kerntax ARGS` is refused before it starts: status 2 and one
/// `kerntax: ...` line saying `says`.
pub fn refused_in_one_line(args: &[&str], says: &str) {
    let out = kerntax().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.starts_with("kerntax: ") && stderr.contains(says),
        "{args:?}: {stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

pub struct Profiled {
    pub output: Output,
    pub report: Report,
    pub stderr: String,
}

/// `kerntax run --json TMP [extra...] -- argv...`, parsed.
pub fn run(extra: &[&str], argv: &[&str]) -> Profiled {
    run_with_env(&[], extra, argv)
}

/// `run`, with `env` set for kerntax (and so for the program).
pub fn run_with_env(env: &[(&str, &str)], extra: &[&str], argv: &[&str]) -> Profiled {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let rec = dir.path().join("run.rec");
    let keep = std::env::var_os("KERNTAX_TEST_KEEP");
    let mut record: Vec<&std::ffi::OsStr> = Vec::new();
    if keep.is_some() {
        record.extend([std::ffi::OsStr::new("--record"), rec.as_os_str()]);
    }
    let output = kerntax()
        .arg("run")
        .arg("--json")
        .arg(&json)
        .args(&record)
        .args(extra)
        .arg("--")
        .args(argv)
        .envs(env.iter().copied())
        .output()
        .expect("running kerntax");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    // KERNTAX_TEST_KEEP=DIR keeps each report and its recording (to read a
    // failed test's, and to add it to tests/recordings/).
    if let Some(keep) = keep {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("{}-{n}", std::process::id());
        let keep = std::path::Path::new(&keep);
        let _ = std::fs::copy(&json, keep.join(format!("{name}.json")));
        let _ = std::fs::copy(&rec, keep.join(format!("{name}.rec")));
    }
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("no JSON report ({e}); stderr:\n{stderr}"));
    let report: Report = serde_json::from_str(&text).expect("the JSON report parses as a Report");
    Profiled {
        output,
        report,
        stderr,
    }
}

pub fn run_fixture(args: &[&str]) -> Profiled {
    run_program("calls", args)
}

/// Fixture `name` with `args` under `kerntax run`, not checked.
pub fn run_program(name: &str, args: &[&str]) -> Profiled {
    let exe = fixture(name);
    let mut argv = vec![exe.to_str().unwrap()];
    argv.extend_from_slice(args);
    run(&[], &argv)
}

/// Fixture `name` with `args` under `kerntax run`; it must succeed.
pub fn run_ok(name: &str, args: &[&str]) -> Profiled {
    let p = run_program(name, args);
    assert!(p.output.status.success(), "{}", p.stderr);
    p
}

/// The `key=value` a fixture printed.
pub fn printed(p: &Profiled, key: &str) -> i64 {
    let stdout = String::from_utf8_lossy(&p.output.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {stdout}"))
        .parse()
        .unwrap()
}

pub fn syscall<'a>(r: &'a Report, name: &str) -> &'a SyscallReport {
    r.syscalls
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| {
            panic!(
                "no {name} in report: {:?}",
                r.syscalls.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        })
}

/// Names of loaded BPF programs that belong to kerntax.
pub fn kerntax_programs() -> Vec<String> {
    libbpf_rs::query::ProgInfoIter::default()
        .filter_map(|p| p.name.to_str().map(str::to_string))
        .filter(|n| n.starts_with("kt_"))
        .collect()
}

/// Waits (up to 5 s) until no kerntax BPF program is loaded; returns those left.
pub fn wait_programs_gone() -> Vec<String> {
    for _ in 0..50 {
        let left = kerntax_programs();
        if left.is_empty() {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    kerntax_programs()
}

/// Whether a symbolized stack has a frame of function `func`.
pub fn has_frame<S: AsRef<str>>(frames: &[S], func: &str) -> bool {
    frames.iter().any(|f| {
        f.as_ref()
            .strip_prefix(func)
            .is_some_and(|rest| rest.starts_with(' '))
    })
}

/// A folded stack's (outermost first) frames of one interpreted file, as
/// (function, line), where `marker` is ` (FILE:` (` (busy.py:`); and
/// whether native code runs between two of them (a C function calling
/// back into the interpreter: `sorted` with a key function).
pub fn interpreted_frames(stack: &str, marker: &str) -> (Vec<(String, i64)>, bool) {
    let (mut out, mut native_between, mut native_after) = (Vec::new(), false, false);
    for f in stack.split(';') {
        match f.rsplit_once(marker) {
            Some((name, line)) => {
                native_between |= native_after;
                out.push((
                    name.to_string(),
                    line.trim_end_matches(')').parse().unwrap_or(0),
                ));
            }
            None => native_after |= !out.is_empty(),
        }
    }
    (out, native_between)
}

/// A program that writes its own truth (JSON, to the path given as its
/// last argument) before it works, profiled: its report, folded stacks
/// and truth. `attach`: started first and attached to for 2 s once its
/// truth is written (else started by `kerntax run`). `argv` gets the truth
/// file's path appended. The HTML page and the pprof profile are written
/// too, and must carry the interpreted frames the folded stacks show.
pub fn profiled_with_truth(argv: &[&str], attach: bool) -> (Report, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let (truth_path, folded_path, json, html, pprof) = (
        dir.path().join("truth.json"),
        dir.path().join("folded"),
        dir.path().join("r.json"),
        dir.path().join("r.html"),
        dir.path().join("r.pb.gz"),
    );
    let outputs: Vec<&str> = vec![
        "--folded",
        folded_path.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--pprof",
        pprof.to_str().unwrap(),
    ];
    let mut argv: Vec<&str> = argv.to_vec();
    argv.push(truth_path.to_str().unwrap());
    let report = if attach {
        let mut child = Command::new(argv[0]).args(&argv[1..]).spawn().unwrap();
        // Past its start-up: its truth is written before it starts working.
        while !truth_path.exists() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        let out = kerntax()
            .args([
                "attach",
                &child.id().to_string(),
                "--duration",
                "2",
                "--json",
            ])
            .arg(&json)
            .args(&outputs)
            .output()
            .unwrap();
        let _ = child.wait();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        read_report(&json)
    } else {
        let p = run(&outputs, &argv);
        assert!(p.output.status.success(), "{}", p.stderr);
        p.report
    };
    let folded = std::fs::read_to_string(&folded_path).unwrap();
    outputs_carry_interpreted_frames(
        &folded,
        &std::fs::read_to_string(&html).unwrap(),
        &std::fs::read(&pprof).unwrap(),
    );
    let truth = serde_json::from_str(&std::fs::read_to_string(&truth_path).unwrap()).unwrap();
    (report, folded, truth)
}

/// Interpreted frames (`leaf (busy.rb:14)`) of the heaviest folded stacks,
/// to be found in the other outputs.
const FRAMES_CHECKED: usize = 10;

/// Issue 20: the interpreted frames the folded stacks carry are in the HTML
/// page's flame graphs (as text, escaped once or twice) and in the pprof
/// profile (as a function, its file and line).
fn outputs_carry_interpreted_frames(folded: &str, html: &str, pprof_gz: &[u8]) {
    use prost::Message;
    use std::io::Read;
    let mut stacks: Vec<(u64, &str)> = folded
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(s, n)| (n.parse().unwrap_or(0), s))
        .collect();
    stacks.sort_unstable_by(|a, b| b.cmp(a));
    let mut frames: Vec<&str> = Vec::new();
    for (_, s) in &stacks {
        for f in s.split(';') {
            let js = f.ends_with(", js)");
            if (kerntax::frame::is_interpreted(f) || js) && !frames.contains(&f) {
                frames.push(f);
            }
        }
        if frames.len() >= FRAMES_CHECKED {
            break;
        }
    }
    assert!(!frames.is_empty(), "no interpreted frames:\n{folded}");
    let mut raw = vec![];
    flate2::read::GzDecoder::new(pprof_gz)
        .read_to_end(&mut raw)
        .unwrap();
    let p = kerntax::render::pprof::Profile::decode(&raw[..]).unwrap();
    let s = |i: i64| p.string_table[i as usize].as_str();
    let in_pprof: std::collections::HashSet<(&str, &str, i64)> = p
        .location
        .iter()
        .flat_map(|l| &l.line)
        .map(|l| {
            let f = &p.function[l.function_id as usize - 1];
            (s(f.name), s(f.filename), l.line)
        })
        .collect();
    let escape = |t: &str| {
        t.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    for f in frames {
        let parsed = kerntax::render::pprof::parse_frame(f);
        assert!(in_pprof.contains(&parsed), "{f} not in the pprof profile");
        let once = escape(f);
        assert!(
            html.contains(f) || html.contains(&once) || html.contains(&escape(&once)),
            "{f} not in the HTML page"
        );
    }
}

/// Issue 20: a syscall storm from interpreted code is named by the line
/// that calls: `fixture` (run by `interpreter` for a second) writes that
/// line's function and number, as its own code objects or iseqs say.
pub fn storm_named_by_its_line(interpreter: &str, fixture: &std::path::Path) {
    let (report, _, truth) =
        profiled_with_truth(&[interpreter, fixture.to_str().unwrap(), "1"], false);
    let f = report
        .findings
        .iter()
        .find(|f| f.id == "syscall.storm")
        .expect("a syscall storm");
    let file = fixture.file_name().unwrap().to_str().unwrap();
    let want = format!(
        "from {} ({file}:{})",
        truth["function"].as_str().unwrap(),
        truth["line"]
    );
    assert!(f.title.ends_with(&want), "{} (want {want})", f.title);
}

/// Runs the corpus script `tests/real/NAME/run VARIANT` (issue #10) under
/// this build's kerntax with `env`: the report and what the script
/// printed. It must succeed and print its throughput.
pub fn corpus_run(name: &str, variant: &str, env: &[(&str, &str)]) -> (Report, String) {
    use std::path::Path;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/real")
        .join(name)
        .join("run");
    let rec = dir.path().join("run.rec");
    let out = Command::new(&script)
        .arg(variant)
        .arg(&json)
        .env("KERNTAX", env!("CARGO_BIN_EXE_kerntax"))
        .env("KERNTAX_RECORD", &rec)
        .envs(env.iter().copied())
        .output()
        .expect("running the corpus script");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // KERNTAX_TEST_KEEP=DIR keeps each report, its recording (to add to
    // tests/recordings/real/NAME/) and what the script printed.
    if let Some(keep) = std::env::var_os("KERNTAX_TEST_KEEP") {
        let keep = Path::new(&keep);
        let _ = std::fs::copy(&json, keep.join(format!("{name}-{variant}.json")));
        let _ = std::fs::copy(&rec, keep.join(format!("{name}-{variant}.rec")));
        let _ = std::fs::write(keep.join(format!("{name}-{variant}.out")), &stdout);
    }
    assert!(
        out.status.success(),
        "{name} {variant} failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("throughput: "), "{stdout}");
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("{name} {variant}: no report ({e}):\n{stderr}"));
    // Issue 36: its recording analysed again is the same report.
    let replayed = recorded(&rec).expect("the run's recording");
    assert!(
        kerntax::render::json::render(&replayed) + "\n" == text,
        "{name} {variant}: its recording gives another report"
    );
    (serde_json::from_str(&text).unwrap(), stdout)
}
