//! The fuzz harnesses (src/fuzz.rs) over their committed seeds
//! (fuzz/corpus/NAME) and every input that once failed (fuzz/regressions/
//! NAME, each named after what it found): what fuzzing found stays fixed.
//! And a short fuzz run of every harness on stable Rust without an
//! instrumented build: seeded mutations of the seeds (bytes flipped,
//! inserted, deleted, seeds spliced), the same inputs every run. The
//! coverage-guided runs are fuzz/run.sh's (libFuzzer; its build alone would
//! add ten minutes to the suite).

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

/// xorshift64*: the same mutations on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Bytes that matter to the parsers: separators, hex digits, markup, JSON.
const INTERESTING: &[u8] = b" \n\t:-0fx<>&\"'{}[],\0\xff\x1b";

/// One mutation of `seed`, another seed at hand for splicing.
fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(6) {
            0 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] ^= 1 << rng.below(8);
            }
            1 => v.insert(at, INTERESTING[rng.below(INTERESTING.len())]),
            2 if !v.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(v.len());
                v.drain(at.min(end)..end);
            }
            3 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] = rng.next() as u8;
            }
            4 if !other.is_empty() => {
                let from = rng.below(other.len());
                let len = (1 + rng.below(64)).min(other.len() - from);
                v.splice(at..at, other[from..from + len].iter().copied());
            }
            _ => {
                let width = [1usize, 2, 4, 8][rng.below(4)];
                let extreme = [0u64, u64::MAX, 1 << 63, 0x7fff_ffff][rng.below(4)].to_le_bytes();
                let i = at.min(v.len().saturating_sub(width));
                for (j, b) in extreme.iter().take(width).enumerate() {
                    if let Some(x) = v.get_mut(i + j) {
                        *x = *b;
                    }
                }
            }
        }
    }
    v
}

/// Mutations per harness: about a second each here (2 CPUs, 2026); a page
/// or an ELF file's names take a thousand times a /proc line's time.
fn budget(name: &str) -> usize {
    match name {
        "html" => 2_000,
        "elf" => 10_000,
        "report_json" => 15_000,
        "recording" => 1_500,
        "jvm_reply" => 500_000,
        "proc_status" => 200_000,
        _ => 100_000,
    }
}

#[test]
fn every_harness_survives_seeded_mutations_of_its_seeds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    for h in kerntax::fuzz::HARNESSES {
        let seeds: Vec<Vec<u8>> = inputs(&root.join("corpus").join(h.name))
            .iter()
            .map(|p| std::fs::read(p).unwrap())
            .collect();
        let mut rng = Rng(0x6b65_726e_7461_7824 ^ h.name.len() as u64);
        let t0 = std::time::Instant::now();
        for i in 0..budget(h.name) {
            let seed = &seeds[i % seeds.len()];
            let other = &seeds[rng.below(seeds.len())];
            let input = mutate(&mut rng, seed, other);
            let result = std::panic::catch_unwind(|| (h.run)(&input));
            if result.is_err() {
                let kept = std::env::temp_dir().join(format!("kerntax-fuzz-{}-{i}", h.name));
                std::fs::write(&kept, &input).unwrap();
                panic!(
                    "{}: mutation {i} failed; the input is {} (add it to fuzz/regressions/{} \
                     with the fix)",
                    h.name,
                    kept.display(),
                    h.name
                );
            }
        }
        eprintln!(
            "{}: {} mutations in {:?}",
            h.name,
            budget(h.name),
            t0.elapsed()
        );
    }
}
