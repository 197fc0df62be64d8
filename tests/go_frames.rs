//! Go frames named from a stripped binary's own tables (issue 38): the
//! functions, files, lines and inlined calls kerntax reads from
//! `.gopclntab` against the Go runtime's own traceback of the same
//! goroutine (runtime.Stack), for every Go toolchain on the machine (the
//! test command installs Debian 12's Go 1.19 beside any other: its table
//! layout is the one Debian's Go programs carry; Go 1.20 and later have
//! another, and from 1.26 on the table no longer states the text start),
//! each built as an executable and as a position-independent one. And the
//! Go runtime's known kernel-cost pattern read from those frames: a log
//! line per write(2) through os.File, which has no buffer.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{bpf_available, printed, run, syscall, unavailable};

/// Every Go toolchain here, each once.
fn toolchains() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = vec![PathBuf::from("/usr/local/go/bin/go")];
    if let Ok(dirs) = std::fs::read_dir("/usr/lib") {
        for d in dirs.flatten() {
            if d.file_name().to_string_lossy().starts_with("go-") {
                found.push(d.path().join("bin/go"));
            }
        }
    }
    let mut out: Vec<PathBuf> = found
        .into_iter()
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    out.sort();
    out.dedup();
    out
}

fn version(go: &Path) -> String {
    let out = Command::new(go).arg("version").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The fixture `name` (tests/fixtures/go/NAME.go) built stripped by `go`
/// into `dir`, as an executable at a fixed address or position-independent
/// (`mode`: `exe`, `pie`; a PIE's module data is filled by relocations at
/// load).
fn build(go: &Path, dir: &Path, name: &str, mode: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/go/{name}.go"));
    let bin = dir.join(format!("{name}-{mode}"));
    let out = Command::new(go)
        .args([
            "build",
            &format!("-buildmode={mode}"),
            "-ldflags=-s -w",
            "-o",
        ])
        .arg(&bin)
        .arg(&src)
        .env("GOTOOLCHAIN", "local")
        .env("GO111MODULE", "off")
        .env("GOFLAGS", "")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} ({mode}): {}",
        version(go),
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// A frame: function, `file:line` (the file's last component) and whether
/// it was inlined into the next.
type Frame = (String, String, bool);

/// The traceback's frames of the goroutine in `main.writer`, innermost
/// first. An inlined frame's args read `(...)` and its location has no
/// `+0x` offset.
fn traceback(text: &str) -> Vec<Frame> {
    let block = text
        .split("\n\n")
        .find(|b| b.contains("main.writer("))
        .unwrap_or_else(|| panic!("no writer goroutine in:\n{text}"));
    let lines: Vec<&str> = block.lines().skip(1).collect();
    lines
        .chunks(2)
        .take_while(|c| c.len() == 2 && !c[0].starts_with("created by"))
        .map(|c| {
            let name = c[0][..c[0].rfind('(').unwrap()].to_string();
            let loc = c[1].trim();
            let inlined = !loc.contains(" +0x");
            let path = loc.split(' ').next().unwrap();
            let base = path.rsplit('/').next().unwrap().to_string();
            (name, base, inlined)
        })
        .collect()
}

/// kerntax's frame string as a `Frame`: `name (file:line)[ [inlined]]`.
fn parsed(frame: &str) -> Frame {
    let (rest, inlined) = match frame.strip_suffix(" [inlined]") {
        Some(r) => (r, true),
        None => (frame, false),
    };
    let open = rest.rfind(" (").unwrap_or(rest.len());
    let loc = rest[open..]
        .trim_start_matches(" (")
        .trim_end_matches(')')
        .to_string();
    (rest[..open].to_string(), loc, inlined)
}

#[test]
fn go_frames_of_a_stripped_binary_are_the_go_runtimes_own() {
    if !bpf_available() {
        return;
    }
    let gos = toolchains();
    if gos.is_empty() {
        unavailable("no Go toolchain");
        return;
    }
    for (go, mode) in gos.iter().flat_map(|g| [(g, "exe"), (g, "pie")]) {
        let v = format!("{} ({mode})", version(go));
        let dir = tempfile::tempdir().unwrap();
        let bin = build(go, dir.path(), "writer", mode);
        let truth_path = dir.path().join("traceback.txt");
        let p = run(&[], &[bin.to_str().unwrap(), truth_path.to_str().unwrap()]);
        assert!(p.output.status.success(), "{v}: {}", p.stderr);
        let truth = traceback(&std::fs::read_to_string(&truth_path).unwrap());
        // The innermost frame is where the goroutine entered its syscall
        // state (after runtime.entersyscall), not where kerntax sees the
        // call: from its caller out to main.writer the two must agree.
        let end = truth
            .iter()
            .position(|f| f.0 == "main.writer")
            .expect("main.writer in the traceback");
        let want = &truth[1..=end];
        assert!(
            want.iter().any(|f| f.2),
            "{v}: the compiler inlined nothing here: {truth:?}"
        );
        let write = p
            .report
            .syscalls
            .iter()
            .find(|s| s.name == "write")
            .unwrap_or_else(|| panic!("{v}: no write"));
        let site = write
            .callsites
            .iter()
            .find(|c| c.frames.iter().any(|f| f.starts_with("main.writer ")))
            .unwrap_or_else(|| panic!("{v}: no writer callsite: {:?}", write.callsites));
        assert!(
            site.calls >= 60_000,
            "{v}: 64 KiB one byte at a time: {}",
            site.calls
        );
        let got: Vec<Frame> = site.frames.iter().map(|f| parsed(f)).collect();
        let at = got
            .iter()
            .position(|f| f.0 == want[0].0)
            .unwrap_or_else(|| panic!("{v}: {} not in {:?}", want[0].0, site.frames));
        assert_eq!(
            got.get(at..at + want.len()),
            Some(want),
            "{v}: kerntax {:?}",
            site.frames
        );
        // Every frame of the stack named, with a line.
        assert!(
            got.iter()
                .all(|f| f.1.contains(':') && !f.0.contains("+0x")),
            "{v}: {:?}",
            site.frames
        );
    }
}

/// Issue 38: Go's known kernel-cost pattern named from the stripped
/// binary's frames. A goroutine logging each request through log.Logger
/// on a file makes one write(2) a line (os.File has no buffer): kerntax
/// counts as many writes as the program logged lines, names the pattern
/// at log's call with bufio.Writer as the fix; with a bufio.Writer the
/// same program makes one write per ~870 lines and no finding names it.
/// (Measured without kerntax, Go 1.19, 3 runs each: 1.56-1.70 µs of CPU a
/// line unbuffered, 0.80-0.81 µs buffered; kerntax's estimate of the gain
/// 37% of the CPU, measured 49-53%.)
#[test]
fn a_go_program_that_logs_a_line_per_write_is_told_to_buffer_it_issue_38() {
    if !bpf_available() {
        return;
    }
    let Some(go) = toolchains().into_iter().next() else {
        unavailable("no Go toolchain");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bin = build(&go, dir.path(), "logger", "exe");
    let log = dir.path().join("access.log");
    let (bin, log) = (bin.to_str().unwrap(), log.to_str().unwrap());
    let p = run(&[], &[bin, "unbuffered", log, "1500"]);
    assert!(p.output.status.success(), "{}", p.stderr);
    let lines = printed(&p, "lines") as f64;
    let r = &p.report;
    let writes = syscall(r, "write");
    // One write a line (and the program's own few: its figures).
    assert!(
        writes.calls as f64 >= lines && (writes.calls as f64) < lines * 1.01 + 100.0,
        "{} writes for {lines} lines",
        writes.calls
    );
    let f = r
        .findings
        .iter()
        .find(|f| f.remedy.contains("bufio.Writer"))
        .unwrap_or_else(|| panic!("no finding with Go's fix: {:#?}", r.findings));
    assert_eq!(r.findings[0].id, f.id, "{:#?}", r.findings);
    assert!(
        f.title
            .starts_with("Go writes every line to its file with a system call of its own"),
        "{}",
        f.title
    );
    assert!(
        f.culprit
            .frames
            .iter()
            .any(|x| x.starts_with("main.serve (logger.go:")),
        "{:?}",
        f.culprit.frames
    );

    let p = run(&[], &[bin, "buffered", log, "1500"]);
    assert!(p.output.status.success(), "{}", p.stderr);
    let lines = printed(&p, "lines") as f64;
    let r = &p.report;
    let writes = r
        .syscalls
        .iter()
        .find(|s| s.name == "write")
        .map_or(0, |s| s.calls);
    assert!(
        (writes as f64) < lines / 100.0,
        "{writes} writes for {lines} lines"
    );
    assert!(
        !r.findings.iter().any(|f| f.remedy.contains("bufio.Writer")),
        "{:#?}",
        r.findings
    );
}
