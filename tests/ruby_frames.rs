//! CRuby frames named from outside the process (issue 20): a live Ruby 3.1
//! reports its execution context, its thread pointer and its own frames
//! (`caller_locations`), and kerntax's reader walks the same frames from
//! its memory and names them: labels, files and lines, through a C method
//! that calls back into Ruby. The thread-local execution context is also
//! found the way the BPF walk will: the thread's DTV, the module id and
//! offset from libruby's GOT. Debian's interpreter by full path.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use kerntax::interp::memory::{Memory, ProcessMemory};
use kerntax::interp::ruby::{discover, iseq::Iseq, layout, stack};

use common::process::Reaped;
use common::{bpf_available, interpreted_frames, profiled_with_truth};

const RUBY: &str = "/usr/bin/ruby3.1";

fn rb_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ruby")
        .join(name)
}

/// glibc x86-64: the thread pointer's second word is the DTV; a module's
/// entry is 16 bytes, its block's address first.
const TCB_DTV: u64 = 8;
const DTV_ENTRY: u64 = 16;

#[test]
fn a_live_rubys_frames_are_named_as_its_own_backtrace_names_them() {
    assert!(
        std::path::Path::new(RUBY).exists(),
        "{RUBY} is needed (scripts/test.sh installs ruby3.1)"
    );
    let mut child = Reaped(
        Command::new(RUBY)
            .arg(rb_fixture("frames.rb"))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let report: serde_json::Value = serde_json::from_str(&line).unwrap();
    let ec = report["ec"].as_u64().unwrap();
    let tp = report["tp"].as_u64().unwrap();
    let cfuncs: Vec<&str> = report["cfuncs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let truth: Vec<(String, String, i32)> = report["truth"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t[0].as_str().unwrap().to_string(),
                t[1].as_str().unwrap().to_string(),
                t[2].as_i64().unwrap() as i32,
            )
        })
        .filter(|t| !cfuncs.contains(&t.0.as_str()))
        .collect();
    // The child's own account has the chain it was written with.
    let labels: Vec<&str> = truth.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(
        labels,
        [
            "leaf",
            "block in middle",
            "middle",
            "block in outer",
            "outer",
            "<main>"
        ]
    );

    let mem = ProcessMemory { pid };
    let maps = kerntax::stacks::maps::read(pid).unwrap();
    let rt = discover::find(&maps, &mem).unwrap().expect("libruby found");
    assert_eq!((rt.version.0, rt.version.1), (3, 1), "{rt:?}");
    let l = layout::for_version(rt.version.0, rt.version.1).unwrap();
    // The execution context through the DTV, as BPF will find it.
    let tls = rt.ec.expect("ruby_current_ec's GOT slots");
    let dtv = mem.read_u64(tp + TCB_DTV).unwrap();
    let block = mem.read_u64(dtv + tls.module * DTV_ENTRY).unwrap();
    assert_eq!(mem.read_u64(block + tls.offset).unwrap(), ec, "{tls:?}");

    let frames = stack::walk(&mem, &l, ec, stack::MAX_FRAMES).unwrap();
    let named: Vec<(String, String, i32)> = frames
        .iter()
        .filter(|f| f.is_ruby())
        .map(|f| {
            let i = Iseq::read(&mem, &l, f.iseq).unwrap();
            let line = i.line(&mem, f.pc).unwrap();
            (i.label, i.path, line)
        })
        .collect();
    assert_eq!(named, truth);
    // `middle`'s call is in the line table's second 512-bit block.
    let middle = frames
        .iter()
        .filter(|f| f.is_ruby())
        .nth(2)
        .map(|f| {
            Iseq::read(&mem, &l, f.iseq)
                .unwrap()
                .position(f.pc)
                .unwrap()
        })
        .unwrap();
    assert!(
        middle > kerntax::interp::ruby::succ::IMMEDIATE + 512,
        "{middle}"
    );
    // The outermost frame of each rb_vm_exec activation says so: the
    // blocks a C method called back, and the main script.
    let finish: Vec<bool> = frames
        .iter()
        .filter(|f| f.is_ruby())
        .map(|f| f.finishes_run())
        .collect();
    assert_eq!(
        finish,
        [false, true, false, true, false, true],
        "{frames:x?}"
    );
}

/// Root, BPF: `kerntax run` on a CPU-bound Ruby program puts its methods
/// and lines into its stacks, in place of the VM's `rb_vm_exec`.
#[test]
fn a_profiled_ruby_program_shows_its_own_methods_and_lines() {
    if !bpf_available() {
        return;
    }
    let busy = rb_fixture("busy.rb");
    let (report, folded, truth) = profiled_with_truth(&[RUBY, busy.to_str().unwrap(), "3"], false);
    ruby_stacks_are_right(&report, &folded, &truth, 200);
}

/// `kerntax attach` on a Ruby program already running: the same frames.
#[test]
fn attached_to_a_running_ruby_program_kerntax_reads_its_frames() {
    if !bpf_available() {
        return;
    }
    let busy = rb_fixture("busy.rb");
    let (report, folded, truth) = profiled_with_truth(&[RUBY, busy.to_str().unwrap(), "5"], true);
    ruby_stacks_are_right(&report, &folded, &truth, 150);
}

/// What a profile of busy.rb must show: CRuby seen, its chains read, and
/// the program's methods and lines in its stacks.
fn ruby_stacks_are_right(
    report: &kerntax::report::Report,
    folded: &str,
    truth: &serde_json::Value,
    min_samples: u64,
) {
    let rb = &report.sampling.interpreters;
    assert!(rb.seen.iter().any(|s| s.contains("CRuby 3.1")), "{rb:?}");
    assert!(
        rb.samples >= min_samples && rb.frames >= 2 * rb.samples,
        "{rb:?}"
    );
    assert!(rb.samples_fault * 50 <= rb.samples, "{rb:?}");
    assert!(rb.merge_mismatches * 50 <= rb.samples, "{rb:?}");
    assert!(rb.frames_unreadable * 20 <= rb.frames, "{rb:?}");

    let span = |m: &str| {
        (
            truth[m]["first"].as_i64().unwrap(),
            truth[m]["last"].as_i64().unwrap(),
        )
    };
    let (mut in_vm, mut with_ruby, mut reentered, mut chain) = (0u64, 0u64, 0u64, 0u64);
    let mut leftover = 0u64;
    for l in folded.lines() {
        let (stack, n) = l.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        let (frames, native_between) = interpreted_frames(stack, " (busy.rb:");
        if !frames.is_empty() || stack.contains("rb_vm_exec") {
            in_vm += n;
        }
        if frames.is_empty() {
            continue;
        }
        with_ruby += n;
        // No rb_vm_exec left among the program's own frames.
        let inner = stack.split_once(" (busy.rb:").unwrap().1;
        if inner.contains("rb_vm_exec") {
            leftover += n;
        }
        for (name, line) in &frames {
            let key = match name.as_str() {
                "block in run" => "run",
                n if ["leaf", "middle", "keyfn", "run"].contains(&n) => n,
                _ => continue,
            };
            let (first, last) = span(key);
            assert!((first..=last).contains(line), "{name}:{line} in {stack}");
        }
        let names: Vec<&str> = frames.iter().map(|(n, _)| n.as_str()).collect();
        if names.ends_with(&["run", "middle", "leaf"]) {
            chain += n;
        }
        if names.ends_with(&["block in run", "keyfn", "leaf"]) && native_between {
            reentered += n;
        }
    }
    // Nearly every sample in the VM carries Ruby frames.
    assert!(with_ruby * 10 >= in_vm * 9, "{with_ruby} of {in_vm}");
    assert!(leftover * 50 <= with_ruby, "{leftover} of {with_ruby}");
    // The dominant chain, and the C method's callback through sort_by.
    assert!(chain * 2 >= with_ruby, "{chain} of {with_ruby}:\n{folded}");
    assert!(reentered > 0, "{folded}");
}

/// Root, BPF: a syscall storm from Ruby code is named by the
/// Ruby line that makes the call, not by the interpreter's unnamed C
/// it passes through (issue 20).
#[test]
fn a_storm_from_ruby_code_is_named_by_the_line_that_calls() {
    if !bpf_available() {
        return;
    }
    common::storm_named_by_its_line(RUBY, &rb_fixture("storm.rb"));
}

/// Root, BPF: `--no-interpreter-frames` (and its older name
/// `--no-python-frames`) leaves CRuby's and CPython's frames unread, says
/// so once per process, and profiles them natively.
#[test]
fn interpreter_frames_can_be_left_unread() {
    if !bpf_available() {
        return;
    }
    let truth = tempfile::NamedTempFile::new().unwrap();
    let t = truth.path().to_str().unwrap();
    let busy_rb = rb_fixture("busy.rb");
    let busy_py = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/python/busy.py");
    for (flag, argv) in [
        ("--no-interpreter-frames", [RUBY, busy_rb.to_str().unwrap()]),
        (
            "--no-python-frames",
            ["/usr/bin/python3.11", busy_py.to_str().unwrap()],
        ),
    ] {
        let p = common::run(&[flag], &[argv[0], argv[1], "1", t]);
        assert!(p.output.status.success(), "{}", p.stderr);
        let i = &p.report.sampling.interpreters;
        assert_eq!(i.seen.len(), 1, "{flag}: {i:?}");
        assert!(
            i.seen[0].ends_with("frames not read (--no-interpreter-frames)"),
            "{flag}: {i:?}"
        );
        assert_eq!((i.samples, i.frames), (0, 0), "{flag}: {i:?}");
        assert!(p.report.sampling.stack_samples > 0, "{flag}");
    }
}
