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
use std::time::SystemTime;

pub use super::perf_map::{MapState, PerfMap, read};
use crate::jvm;
use crate::model::{FrameLoc, UnwoundStack};
use crate::report::JitProcess;

pub use crate::frame::jit::{JitKind, display_name, kind};

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
            MapState::Read { map, .. } => map.lookup(addr),
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
            Some(MapState::Read { map, .. }) => map.len() as u64,
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
            Some(MapState::Read { cut_bytes: 0, .. }) => {}
            Some(MapState::Read { cut_bytes, .. }) => problems.push(format!(
                "its perf map is larger than kerntax reads: its first {} MiB were left \
                 unread, so code named only there is unnamed",
                cut_bytes.div_ceil(1 << 20)
            )),
            Some(MapState::Refused(why)) => {
                problems.push(format!("its perf map was not read: {why}"));
            }
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
