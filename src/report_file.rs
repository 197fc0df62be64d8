//! Reading a report back (for `kerntax report` and `diff`), or a recording
//! analysed into one (`recording::file`): the file may be old, from a
//! newer kerntax, truncated, or hostile. Each case gets one clear message
//! and exit status 2, never a panic; a version 1 report is upgraded by
//! working its findings out again.

use std::path::Path;

use crate::error::Exit;
use crate::model::LockKey;
use crate::recording::Recording;
use crate::report::{OLDEST_SCHEMA_VERSION, Report, SCHEMA_VERSION};

/// Reports larger than this are refused rather than read into memory.
pub const MAX_REPORT_BYTES: u64 = 512 << 20;

pub fn read(path: &Path) -> Result<Report, Exit> {
    read_any(path).map(|l| l.report)
}

/// A report file, or a recording and the report it gives.
pub struct Loaded {
    pub report: Report,
    /// The recording, if the file was one (`kerntax record`).
    pub recording: Option<Recording>,
    /// Each lock key's name in the report, for `--perfetto` (a recording's).
    pub lock_names: Vec<(LockKey, String)>,
}

/// The report in a JSON report or in a recording, analysed with the
/// current rules.
pub fn read_any(path: &Path) -> Result<Loaded, Exit> {
    let shown = path.display();
    let fail = |why: String| Exit::new(2, format!("{shown}: {why}"));
    let meta = std::fs::metadata(path).map_err(|e| fail(e.to_string()))?;
    if meta.len() > MAX_REPORT_BYTES {
        return Err(fail(format!(
            "{} bytes is larger than any report ({} MiB at most)",
            meta.len(),
            MAX_REPORT_BYTES >> 20
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    if crate::recording::file::is_recording(&bytes) {
        let rec = crate::recording::file::decode(&bytes).map_err(fail)?;
        let analysed = crate::analyze::recorded::report(&rec);
        return Ok(Loaded {
            report: analysed.report,
            recording: Some(rec),
            lock_names: analysed.lock_names,
        });
    }
    parse(&bytes).map_err(fail).map(|report| Loaded {
        report,
        recording: None,
        lock_names: Vec::new(),
    })
}

/// The report in `bytes`, or why it is not one.
pub fn parse(bytes: &[u8]) -> Result<Report, String> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON ({e})"))?;
    let version = value
        .get("schema_version")
        .ok_or("not a kerntax report (it has no schema_version)")?;
    let version = version
        .as_u64()
        .ok_or_else(|| format!("not a kerntax report (schema_version is {version})"))?;
    if version > u64::from(SCHEMA_VERSION) {
        return Err(format!(
            "written by a newer kerntax (schema_version {version}); this one reads versions \
             {OLDEST_SCHEMA_VERSION} to {SCHEMA_VERSION}: upgrade kerntax"
        ));
    }
    if version < u64::from(OLDEST_SCHEMA_VERSION) {
        return Err(format!(
            "schema_version {version} is older than any kerntax report this version reads \
             ({OLDEST_SCHEMA_VERSION} to {SCHEMA_VERSION})"
        ));
    }
    let mut report: Report =
        serde_json::from_value(value).map_err(|e| format!("not a valid kerntax report: {e}"))?;
    if version < 2 {
        report.findings = crate::findings::analyse(&report);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::build::{build, tests::sample_inputs};

    fn json(r: &Report) -> Vec<u8> {
        serde_json::to_vec(r).unwrap()
    }

    #[test]
    fn a_written_report_reads_back_the_same() {
        let r = build(sample_inputs());
        assert_eq!(parse(&json(&r)).unwrap(), r);
    }

    #[test]
    fn version_1_reports_are_read_and_get_their_findings() {
        let r = build(sample_inputs());
        let mut v: serde_json::Value = serde_json::to_value(&r).unwrap();
        v["schema_version"] = 1.into();
        v.as_object_mut().unwrap().remove("findings");
        v["loss"]
            .as_object_mut()
            .unwrap()
            .remove("kernel_stack_lost");
        let back = parse(&serde_json::to_vec(&v).unwrap()).unwrap();
        assert_eq!(back.schema_version, 1);
        assert_eq!(back.findings, r.findings);
    }

    #[test]
    fn newer_older_and_foreign_documents_are_refused_with_the_reason() {
        let r = build(sample_inputs());
        let mut v: serde_json::Value = serde_json::to_value(&r).unwrap();
        v["schema_version"] = 99.into();
        let e = parse(&serde_json::to_vec(&v).unwrap()).unwrap_err();
        assert!(e.contains("newer kerntax") && e.contains("upgrade"), "{e}");
        v["schema_version"] = 0.into();
        assert!(
            parse(&serde_json::to_vec(&v).unwrap())
                .unwrap_err()
                .contains("older")
        );
        v["schema_version"] = "2".into();
        assert!(
            parse(&serde_json::to_vec(&v).unwrap())
                .unwrap_err()
                .contains("not a kerntax report")
        );
        assert!(
            parse(b"{\"a\": 1}")
                .unwrap_err()
                .contains("no schema_version")
        );
        assert!(parse(b"[1, 2").unwrap_err().starts_with("not valid JSON"));
        assert!(parse(b"").unwrap_err().starts_with("not valid JSON"));
        v["schema_version"] = 2.into();
        v["duration_ns"] = (-5).into();
        assert!(
            parse(&serde_json::to_vec(&v).unwrap())
                .unwrap_err()
                .contains("not a valid kerntax report")
        );
    }

    /// Deterministic xorshift: the same mutations on every run.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    /// Fuzzing the reader and what reads its output: thousands of corrupt
    /// and hostile variants of a real report (bytes flipped, cut short,
    /// values swapped for others of any type, numbers at their limits) are
    /// either refused with a message or read, and a read one goes through
    /// the findings, the diff and every renderer, without a panic.
    #[test]
    fn corrupt_and_hostile_reports_never_panic() {
        let good = build(sample_inputs());
        let bytes = json(&good);
        let value: serde_json::Value = serde_json::to_value(&good).unwrap();
        let odd: Vec<serde_json::Value> = vec![
            serde_json::json!(null),
            serde_json::json!(-1),
            serde_json::json!(u64::MAX),
            serde_json::json!(1e308),
            serde_json::json!(0),
            serde_json::json!(""),
            serde_json::json!("<script>alert(1)</script>"),
            serde_json::json!([]),
            serde_json::json!({}),
            serde_json::json!(true),
        ];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let (mut read, mut refused) = (0, 0);
        for round in 0..3000 {
            let candidate: Vec<u8> = match round % 3 {
                0 => {
                    let mut b = bytes.clone();
                    for _ in 0..1 + rng.below(8) {
                        let i = rng.below(b.len());
                        b[i] = rng.next() as u8;
                    }
                    b
                }
                1 => bytes[..rng.below(bytes.len())].to_vec(),
                _ => {
                    let mut v = value.clone();
                    mutate(&mut v, &mut rng, &odd, 8);
                    serde_json::to_vec(&v).unwrap()
                }
            };
            match parse(&candidate) {
                Ok(r) => {
                    read += 1;
                    let _ = crate::findings::analyse(&r);
                    let d = crate::diff::diff(&good, &r);
                    let _ = crate::render::diff_text::render(&d);
                    let _ = crate::render::text::render(&r, false);
                    let _ = serde_json::to_string(&d).unwrap();
                    let _ = crate::render::pprof::render(&r);
                    let _ = crate::render::folded::render(&r);
                    if read % 10 == 0 {
                        let _ = crate::render::html::render(&r);
                    }
                }
                Err(e) => {
                    refused += 1;
                    assert!(!e.is_empty());
                }
            }
        }
        assert!(
            read > 100 && refused > 100,
            "read {read}, refused {refused}"
        );
    }

    /// Replaces one value somewhere in `v` (a random path) with an odd one.
    fn mutate(v: &mut serde_json::Value, rng: &mut Rng, odd: &[serde_json::Value], depth: usize) {
        if depth > 0 && rng.below(5) != 0 {
            let child = match v {
                serde_json::Value::Object(m) if !m.is_empty() => {
                    let k = m.keys().nth(rng.below(m.len())).unwrap().clone();
                    m.get_mut(&k)
                }
                serde_json::Value::Array(a) if !a.is_empty() => {
                    let i = rng.below(a.len());
                    a.get_mut(i)
                }
                _ => None,
            };
            if let Some(c) = child {
                return mutate(c, rng, odd, depth - 1);
            }
        }
        *v = odd[rng.below(odd.len())].clone();
    }
}
