//! The fuzz harnesses (src/fuzz.rs) over their committed seeds
//! (fuzz/corpus/NAME) and every input that once failed (fuzz/regressions/
//! NAME, each named after what it found): what fuzzing found stays fixed.
//! The coverage-guided runs themselves are fuzz/run.sh's; scripts/test.sh
//! runs each for a few seconds.

use std::path::Path;

fn inputs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn every_harness_passes_its_seeds_and_past_failures() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    for h in kerntax::fuzz::HARNESSES {
        let seeds = inputs(&root.join("corpus").join(h.name));
        assert!(!seeds.is_empty(), "{}: no seeds in fuzz/corpus", h.name);
        let past = inputs(&root.join("regressions").join(h.name));
        for path in seeds.iter().chain(&past) {
            let data = std::fs::read(path).unwrap();
            eprintln!("{}: {}", h.name, path.display());
            (h.run)(&data);
        }
    }
}

#[test]
fn every_harness_has_a_seed_directory_and_the_script_knows_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let script = std::fs::read_to_string(root.join("run.sh")).unwrap();
    for h in kerntax::fuzz::HARNESSES {
        assert!(root.join("corpus").join(h.name).is_dir(), "{}", h.name);
        assert!(script.contains(h.name), "run.sh does not run {}", h.name);
        assert!(kerntax::fuzz::harness(h.name).is_some());
    }
    assert!(kerntax::fuzz::harness("no such harness").is_none());
}
