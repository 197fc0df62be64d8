//! Issue #5: `kerntax diff` on reports given to it, good, old, newer,
//! corrupt or missing: a comparison or one clear line and exit status 2.

mod common;

use common::*;

fn golden() -> serde_json::Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/report.json"
    ))
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn write(dir: &std::path::Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn diff(args: &[&std::path::Path]) -> (i32, String, String) {
    let out = kerntax().arg("diff").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn two_reports_compare_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let before = golden();
    let mut after = before.clone();
    after["duration_ns"] = 500_000_000u64.into();
    // A version 1 report, as an older kerntax wrote it, is read too.
    after["schema_version"] = 1.into();
    after.as_object_mut().unwrap().remove("findings");
    let b = write(dir.path(), "b.json", before.to_string().as_bytes());
    let a = write(dir.path(), "a.json", after.to_string().as_bytes());
    let json = dir.path().join("diff.json");
    let out = kerntax()
        .arg("diff")
        .args([&b, &a])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wall = stdout.lines().find(|l| l.starts_with("wall time")).unwrap();
    assert!(
        wall.contains("2.000 s") && wall.contains("500.0 ms") && wall.ends_with("-75%"),
        "{wall}"
    );
    assert!(
        stdout.contains("FINDINGS\n  none on either side"),
        "{stdout}"
    );
    let d: kerntax::diff::Diff =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!((d.before.schema_version, d.after.schema_version), (2, 1));
    assert_eq!(d.metrics[0].change, Some(-0.75));
}

#[test]
fn a_saved_report_prints_again_as_text() {
    let out = kerntax()
        .arg("report")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/golden/report.json"
        ))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let golden = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/report.txt"
    ))
    .unwrap();
    assert_eq!(text.lines().count(), golden.lines().count(), "{text}");
    assert!(
        text.contains("FINDINGS: none") && text.contains("SYSCALL"),
        "{text}"
    );
}

#[test]
fn bad_reports_get_one_line_and_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.json", golden().to_string().as_bytes());
    let mut newer = golden();
    newer["schema_version"] = 3.into();
    let mut wrong = golden();
    wrong["summary"]["user_ns"] = "lots".into();
    let cases: Vec<(std::path::PathBuf, &str)> = vec![
        (dir.path().join("missing.json"), "No such file"),
        (
            write(
                dir.path(),
                "cut.json",
                &golden().to_string().as_bytes()[..200],
            ),
            "not valid JSON",
        ),
        (
            write(dir.path(), "bin.json", &[0xff, 0x00, 0x13]),
            "not valid JSON",
        ),
        (
            write(dir.path(), "other.json", b"{\"hello\": 1}"),
            "no schema_version",
        ),
        (
            write(dir.path(), "newer.json", newer.to_string().as_bytes()),
            "newer kerntax",
        ),
        (
            write(dir.path(), "wrong.json", wrong.to_string().as_bytes()),
            "not a valid kerntax report",
        ),
        (dir.path().to_path_buf(), "directory"),
    ];
    for (path, why) in cases {
        let (code, stdout, stderr) = diff(&[&good, &path]);
        assert_eq!(code, 2, "{}: {stderr}", path.display());
        assert!(stdout.is_empty(), "{stdout}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("kerntax: ") && stderr.contains(why),
            "{}: {stderr}",
            path.display()
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
