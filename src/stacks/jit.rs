//! Names for JIT-compiled code, from the perf map a JIT writes
//! (`/tmp/perf-PID.map`, one `START SIZE NAME` line per piece of code, in
//! hex): the JVM (on request, or at exit), Node (`--perf-basic-prof`),
//! CPython 3.12+ (`-X perf`). JIT code lives in anonymous executable
//! memory with no symbols and no unwind tables: without the map its frames
//! are bare addresses.
//!
//! Why the map is read only once profiling stops: a JVM writes it on
//! request, and a stack keeps the process and the address of each JIT frame
//! until then. A map written before the profile started is stale (or
//! belongs to an earlier process with the same PID) and is not used.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::time::SystemTime;

use crate::jvm;
use crate::model::{FrameLoc, UnwoundStack};
use crate::report::JitProcess;

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
                    .then(|| (i, start, start.saturating_add(size), name.to_string()))
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
    Read(PerfMap),
    /// No map: the JIT was not asked to write one, or could not be.
    Missing,
    /// Only one written before the profile started.
    Stale,
}

/// Reads `pid`'s perf map if one was written since `since`.
pub fn read(pid: u32, since: SystemTime) -> MapState {
    let mut state = MapState::Missing;
    for path in map_paths(pid) {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.modified().is_ok_and(|m| m < since) {
            state = MapState::Stale;
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(&path) {
            return MapState::Read(PerfMap::parse(&text));
        }
    }
    state
}

/// What a JIT's name for its code says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JitKind {
    /// A method of the program (or of a library it brought).
    Program,
    /// A method of the language runtime's own library (the Java platform's
    /// `java.`, `jdk.`, `sun.` packages): a lock, queue or thread pool the
    /// program calls, as libc is for C.
    Platform,
    /// Code of the VM itself, not a method: an interpreter (which runs
    /// methods it does not name), call stubs, adapters.
    Stub,
}

/// Packages of the Java platform (the runtime's own classes).
const PLATFORM_PREFIXES: &[&str] = &["java.", "javax.", "jdk.", "sun.", "com.sun."];

/// The name a frame shows: a Java method's `RET pkg.Class.method(ARGS)`
/// becomes `pkg.Class.method`; other JITs' names are kept as written.
pub fn display_name(raw: &str) -> String {
    let raw = raw.trim();
    if raw.ends_with(')')
        && let Some(open) = raw.find('(')
        && !raw[..open].ends_with(' ')
    {
        let head = &raw[..open];
        let method = head.rsplit(' ').next().unwrap_or(head);
        if method.contains('.') {
            return method.to_string();
        }
    }
    raw.to_string()
}

/// The kind of code a displayed JIT name stands for.
pub fn kind(name: &str) -> JitKind {
    if !name.contains('.') {
        JitKind::Stub
    } else if PLATFORM_PREFIXES.iter().any(|p| name.starts_with(p)) {
        JitKind::Platform
    } else {
        JitKind::Program
    }
}

/// The perf maps of the processes with JIT frames, and what became of each.
#[derive(Debug, Default)]
pub struct JitMaps {
    pub maps: HashMap<u32, MapState>,
}

impl JitMaps {
    pub fn read(pids: impl IntoIterator<Item = u32>, since: SystemTime) -> JitMaps {
        JitMaps {
            maps: pids.into_iter().map(|p| (p, read(p, since))).collect(),
        }
    }

    pub fn lookup(&self, pid: u32, addr: u64) -> Option<&str> {
        match self.maps.get(&pid)? {
            MapState::Read(m) => m.lookup(addr),
            _ => None,
        }
    }
}

/// The JIT code of the profiled processes after profiling: their perf maps
/// (asked of the JVMs still running), and per process how its frames were
/// named.
#[derive(Debug, Default)]
pub struct Gathered {
    pub maps: JitMaps,
    pub processes: Vec<JitProcess>,
    /// Distinct stacks ending in JIT code without frame pointers.
    pub stacks_cut: u64,
}

impl Gathered {
    pub fn frames_unnamed(&self) -> u64 {
        self.processes
            .iter()
            .map(|p| p.frames - p.frames_named)
            .sum()
    }
}

/// Finds the processes with JIT frames in `stacks`, asks those that are
/// running JVMs for their perf map (`run_options` gave the JVMs kerntax
/// started one at exit, and frame pointers), and reads the maps written
/// since `since`.
pub fn gather<'a>(
    stacks: impl Iterator<Item = &'a UnwoundStack>,
    started_jvms: bool,
    since: SystemTime,
    comm_of: impl Fn(u32) -> String,
) -> Gathered {
    let mut addrs: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
    // Per process, the distinct stacks whose outermost frame is JIT code.
    let mut ending: BTreeMap<u32, u64> = BTreeMap::new();
    for s in stacks {
        for f in &s.frames {
            if let FrameLoc::Jit { pid, addr } = f {
                addrs.entry(*pid).or_default().insert(*addr);
            }
        }
        if let Some(FrameLoc::Jit { pid, .. }) = s.frames.last() {
            *ending.entry(*pid).or_default() += 1;
        }
    }
    let asked: HashMap<u32, jvm::Asked> = addrs
        .keys()
        .filter(|&&pid| jvm::is_jvm(pid))
        .map(|&pid| (pid, jvm::ask(pid)))
        .collect();
    let maps = JitMaps::read(addrs.keys().copied(), since);
    let mut out = Gathered::default();
    for (pid, set) in &addrs {
        let state = maps.maps.get(pid);
        let entries = match state {
            Some(MapState::Read(m)) => m.len() as u64,
            _ => 0,
        };
        let named = set
            .iter()
            .filter(|&&a| maps.lookup(*pid, a).is_some())
            .count() as u64;
        let asked = asked.get(pid);
        let frame_pointers = asked.and_then(|a| a.frame_pointers);
        let mut problems = Vec::new();
        match state {
            Some(MapState::Read(_)) => {}
            Some(MapState::Stale) => problems.push(
                "its perf map was written before the profile started (stale), so its JIT \
                 frames are unnamed"
                    .to_string(),
            ),
            _ => problems.push(match asked.map(|a| &a.perf_map) {
                Some(Err(why)) => format!("no perf map: asking the JVM for one failed: {why}"),
                Some(Ok(())) => "no perf map although the JVM was asked for one".to_string(),
                None if started_jvms => "no perf map: a JVM writes one at exit with \
                    -XX:+DumpPerfMapAtExit; other JITs need their own option (node \
                    --perf-basic-prof, python -X perf)"
                    .to_string(),
                None => "no perf map: the process was gone before kerntax could ask for one, \
                    or its JIT writes none (node --perf-basic-prof, python -X perf)"
                    .to_string(),
            }),
        }
        let cut = if frame_pointers == Some(false) {
            problems.push(
                "its JIT code keeps no frame pointers, so stacks stop at the first JIT frame: \
                 start the JVM with -XX:+PreserveFramePointer"
                    .to_string(),
            );
            ending.get(pid).copied().unwrap_or(0)
        } else {
            0
        };
        out.stacks_cut += cut;
        out.processes.push(JitProcess {
            pid: *pid,
            comm: comm_of(*pid),
            perf_map_entries: entries,
            frames: set.len() as u64,
            frames_named: named,
            frame_pointers,
            problem: (!problems.is_empty()).then(|| problems.join("; ")),
        });
    }
    out.maps = maps;
    out
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

    #[test]
    fn java_names_lose_return_type_and_parameters_and_are_told_apart() {
        let cases = [
            ("void Spin.work()", "Spin.work", JitKind::Program),
            (
                "java.lang.Object java.lang.invoke.MethodHandle.linkToStatic(java.lang.Object)",
                "java.lang.invoke.MethodHandle.linkToStatic",
                JitKind::Platform,
            ),
            (
                "void jdk.internal.misc.Unsafe.park(boolean, long)",
                "jdk.internal.misc.Unsafe.park",
                JitKind::Platform,
            ),
            ("Interpreter", "Interpreter", JitKind::Stub),
            ("StubRoutines (1)", "StubRoutines (1)", JitKind::Stub),
            ("I2C/C2I adapters", "I2C/C2I adapters", JitKind::Stub),
            (
                "LazyCompile:*handle /srv/app.js:10",
                "LazyCompile:*handle /srv/app.js:10",
                JitKind::Program,
            ),
        ];
        for (raw, shown, k) in cases {
            assert_eq!(display_name(raw), shown, "{raw}");
            assert_eq!(kind(&display_name(raw)), k, "{raw}");
        }
    }
}
