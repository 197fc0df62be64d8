//! Node.js frames named from V8's heap (issue 38), with no V8 option and no
//! restart, against V8's own view of the same stack: the fixture writes
//! the call sites `Error.captureStackTrace` gives through top -> middle ->
//! leaf, and where each function starts in its file; kerntax's stacks must
//! show the same functions in the same order, at the same lines where V8
//! interprets them and at their first line where it runs them compiled.
//! Debian's node (`nodejs`, installed by scripts/test.sh).

mod common;

use std::path::PathBuf;

use common::{bpf_available, profiled_with_truth};
use kerntax::report::Report;

const NODE: &str = "/usr/bin/node";

fn busy() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/node/busy.js")
        .to_string_lossy()
        .into_owned()
}

/// The JavaScript frames of a folded stack, innermost first: (function,
/// script, line).
fn js_frames(stack: &str) -> Vec<(String, String, i64)> {
    stack
        .split(';')
        .rev()
        .filter_map(|f| {
            let (name, file, line) = kerntax::render::pprof::parse_frame(f);
            f.ends_with(", js)")
                .then(|| (name.to_string(), file.to_string(), line))
        })
        .collect()
}

/// Folded stacks with their sample counts.
fn stacks(folded: &str) -> Vec<(&str, u64)> {
    folded
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(s, n)| (s, n.parse().unwrap_or(0)))
        .collect()
}

/// What every profile of busy.js shows: V8 seen, its frames read, the
/// program's frames named from its own file, and nothing left as an
/// unnamed JIT address in most of the samples.
fn v8_read(r: &Report, folded: &str, file: &str) -> u64 {
    let i = &r.sampling.interpreters;
    assert!(
        i.seen
            .iter()
            .any(|s| s.contains("V8 (") && s.contains("read from its heap")),
        "{i:?}"
    );
    assert!(i.frames > 500, "{i:?}");
    assert!(i.frames_unreadable * 100 <= i.frames, "{i:?}");
    let (mut samples, mut named, mut unnamed_jit) = (0, 0, 0);
    for (s, n) in stacks(folded) {
        samples += n;
        if js_frames(s)
            .iter()
            .any(|(f, at, _)| f == "leaf" && at == file)
        {
            named += n;
        }
        if s.split(';').any(|f| f.starts_with("[jit] ")) {
            unnamed_jit += n;
        }
    }
    // The program burns its CPU in leaf; all but start-up names it.
    assert!(named * 10 >= samples * 7, "{named} of {samples}:\n{folded}");
    assert!(unnamed_jit * 20 <= samples, "{unnamed_jit} of {samples}");
    named
}

/// `node --jitless`: every function interpreted, every line V8's.
#[test]
fn interpreted_javascript_is_named_at_the_lines_v8_gives_issue_38() {
    if !bpf_available() {
        return;
    }
    let file = busy();
    let (r, folded, truth) = profiled_with_truth(&[NODE, "--jitless", &file, "3"], false);
    v8_read(&r, &folded, &file);
    let line = |i: usize| truth["stack"][i]["line"].as_i64().unwrap();
    assert_eq!(truth["stack"][1]["name"], "middle");
    assert_eq!(truth["stack"][2]["name"], "top");
    let body = &truth["functions"]["leaf"];
    let leaf_lines = body["start"].as_i64().unwrap()..=body["end"].as_i64().unwrap();
    // The heaviest stack through leaf: leaf in its body, middle and top
    // at the lines V8 says they call from.
    let (s, _) = stacks(&folded)
        .into_iter()
        .filter(|(s, _)| js_frames(s).first().is_some_and(|f| f.0 == "leaf"))
        .max_by_key(|&(_, n)| n)
        .unwrap_or_else(|| panic!("no stack in leaf:\n{folded}"));
    let js = js_frames(s);
    assert!(js.len() >= 4, "{js:?}");
    assert_eq!(
        (js[0].0.as_str(), js[0].1.as_str()),
        ("leaf", file.as_str())
    );
    assert!(leaf_lines.contains(&js[0].2), "{js:?} {body}");
    assert_eq!(js[1], ("middle".into(), file.clone(), line(1)), "{js:?}");
    assert_eq!(js[2], ("top".into(), file.clone(), line(2)), "{js:?}");
    // Node's own loader below, by the names V8 gives its functions.
    assert!(
        js.iter()
            .any(|(f, at, _)| f == "Module._compile" && at == "node:internal/modules/cjs/loader"),
        "{js:?}"
    );
}

/// The JIT's code (Sparkplug, Maglev, TurboFan): the same functions, each
/// at its first line (compiled code keeps no bytecode offset); TurboFan
/// may inline leaf into its callers, whose frame it then is.
#[test]
fn compiled_javascript_is_named_without_perf_basic_prof_issue_38() {
    if !bpf_available() {
        return;
    }
    let file = busy();
    let (r, folded, truth) = profiled_with_truth(&[NODE, &file, "3"], false);
    compiled_frames_are_right(&r, &folded, &truth, &file);
    // No perf map was asked for: node wrote none.
    assert!(
        r.sampling
            .jit
            .iter()
            .all(|j| j.pid != r.target_pid || j.perf_map_entries == 0),
        "{:?}",
        r.sampling.jit
    );
}

/// `kerntax attach` to a node already running: the same.
#[test]
fn attached_to_a_running_node_kerntax_names_its_frames_issue_38() {
    if !bpf_available() {
        return;
    }
    let file = busy();
    let (r, folded, truth) = profiled_with_truth(&[NODE, &file, "5"], true);
    compiled_frames_are_right(&r, &folded, &truth, &file);
}

fn compiled_frames_are_right(r: &Report, folded: &str, truth: &serde_json::Value, file: &str) {
    v8_read(r, folded, file);
    let lines = |f: &str| {
        let b = &truth["functions"][f];
        b["start"].as_i64().unwrap()..=b["end"].as_i64().unwrap()
    };
    let rank = |f: &str| {
        ["leaf", "middle", "top", "truth", "(anonymous)"]
            .iter()
            .position(|x| *x == f)
    };
    let mut heaviest: Option<(u64, (String, String, i64))> = None;
    for (s, n) in stacks(folded) {
        let js: Vec<_> = js_frames(s)
            .into_iter()
            .filter(|(_, at, _)| at == file)
            .collect();
        // Innermost first, in the program's call order.
        let order: Vec<&str> = js.iter().map(|(f, _, _)| f.as_str()).collect();
        assert!(
            order.windows(2).all(|w| rank(w[0]) < rank(w[1])),
            "{order:?} in {s}"
        );
        // Each at a line of its own: its first once compiled, else (still
        // interpreted, at start-up) the line its bytecode is at.
        for (f, _, line) in &js {
            if rank(f).is_some_and(|r| r < 3) {
                assert!(lines(f).contains(line), "{f}:{line} in {s}");
            }
        }
        if let Some(first) = js.first()
            && heaviest.as_ref().is_none_or(|(m, _)| n > *m)
        {
            heaviest = Some((n, first.clone()));
        }
    }
    // The steady state: compiled code, named at its function's first line.
    let (_, (f, _, line)) = heaviest.expect("a stack in busy.js");
    assert!(rank(&f).is_some_and(|r| r < 3), "{f}");
    assert_eq!(line, *lines(&f).start(), "{f}");
}
