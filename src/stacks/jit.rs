//! Names for JIT-compiled code, from the perf map a JIT writes
//! (`/tmp/perf-PID.map`, one `START SIZE NAME` line per piece of code, in
//! hex): the JVM (on request, or at exit), Node (`--perf-basic-prof`),
//! CPython 3.12+ (`-X perf`). JIT code lives in anonymous executable
//! memory with no symbols and no unwind tables: without the map its frames
//! are bare addresses.
//!
//! Why the map is read once profiling stops: a JVM writes it on request,
//! and a stack keeps the process and the address of each JIT frame until
//! then. A map written before the profile started is stale (or belongs to
//! an earlier process with the same PID) and is not used.
//!
//! An attached JVM is also asked as profiling starts (`ask_early`): one
//! that exits as the profile ends (a job, a load generator) can no longer
//! be asked then, and code freed during the profile is in no final map.
//! The final map names a frame first; the early one names what it lacks.

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
    /// What the JVMs answered when asked as profiling started.
    pub early: HashMap<u32, Early>,
}

impl JitMaps {
    pub fn read(pids: impl IntoIterator<Item = u32>, since: SystemTime) -> JitMaps {
        JitMaps {
            maps: pids.into_iter().map(|p| (p, read(p, since))).collect(),
            early: HashMap::new(),
        }
    }

    /// The name of `pid`'s JIT code at `addr`: from its final map, else
    /// from its early one (code freed during the profile).
    pub fn lookup(&self, pid: u32, addr: u64) -> Option<&str> {
        let last = match self.maps.get(&pid) {
            Some(MapState::Read { map, .. }) => map.lookup(addr),
            _ => None,
        };
        last.or_else(|| self.early.get(&pid)?.map.lookup(addr))
    }
}

/// A JVM's answer as profiling started: its perf map then, and whether its
/// JIT code keeps frame pointers.
#[derive(Debug, Clone, Default)]
pub struct Early {
    pub map: PerfMap,
    pub frame_pointers: Option<bool>,
}

/// Asks the JVMs among `pids` for their perf maps in the background, as
/// profiling starts, and reads them (written since `since`): what
/// `gather` names frames with when a JVM is gone by the end.
pub fn ask_early(
    pids: Vec<u32>,
    since: SystemTime,
) -> std::thread::JoinHandle<HashMap<u32, Early>> {
    std::thread::spawn(move || {
        pids.into_iter()
            .filter(|&pid| jvm::is_jvm(pid))
            .filter_map(|pid| {
                let asked = jvm::ask(pid);
                asked.perf_map.ok()?;
                match read(pid, since) {
                    MapState::Read { map, .. } => Some((
                        pid,
                        Early {
                            map,
                            frame_pointers: asked.frame_pointers,
                        },
                    )),
                    _ => None,
                }
            })
            .collect()
    })
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
/// since `since`; `early` are the maps asked for as profiling started.
pub fn gather<'a>(
    stacks: impl Iterator<Item = &'a UnwoundStack>,
    started_jvms: bool,
    since: SystemTime,
    early: HashMap<u32, Early>,
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
    let mut maps = JitMaps::read(addrs.keys().copied(), since);
    maps.early = early;
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
        let early = maps.early.get(pid);
        let entries = entries.max(early.map_or(0, |e| e.map.len() as u64));
        let frame_pointers = asked
            .and_then(|a| a.frame_pointers)
            .or(early.and_then(|e| e.frame_pointers));
        let mut problems = Vec::new();
        match state {
            // Gone by the end, or not answering then: named from the map
            // it wrote as profiling started (the file, if still there, is
            // that map).
            _ if early.is_some() && asked.is_none_or(|a| a.perf_map.is_err()) => {
                problems.push(format!(
                    "named from the perf map it wrote as profiling started, as {}: code \
                     compiled during the profile is unnamed",
                    match asked.map(|a| &a.perf_map) {
                        Some(Err(why)) => format!("asking it again at the end failed ({why})"),
                        _ => "it was gone by the end".to_string(),
                    }
                ));
            }
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

    /// The final map names a frame first; code freed during the profile
    /// (in the early map only) keeps its early name.
    #[test]
    fn the_final_map_names_first_and_the_early_one_what_it_lacks() {
        let mut maps = JitMaps::default();
        maps.maps.insert(
            7,
            MapState::Read {
                map: PerfMap::parse("1000 100 void Late.run()\n"),
                cut_bytes: 0,
            },
        );
        maps.early.insert(
            7,
            Early {
                map: PerfMap::parse("1000 100 void Early.run()\n2000 100 void Freed.run()\n"),
                frame_pointers: Some(true),
            },
        );
        assert_eq!(maps.lookup(7, 0x1010), Some("void Late.run()"));
        assert_eq!(maps.lookup(7, 0x2010), Some("void Freed.run()"));
        assert_eq!(maps.lookup(7, 0x3010), None);
        assert_eq!(maps.lookup(8, 0x1010), None);
        maps.maps.insert(8, MapState::Stale);
        maps.early.insert(8, maps.early[&7].clone());
        assert_eq!(maps.lookup(8, 0x1010), Some("void Early.run()"));
    }
}
