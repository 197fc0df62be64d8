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
        let mut first_error = None;
        let mut attempt = |path: &Option<PathBuf>, write: &dyn Fn(&Path) -> anyhow::Result<()>| {
            if let Some(p) = path
                && let Err(e) = write(p)
            {
                first_error.get_or_insert(e);
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
        first_error.map_or(Ok(()), Err)
    }
}
