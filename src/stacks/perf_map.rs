//! A JIT's perf map (`/tmp/perf-PID.map`: one `START SIZE NAME` line per
//! piece of code, in hex), read as the untrusted input it is: /tmp is
//! anyone's, so a map is read only if it is a regular file (no symbolic
//! link followed, no FIFO waited on) owned by the process or root, at most
//! its last `MAX_MAP_BYTES`, and its names are cleaned of control
//! characters and cut at `MAX_NAME_BYTES` before they reach a terminal or
//! a page.

use std::path::PathBuf;
use std::time::SystemTime;

/// One process's JIT code: (start, end, name) sorted by start; of
/// overlapping entries (code freed and its memory reused), the later line
/// of the file wins.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PerfMap {
    entries: Vec<(u64, u64, String)>,
}

fn hex(s: &str) -> Option<u64> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    u64::from_str_radix(s, 16).ok()
}

/// The longest name kept of a perf map line, in bytes: a JVM's longest
/// signatures run to a few hundred; the rest of a longer one is cut.
pub const MAX_NAME_BYTES: usize = 1024;

/// The most of a perf map read, from its end (later lines win, and a JIT
/// appends): about a million lines of JIT code. Whoever wrote the map, a
/// map with a billion lines costs kerntax this much and no more.
pub const MAX_MAP_BYTES: u64 = 64 << 20;

/// A name as written, made safe to show (`names::shown`).
fn clean_name(name: &str) -> String {
    crate::names::shown(name, MAX_NAME_BYTES)
}

impl PerfMap {
    /// Parses a map's text; malformed lines are skipped.
    pub fn parse(text: &str) -> PerfMap {
        let mut entries: Vec<(usize, u64, u64, String)> = text
            .lines()
            .enumerate()
            .filter_map(|(i, line)| {
                let mut it = line.splitn(3, ' ');
                let start = hex(it.next()?)?;
                let size = hex(it.next()?)?;
                let name = it.next()?.trim();
                (size > 0 && !name.is_empty())
                    .then(|| (i, start, start.saturating_add(size), clean_name(name)))
            })
            .collect();
        entries.sort_by_key(|e| (e.1, e.0));
        // A later line covering the same start replaces the earlier ones.
        let mut out: Vec<(usize, u64, u64, String)> = Vec::with_capacity(entries.len());
        for e in entries {
            if let Some(last) = out.last_mut()
                && last.1 == e.1
            {
                if e.0 > last.0 {
                    *last = e;
                }
                continue;
            }
            out.push(e);
        }
        PerfMap {
            entries: out.into_iter().map(|(_, s, e, n)| (s, e, n)).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// (start, end, name) of each piece of code, by start.
    pub fn entries(&self) -> &[(u64, u64, String)] {
        &self.entries
    }

    /// The name of the code at `addr`, as the JIT wrote it.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.entries.partition_point(|e| e.0 <= addr);
        // The nearest starts at or below `addr`; a few back in case an
        // earlier, longer entry overlaps.
        self.entries[..i]
            .iter()
            .rev()
            .take(4)
            .find(|e| addr < e.1)
            .map(|e| e.2.as_str())
    }
}

/// The perf map of `pid` as a path this process can read: through the
/// process's own root while it lives (its /tmp may be another mount
/// namespace's), else kerntax's /tmp.
fn map_paths(pid: u32) -> Vec<PathBuf> {
    vec![
        PathBuf::from(format!("/proc/{pid}/root/tmp/perf-{pid}.map")),
        PathBuf::from(format!("/tmp/perf-{pid}.map")),
    ]
}

/// Why a process's JIT frames have no names.
#[derive(Debug, Clone, PartialEq)]
pub enum MapState {
    /// Read; `cut_bytes` at its start were left unread (`MAX_MAP_BYTES`).
    Read { map: PerfMap, cut_bytes: u64 },
    /// No map: the JIT was not asked to write one, or could not be.
    Missing,
    /// Only one written before the profile started.
    Stale,
    /// One that cannot be the process's own, and why: /tmp is anyone's.
    Refused(String),
}

/// The owners a map of `pid`'s may have: the process's own uids, or root.
/// Once the process is gone (a JVM writes its map at exit), the uids
/// kerntax runs as stand in: the ones `run` gave the command.
fn trusted_owners(pid: u32) -> Vec<u32> {
    let mut uids = vec![0];
    match crate::target::status_field(pid, "Uid") {
        Some(v) => uids.extend(v.split_whitespace().filter_map(|u| u.parse::<u32>().ok())),
        // SAFETY: plain syscalls without arguments.
        None => uids.extend([unsafe { libc::getuid() }, unsafe { libc::geteuid() }]),
    }
    uids
}

/// Reads `pid`'s perf map if one was written since `since` by the process
/// (a regular file it owns; a symbolic link is not followed, a FIFO not
/// waited on), at most its last `MAX_MAP_BYTES`.
pub fn read(pid: u32, since: SystemTime) -> MapState {
    let mut state = MapState::Missing;
    let owners = trusted_owners(pid);
    for path in map_paths(pid) {
        match read_one(&path, since, &owners) {
            MapState::Missing => {}
            read @ MapState::Read { .. } => return read,
            other => state = other,
        }
    }
    state
}

fn read_one(path: &std::path::Path, since: SystemTime, owners: &[u32]) -> MapState {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let Ok(mut file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    else {
        // Absent; or a symbolic link (ELOOP), which a JIT never writes.
        return match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => MapState::Refused(format!(
                "{} is a symbolic link, not a map the JIT wrote",
                path.display()
            )),
            _ => MapState::Missing,
        };
    };
    let Ok(meta) = file.metadata() else {
        return MapState::Missing;
    };
    if !meta.is_file() {
        return MapState::Refused(format!("{} is not a regular file", path.display()));
    }
    if !owners.contains(&meta.uid()) {
        return MapState::Refused(format!(
            "{} belongs to uid {}, not to the process (uids {:?}): anyone can write /tmp",
            path.display(),
            meta.uid(),
            &owners[1..]
        ));
    }
    if meta.modified().is_ok_and(|m| m < since) {
        return MapState::Stale;
    }
    let cut_bytes = meta.len().saturating_sub(MAX_MAP_BYTES);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(cut_bytes)).is_err()
        || file.take(MAX_MAP_BYTES).read_to_end(&mut bytes).is_err()
    {
        return MapState::Missing;
    }
    // Started mid-line: that line is not whole.
    if cut_bytes > 0 {
        let first = bytes
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |i| i + 1);
        bytes.drain(..first);
    }
    MapState::Read {
        map: PerfMap::parse(&String::from_utf8_lossy(&bytes)),
        cut_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = "\
0x00007f8dc0940b80 0x0000000000017de0 Interpreter
0x00007f8dc0ecaaa0 0x0000000000000248 void Spin.work()
7f8dc0ecb000 100 LazyCompile:*handle /srv/app.js:10
not a line
0x00007f8dc0ecaaa0 0x0000000000000100 void Spin.work2(int, java.lang.Object)
0x00007f8dc0ec7600 0x0000000000000028 java.lang.Object java.lang.invoke.MethodHandle.linkToStatic(java.lang.Object, java.lang.invoke.MemberName)
";

    #[test]
    fn entries_are_found_by_address_and_a_later_line_replaces_an_earlier_one() {
        let m = PerfMap::parse(MAP);
        assert_eq!(m.len(), 4);
        assert_eq!(m.lookup(0x7f8dc0940b80), Some("Interpreter"));
        assert_eq!(m.lookup(0x7f8dc0940b80 + 0x17de0), None);
        assert_eq!(
            m.lookup(0x7f8dc0ecaab0),
            Some("void Spin.work2(int, java.lang.Object)")
        );
        assert_eq!(
            m.lookup(0x7f8dc0ecb0ff),
            Some("LazyCompile:*handle /srv/app.js:10")
        );
        assert_eq!(m.lookup(0x10), None);
    }

    fn since() -> SystemTime {
        SystemTime::now() - std::time::Duration::from_secs(60)
    }

    fn me() -> Vec<u32> {
        // SAFETY: plain syscall.
        vec![0, unsafe { libc::geteuid() }]
    }

    fn read_map(path: &std::path::Path, owners: &[u32]) -> MapState {
        read_one(path, since(), owners)
    }

    /// Issue 24: names from the map reach a terminal and a page; a map line
    /// of escape sequences or megabytes shows neither.
    #[test]
    fn names_lose_control_characters_and_are_cut() {
        let long = "x".repeat(MAX_NAME_BYTES + 10);
        let text = format!("10 8 void A.\x1b[2Jb()\r\n20 8 {long}\n30 8 <b>bold</b>\n");
        let m = PerfMap::parse(&text);
        assert_eq!(m.lookup(0x10), Some("void A.\u{fffd}[2Jb()"));
        let cut = m.lookup(0x20).unwrap();
        assert_eq!(cut.len(), MAX_NAME_BYTES + '…'.len_utf8());
        assert!(cut.ends_with('…'));
        // Markup is kept as written: the page escapes it (render::html::esc).
        assert_eq!(m.lookup(0x30), Some("<b>bold</b>"));
        let edge = "é".repeat(MAX_NAME_BYTES / 2);
        assert_eq!(clean_name(&edge), edge, "exactly MAX_NAME_BYTES is kept");
        assert!(clean_name(&format!("{edge}x")).ends_with('…'));
    }

    /// Issue 24: /tmp is anyone's. A map another user owns, a symbolic
    /// link and a FIFO are refused (the FIFO without waiting on it); the
    /// target's own map is read, bytes that are not UTF-8 costing only
    /// their characters.
    #[test]
    fn a_map_the_process_did_not_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("perf-1.map");
        std::fs::write(&own, b"10 8 \xffname\n").unwrap();
        match read_map(&own, &me()) {
            MapState::Read { map, cut_bytes: 0 } => {
                assert_eq!(map.lookup(0x10), Some("\u{fffd}name"));
            }
            other => panic!("{other:?}"),
        }
        match read_map(&own, &[0, 4242]) {
            MapState::Refused(why) => assert!(why.contains("belongs to uid"), "{why}"),
            other if me()[1] == 0 => assert!(matches!(other, MapState::Read { .. })),
            other => panic!("{other:?}"),
        }
        let link = dir.path().join("perf-2.map");
        std::os::unix::fs::symlink(&own, &link).unwrap();
        assert!(
            matches!(read_map(&link, &me()), MapState::Refused(ref w) if w.contains("symbolic link"))
        );
        let fifo = dir.path().join("perf-3.map");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a path we own, as a C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(
            matches!(read_map(&fifo, &me()), MapState::Refused(ref w) if w.contains("not a regular file"))
        );
        assert_eq!(
            read_map(&dir.path().join("absent"), &me()),
            MapState::Missing
        );
    }

    /// Issue 24: a map with a billion lines costs `MAX_MAP_BYTES` at most:
    /// its last lines are read (a JIT appends; later lines win) and the
    /// rest is counted.
    #[test]
    fn only_the_last_max_map_bytes_of_a_huge_map_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perf-4.map");
        let file = std::fs::File::create(&path).unwrap();
        // Sparse: 64 MiB + 1 MiB of zeros, then two lines.
        file.set_len(MAX_MAP_BYTES + (1 << 20)).unwrap();
        drop(file);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"\n100 8 first\n200 8 last\n").unwrap();
        match read_map(&path, &me()) {
            MapState::Read { map, cut_bytes } => {
                assert_eq!(cut_bytes, (1 << 20) + 24);
                assert_eq!(map.lookup(0x200), Some("last"));
                assert_eq!(map.lookup(0x100), Some("first"));
            }
            other => panic!("{other:?}"),
        }
    }
}
