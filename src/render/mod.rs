//! Renderers: each reads a `Report` and nothing else.

pub mod diff_text;
pub(crate) mod findings_text;
pub mod folded;
pub mod html;
pub mod json;
mod locks_text;
pub mod perfetto;
pub mod pprof;
pub(crate) mod sched_text;
pub mod text;
mod waits_text;

/// Compares `actual` with the golden file `tests/golden/NAME`; with
/// KERNTAX_UPDATE_GOLDEN=1 rewrites it instead.
#[cfg(test)]
pub(crate) fn assert_golden(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("KERNTAX_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with KERNTAX_UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} differs from the output:\n{actual}",
        path.display()
    );
}

/// The report files a user asked for.
#[derive(Clone, Debug, Default)]
pub struct Outputs {
    pub json: Option<std::path::PathBuf>,
    pub html: Option<std::path::PathBuf>,
    pub pprof: Option<std::path::PathBuf>,
    pub folded: Option<std::path::PathBuf>,
}

impl Outputs {
    pub fn is_empty(&self) -> bool {
        self.json.is_none() && self.html.is_none() && self.pprof.is_none() && self.folded.is_none()
    }

    /// Writes each file atomically (temporary file, then rename). One that
    /// cannot be written does not stop the others; the first error is
    /// returned once all were tried.
    pub fn write(&self, r: &crate::report::Report) -> anyhow::Result<()> {
        use std::path::{Path, PathBuf};
        let mut errors = Vec::new();
        let mut attempt = |path: &Option<PathBuf>, write: &dyn Fn(&Path) -> anyhow::Result<()>| {
            if let Some(p) = path
                && let Err(e) = write(p)
            {
                errors.push(e);
            }
        };
        attempt(&self.json, &|p| json::write(r, p));
        attempt(&self.html, &|p| {
            json::write_atomic(p, html::render(r).as_bytes())
        });
        attempt(&self.pprof, &|p| json::write_atomic(p, &pprof::render(r)));
        attempt(&self.folded, &|p| {
            json::write_atomic(p, folded::render(r).as_bytes())
        });
        // Every file that could not be written is named, in one line (the
        // first alone hid the others: a user fixed one path and ran again).
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => {
                let each: Vec<String> = errors.iter().map(|e| format!("{e:#}")).collect();
                Err(anyhow::anyhow!("{}", each.join("; and ")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Outputs;
    use crate::analyze::build::{build, tests::sample_inputs};

    /// Issue 24 review: with --json and --html both unwritable, only the
    /// first failure was said.
    #[test]
    fn every_output_that_cannot_be_written_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-dir");
        let out = Outputs {
            json: Some(missing.join("r.json")),
            html: Some(missing.join("r.html")),
            pprof: Some(dir.path().join("r.pb.gz")),
            ..Outputs::default()
        };
        let message = format!("{:#}", out.write(&build(sample_inputs())).unwrap_err());
        assert!(message.contains("r.json"), "{message}");
        assert!(message.contains("r.html"), "{message}");
        assert!(!message.contains('\n'), "{message}");
        // What could be written was.
        assert!(dir.path().join("r.pb.gz").is_file());
        // One failure alone is said as it was.
        let one = Outputs {
            json: Some(missing.join("r.json")),
            ..Outputs::default()
        };
        let message = format!("{:#}", one.write(&build(sample_inputs())).unwrap_err());
        assert!(
            message.contains("r.json") && !message.contains("; and "),
            "{message}"
        );
    }
}
