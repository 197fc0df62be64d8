//! The JSON report, written atomically so a reader never sees half a file.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{Context, Result};

use crate::report::Report;

pub fn render(report: &Report) -> String {
    serde_json::to_string_pretty(report).expect("a report always serializes")
}

/// Writes `bytes` to `path` through a temporary file in the same directory
/// and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // 0666 before the umask, like any file a program creates.
    let mut tmp = tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .with_context(|| {
            format!(
                "cannot write {}: creating a file in {}",
                path.display(),
                dir.display()
            )
        })?;
    // Through the file itself: the temporary file's error would name it,
    // and it is gone once the error is shown (issue 24).
    tmp.as_file_mut()
        .write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

pub fn write(report: &Report, path: &Path) -> Result<()> {
    let mut text = render(report);
    text.push('\n');
    write_atomic(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::build::{build, tests::sample_inputs};

    #[test]
    fn golden_report() {
        let mut report = build(sample_inputs());
        report.kerntax_version = "VERSION".into();
        crate::render::assert_golden("report.json", &(render(&report) + "\n"));
    }

    /// The fields issue #2 names as the contract.
    #[test]
    fn contract_fields_are_present_and_the_report_reads_back() {
        let report = build(sample_inputs());
        let v: serde_json::Value = serde_json::from_str(&render(&report)).unwrap();
        for key in [
            "schema_version",
            "command",
            "exit_status",
            "duration_ns",
            "processes",
            "threads",
            "syscalls",
            "loss",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        for key in ["pid", "comm", "thread_count"] {
            assert!(v["processes"][0].get(key).is_some(), "processes[].{key}");
        }
        for key in [
            "tid",
            "pid",
            "comm",
            "user_ns",
            "sys_ns",
            "voluntary_switches",
            "involuntary_switches",
        ] {
            assert!(v["threads"][0].get(key).is_some(), "threads[].{key}");
        }
        for key in [
            "name",
            "nr",
            "calls",
            "errors",
            "errnos",
            "total_ns",
            "max_ns",
            "hist_log2_ns",
            "callsites",
        ] {
            assert!(v["syscalls"][0].get(key).is_some(), "syscalls[].{key}");
        }
        for key in ["frames", "calls", "calls_estimated"] {
            assert!(
                v["syscalls"][1]["callsites"][0].get(key).is_some(),
                "callsites[].{key}"
            );
        }
        let back: Report = serde_json::from_value(v).unwrap();
        assert_eq!(back, report);
    }

    #[test]
    fn atomic_write_replaces_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        std::fs::write(&p, "old").unwrap();
        write_atomic(&p, b"{\"new\": true}").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"new\": true}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left behind"
        );
        // SAFETY: umask only reads and restores the process's mask.
        let umask = unsafe {
            let m = libc::umask(0);
            libc::umask(m);
            m
        };
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666 & !umask as u32);
        let err = write_atomic(Path::new("/nonexistent-dir/r.json"), b"x").unwrap_err();
        assert!(format!("{err:#}").contains("/nonexistent-dir"));
    }
}
