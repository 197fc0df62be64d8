//! Issue #6: the HTML report in a real browser (headless Chromium), the
//! pprof output read by `go tool pprof`, folded stacks, and escaping of
//! everything that comes from the target.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// Tools a test needs: installed by the test command, so missing one is a
/// failure where everything must run (CI), a skip elsewhere.
fn tool(candidates: &[&str]) -> Option<PathBuf> {
    let found = candidates.iter().find_map(|c| {
        let p = Path::new(c);
        if p.is_absolute() {
            p.exists().then(|| p.to_path_buf())
        } else {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|d| d.join(c))
                    .find(|p| p.exists())
            })
        }
    });
    if found.is_none() {
        unavailable(&format!("none of {candidates:?} is installed"));
    }
    found
}

fn chromium() -> Option<PathBuf> {
    tool(&[
        "chromium",
        "chromium-browser",
        "google-chrome",
        "/usr/bin/chromium",
    ])
}

/// Where screenshots go: kept after the test as artifacts.
fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

struct Page {
    dom: String,
    console: String,
}

/// Loads `html` in headless Chromium: the DOM after its scripts ran, what
/// it logged to the console, and a screenshot named `shot`.
fn load(browser: &Path, html: &Path, shot: &str) -> Page {
    load_at(browser, html, "", shot)
}

/// `load` with a fragment (`#t=SECONDS` shows the timeline at a moment).
fn load_at(browser: &Path, html: &Path, fragment: &str, shot: &str) -> Page {
    let url = format!("file://{}{fragment}", html.display());
    let profile = tempfile::tempdir().unwrap();
    let base = |c: &mut Command| {
        c.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()));
    };
    let mut dump = Command::new(browser);
    base(&mut dump);
    let out = dump
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = artifacts().join(shot);
    let mut snap = Command::new(browser);
    base(&mut snap);
    let status = snap
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1280,2400")
        .arg(&url)
        .output()
        .unwrap();
    assert!(status.status.success());
    assert!(
        std::fs::metadata(&png).unwrap().len() > 10_000,
        "{}",
        png.display()
    );
    Page {
        dom: String::from_utf8_lossy(&out.stdout).into_owned(),
        console: String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// The attributes of the page's `<html>` element, where its script marks
/// readiness and errors.
fn root_tag(dom: &str) -> &str {
    dom.split("<html")
        .nth(1)
        .and_then(|s| s.split('>').next())
        .unwrap_or("")
}

fn go() -> Option<PathBuf> {
    tool(&["go", "/usr/local/go/bin/go", "/usr/lib/go/bin/go"])
}

/// `go tool pprof ARGS -top FILE`: its whole output and its first row (the
/// top entry under the column header).
fn pprof_top(go: &Path, args: &[&str], profile: &Path, scratch: &Path) -> (String, String) {
    let top = Command::new(go)
        .args(["tool", "pprof"])
        .args(args)
        .arg("-top")
        .arg(profile)
        .env("HOME", scratch)
        .env("GOCACHE", scratch.join("gocache"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&top.stdout).into_owned();
    assert!(
        top.status.success(),
        "{}\n{}",
        text,
        String::from_utf8_lossy(&top.stderr)
    );
    let first = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"))
        .to_string();
    (text, first)
}

fn assert_renders_cleanly(page: &Page) {
    let root = root_tag(&page.dom);
    assert!(
        root.contains("data-ready=\"1\""),
        "the page's script ran: <html{root}>"
    );
    assert!(!root.contains("data-errors"), "script errors: <html{root}>");
    assert!(page.console.is_empty(), "console: {}", page.console);
}

#[test]
fn a_real_report_renders_with_charts_flame_graphs_and_tables() {
    if !bpf_available() {
        return;
    }
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let json = dir.path().join("report.json");
    let pprof = dir.path().join("locks.pb.gz");
    let out = kerntax()
        .args(["run", "--html"])
        .arg(&html)
        .arg("--json")
        .arg(&json)
        .arg("--pprof")
        .arg(&pprof)
        .arg("--")
        .arg(fixture("locks"))
        .args(["hot", "4", "300", "100"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = load(&browser, &html, "report.png");
    assert_renders_cleanly(&page);
    let dom = &page.dom;
    for id in [
        "figures",
        "findings",
        "chart-cpu",
        "chart-switches",
        "chart-syscalls",
        "chart-lockwait",
    ] {
        assert!(dom.contains(&format!("id=\"{id}\"")), "{id} missing");
    }
    assert!(dom.matches("<polyline").count() >= 6, "timeline series");
    timeline_says_what_it_shows(&browser, &html, &json);
    // Flame graphs drawn by inferno, one frame each.
    for id in [
        "flame-cpu",
        "flame-offcpu",
        "flame-lock-waiters",
        "flame-lock-wakers",
        "flame-syscalls",
    ] {
        assert!(
            dom.contains(&format!("<iframe class=\"flamegraph\" id=\"{id}\"")),
            "{id} missing"
        );
    }
    assert!(
        dom.contains("srcdoc=\"&lt;!DOCTYPE html&gt;"),
        "flame graph documents"
    );
    // Sortable tables with the lock the fixture contends on.
    assert!(dom.contains("<table class=\"sortable\" id=\"table-locks\""));
    assert!(
        dom.contains("mutex g_hot_lock"),
        "the hot lock in the table"
    );

    // The lock's waits in pprof's contention profile, under the lock's name.
    let Some(go) = go() else {
        return;
    };
    let (text, first) = pprof_top(&go, &["-sample_index=delay"], &pprof, dir.path());
    assert!(first.contains("[lock mutex g_hot_lock]"), "{text}");
}

/// The text of the readout of panel `id` (filled by the page's script).
fn readout<'a>(dom: &'a str, id: &str) -> &'a str {
    let tag = format!("<output class=\"readout\" for=\"{id}\">");
    let at = dom
        .find(&tag)
        .unwrap_or_else(|| panic!("no readout for {id}"));
    let rest = &dom[at + tag.len()..];
    &rest[..rest.find("</output>").unwrap()]
}

/// Issue 13: each timeline panel has a legend with units and a readout
/// of the values under the pointer, shown at the moment the lock was most
/// waited for (`#t=`), with the report's own figures for that moment.
fn timeline_says_what_it_shows(browser: &Path, html: &Path, json: &Path) {
    let r = read_report(json);
    let b = &r.timeline.buckets;
    // The fixture's four threads queue on one lock: the timeline shows it.
    let top = b.iter().max_by_key(|x| x.lock_wait_ns).unwrap();
    assert!(top.lock_wait_ns > 0, "{:?}", r.timeline);
    let contended: u64 = r
        .waits
        .iter()
        .filter(|w| w.class == kerntax::report::WaitClass::Contention)
        .map(|w| w.wait_ns)
        .sum();
    let drawn: u64 = b.iter().map(|x| x.lock_wait_ns).sum();
    assert!(
        drawn.abs_diff(contended) <= contended / 100 + 1_000_000,
        "the timeline's lock wait {drawn} is the contended sites' {contended}"
    );
    let at_s = top.t_ns as f64 / 1e9;
    let page = load_at(
        browser,
        html,
        &format!("#t={at_s:.3}"),
        "report-readout.png",
    );
    assert_renders_cleanly(&page);
    let dom = &page.dom;
    for key in [
        "user CPU (CPUs busy)",
        "system CPU (CPUs busy)",
        "voluntary (/s)",
        "involuntary (/s)",
        "syscalls (/s)",
        "waiting for a lock (threads waiting)",
    ] {
        assert!(
            dom.contains(&format!("</i>{key}</span>")),
            "legend key {key} missing"
        );
    }
    assert_eq!(dom.matches("<span class=\"key\">").count(), 6);
    let moment = format!("at {at_s:.2} s: ");
    let cpu = readout(dom, "chart-cpu");
    assert!(
        cpu.starts_with(&moment)
            && cpu.contains("user CPU ")
            && cpu.contains(" CPUs busy, system CPU "),
        "{cpu}"
    );
    let lock = readout(dom, "chart-lockwait");
    let shown: f64 = lock
        .strip_prefix(&moment)
        .and_then(|s| s.strip_prefix("waiting for a lock "))
        .and_then(|s| s.strip_suffix(" threads waiting"))
        .unwrap_or_else(|| panic!("{lock}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{lock}: {e}"));
    let threads = top.lock_wait_ns as f64 / top.duration_ns as f64;
    assert!((shown - threads).abs() <= 0.01, "{lock} vs {threads}");
    for id in ["chart-switches", "chart-syscalls"] {
        assert!(readout(dom, id).starts_with(&moment), "{id}");
    }
    assert_eq!(
        dom.matches("visibility=\"visible\"").count(),
        4,
        "a cursor per panel"
    );
}

#[test]
fn a_saved_report_renders_again_as_html() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("golden.html");
    let out = kerntax()
        .arg("report")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/golden/report.json"
        ))
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout.is_empty(),
        "files only, no text, when files are asked for"
    );
    let page = load(&browser, &html, "golden.png");
    assert_renders_cleanly(&page);
    assert!(page.dom.contains("id=\"table-syscalls\""));
}

const PAYLOADS: &[&str] = &[
    "<script>document.documentElement.setAttribute('data-pwned','script')</script>",
    "<img src=x onerror=\"parent.document.documentElement.setAttribute('data-pwned','img')\">",
    "\"><svg onload=\"document.documentElement.setAttribute('data-pwned','attr')\">",
    "</iframe><script>document.documentElement.setAttribute('data-pwned','srcdoc')</script>",
];

/// Every string field of a report replaced by a payload, every string in
/// every array too: names, frames, argv, comms, paths, remedies.
fn poison(v: &mut serde_json::Value, n: &mut usize) {
    match v {
        serde_json::Value::String(s) if !s.is_empty() => {
            *s = format!("{}{s}", PAYLOADS[*n % PAYLOADS.len()]);
            *n += 1;
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| poison(x, n)),
        serde_json::Value::Object(m) => m.iter_mut().for_each(|(_, x)| poison(x, n)),
        _ => {}
    }
}

#[test]
fn hostile_strings_from_the_target_cannot_inject_markup() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/golden/report.json"
        ))
        .unwrap(),
    )
    .unwrap();
    // Give it stacks for every flame graph, then poison every string.
    report["cpu_samples"]["frequency_hz"] = 99.into();
    report["cpu_samples"]["folded"] =
        serde_json::json!([{ "frames": ["main (a.c:1)", "hot (a.c:2)"], "count": 7 }]);
    report["findings"] = serde_json::json!([{
        "id": "lock.exclusive-hot", "title": "t", "severity": 0.5,
        "evidence": [{ "metric": "m", "value": 1.0, "threshold": 0.5, "bound": "min" }],
        "culprit": { "kind": "lock", "name": "g", "frames": ["f (a.c:1)"] },
        "remedy": "r", "expected_gain": { "time_ns": 5, "share": 0.1, "basis": "b" }
    }]);
    let mut n = 0;
    for key in [
        "command",
        "threads",
        "processes",
        "syscalls",
        "locks",
        "cpu_samples",
        "findings",
    ] {
        poison(&mut report[key], &mut n);
    }
    // Enum fields must stay valid for the report to be read.
    for l in report["locks"].as_array_mut().unwrap() {
        l["kind"] = "mutex".into();
    }
    report["findings"][0]["culprit"]["kind"] = "lock".into();
    report["findings"][0]["evidence"][0]["bound"] = "min".into();
    assert!(n > 20, "{n} strings poisoned");
    let json = write_file(dir.path(), "hostile.json", &report.to_string());
    let html = dir.path().join("hostile.html");
    let out = kerntax()
        .arg("report")
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = load(&browser, &html, "hostile.png");
    assert_renders_cleanly(&page);
    let root = root_tag(&page.dom);
    assert!(!root.contains("data-pwned"), "injected: <html{root}>");
    assert!(!page.dom.contains("<img src=\"x\""), "an injected element");
    assert!(
        page.dom.contains("&lt;script&gt;document.documentElement"),
        "payload shown as text"
    );
}

fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn pprof_output_puts_the_hot_function_first_in_go_tool_pprof() {
    if !bpf_available() {
        return;
    }
    let Some(go) = go() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pprof = dir.path().join("cpu.pb.gz");
    let folded = dir.path().join("cpu.folded");
    let out = kerntax()
        .args(["run", "--pprof"])
        .arg(&pprof)
        .arg("--folded")
        .arg(&folded)
        .arg("--")
        .arg(fixture("waits"))
        .args(["cpu", "600"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The first row after the column header is the hottest function.
    let (text, first) = pprof_top(&go, &[], &pprof, dir.path());
    assert!(first.trim_end().ends_with("burn_cpu"), "{text}");
    assert!(text.contains("Type: cpu"), "{text}");
    // The folded file has the same samples, outermost frame first.
    let lines = std::fs::read_to_string(&folded).unwrap();
    let hot = lines.lines().next().unwrap();
    assert!(
        hot.starts_with("_start") && hot.contains(";burn_cpu (waits.c:"),
        "{hot}"
    );
}

#[test]
fn files_are_written_whole_and_one_bad_path_spares_the_others() {
    if !bpf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ok.json");
    let folded = dir.path().join("ok.folded");
    let out = kerntax()
        .args(["run", "--html", "/nonexistent-dir/x.html", "--json"])
        .arg(&json)
        .arg("--folded")
        .arg(&folded)
        .arg("--")
        .arg(fixture("calls"))
        .args(["getppid", "10"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("kerntax: cannot write /nonexistent-dir/x.html"),
        "{stderr}"
    );
    assert!(json.exists() && folded.exists());
    // No temporary file left next to them.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}
