//! Renderers: each reads a `Report` and nothing else.

pub mod diff_text;
pub(crate) mod findings_text;
pub mod json;
mod locks_text;
mod sched_text;
pub mod text;

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
