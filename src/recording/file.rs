//! A recording as a file: gzip-compressed JSON whose first fields say what
//! it is (`FORMAT`) and its format's version. Read back, the file may be
//! from another kerntax, truncated, corrupt or hostile: each case is one
//! clear message (exit status 2), never a panic, and a file that
//! decompresses to more than `MAX_DECOMPRESSED_BYTES` is refused rather
//! than read into memory.

use std::io::Read;
use std::path::Path;

use serde::Deserialize;

use super::{FORMAT, Recording, VERSION};
use crate::error::Exit;

/// A recording decompresses to at most this (its sched trace is bounded
/// by `sched_trace::MAX_RECORDS`, its samples by the tally's bounds).
pub const MAX_DECOMPRESSED_BYTES: u64 = 1 << 30;

/// The first bytes of a gzip stream: how a recording is told from a JSON
/// report.
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Whether `bytes` look like a recording rather than a JSON report.
pub fn is_recording(bytes: &[u8]) -> bool {
    bytes.starts_with(&GZIP_MAGIC)
}

/// The recording's bytes as its file holds them.
pub fn encode(r: &Recording) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    serde_json::to_writer(&mut gz, r).expect("a recording always serializes");
    gz.finish().expect("writing to memory cannot fail")
}

/// Writes `r` to `path` (atomically: a temporary file, then a rename);
/// the bytes written.
pub fn write(path: &Path, r: &Recording) -> anyhow::Result<u64> {
    let bytes = encode(r);
    crate::render::json::write_atomic(path, &bytes)?;
    Ok(bytes.len() as u64)
}

/// The fields that say what a file is, for a file that is not a sound
/// recording.
#[derive(Deserialize)]
struct Head {
    format: Option<serde_json::Value>,
    version: Option<serde_json::Value>,
}

/// The recording in `bytes` (a file's), or why it is not one.
pub fn decode(bytes: &[u8]) -> Result<Recording, String> {
    if !is_recording(bytes) {
        return Err("not a kerntax recording (not gzip-compressed)".into());
    }
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .take(MAX_DECOMPRESSED_BYTES + 1)
        .read_to_end(&mut json)
        .map_err(|e| format!("a damaged or truncated recording ({e})"))?;
    if json.len() as u64 > MAX_DECOMPRESSED_BYTES {
        return Err(format!(
            "decompresses to more than any recording ({} MiB at most)",
            MAX_DECOMPRESSED_BYTES >> 20
        ));
    }
    // One parse when the file is sound; what it says it is is read only
    // to say why it is not.
    let parsed = serde_json::from_slice::<Recording>(&json);
    let (format, version) = match &parsed {
        Ok(rec) => (Some(rec.format.clone()), Some(u64::from(rec.version))),
        Err(_) => {
            let head: Head = serde_json::from_slice(&json)
                .map_err(|e| format!("not a kerntax recording (not valid JSON inside: {e})"))?;
            (
                head.format.and_then(|f| f.as_str().map(str::to_string)),
                head.version.and_then(|v| v.as_u64()),
            )
        }
    };
    if format.as_deref() != Some(FORMAT) {
        return Err("not a kerntax recording (it does not say it is one)".into());
    }
    let version = version.ok_or("not a kerntax recording (it has no version)")?;
    if version > u64::from(VERSION) {
        return Err(format!(
            "recorded by a newer kerntax (recording version {version}); this one reads \
             version {VERSION}: upgrade kerntax"
        ));
    }
    if version < u64::from(VERSION) {
        return Err(format!(
            "recording version {version} is older than any this kerntax reads \
             (version {VERSION}): analyse it with the kerntax that recorded it"
        ));
    }
    let rec = parsed.map_err(|e| format!("a damaged kerntax recording: {e}"))?;
    check(&rec)?;
    Ok(rec)
}

/// Whether the samples' stacks are all named: the analysis looks each up.
fn check(rec: &Recording) -> Result<(), String> {
    let s = &rec.samples;
    let ids = s
        .sites
        .iter()
        .map(|e| e.0.1)
        .chain(s.locks.iter().map(|e| e.0.2))
        .chain(s.offcpu.iter().map(|e| e.0.1))
        .chain(s.sleeps.iter().map(|e| e.0.1))
        .chain(s.wakes.iter().map(|e| e.0.3))
        .chain(s.polls.iter().map(|e| e.0.2))
        .chain(s.cpu.iter().map(|e| e.0.2));
    for id in ids {
        if !rec.named.stacks.contains_key(&id) {
            return Err(format!(
                "a damaged kerntax recording: a sample's stack {id:?} is not among its stacks"
            ));
        }
    }
    Ok(())
}

/// The recording at `path`.
pub fn read(path: &Path) -> Result<Recording, Exit> {
    let bytes =
        std::fs::read(path).map_err(|e| Exit::new(2, format!("{}: {e}", path.display())))?;
    decode(&bytes).map_err(|why| Exit::new(2, format!("{}: {why}", path.display())))
}
