//! HotSpot's interpreted Java frames (issue 38): a method the JIT has not
//! compiled runs in the interpreter, whose code is one stub for every
//! method (the perf map calls it `Interpreter`). Which method a frame of it
//! runs is in the frame itself: the interpreter keeps `rbp` as its frame
//! pointer and the frame's Method* and bytecode pointer at fixed slots
//! below it. The walk (`stacks::unwind`) gives each frame's frame pointer;
//! a frame in the interpreter's code is read here from the stack copied at
//! the sample, its Method read once from the JVM's memory through the
//! JVM's own tables (`vmstructs`, `method`), and it becomes
//! `FrameLoc::Java`, named as its compiled code would be.

pub mod method;
pub mod vmstructs;

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use object::{Object, ObjectSymbol};

use crate::interp::memory::{Memory, ProcessMemory};
use crate::model::FrameLoc;
use crate::stacks::elf::ElfFile;
use crate::stacks::maps::Mapping;
use method::{JavaMethod, Layout};

/// The interpreter frame's slots, in words below its frame pointer
/// (x86-64's `frame::interpreter_frame_method_offset` and `_bcp_offset`,
/// the same since JDK 8).
const METHOD_SLOT: u64 = 3;
const BCP_SLOT: u64 = 8;

/// How long after a look that found no interpreter (a JVM starting) the
/// next may be: a few reads each.
const LOOK_AGAIN: Duration = Duration::from_millis(20);

/// Looks after which a JVM whose tables or interpreter were never found is
/// given up on (and said so): 2 s of its samples at most.
const MAX_FAILED_LOOKS: u32 = 100;

/// The frame location a named interpreted frame shows, after its file and
/// line: `JavaLocks.work (JavaLocks.java:42, interpreted)`.
pub use crate::frame::INTERPRETED_LOCATION;

/// One JVM: where its tables are, and what was read of it.
struct Jvm {
    path: String,
    symbols: HashMap<&'static str, u64>,
    /// None until read; Err when they could not be (not retried).
    /// None until read; Err while they cannot be, and why (libjvm is
    /// seen mapped before the loader has relocated it: its tables' pointer
    /// is not set yet).
    layout: Option<Result<Layout, String>>,
    /// Looks that failed so far (`MAX_FAILED_LOOKS`).
    failed_looks: u32,
    interpreter: Option<Range<u64>>,
    /// When the interpreter was last looked for (it is generated as the
    /// JVM starts; samples then find none).
    looked: Option<Instant>,
    /// Method* -> (batch it was last checked in, its ConstMethod*, its
    /// number); a Method freed with its class may hold another later.
    methods: HashMap<u64, (u64, u64, Option<u64>)>,
}

/// The JVMs among the profiled processes.
#[derive(Default)]
pub struct Jvms {
    procs: HashMap<u32, Jvm>,
    not_jvm: HashSet<u32>,
    /// Methods read, numbered: a `FrameLoc::Java` holds the number.
    methods: Vec<Arc<JavaMethod>>,
    batch: u64,
    /// Samples with interpreted frames, the frames, and those left unnamed
    /// (their Method unreadable: the JVM gone before it was first read).
    pub stats: crate::report::Interpreters,
    /// Each JVM once: its JDK, or why its frames cannot be read.
    pub seen: Vec<(u32, String)>,
    pub disabled: bool,
}

impl Jvms {
    /// The JDK's version and its interpreter's code in JVM `pid`, or why
    /// not (tests and diagnostics: frames are named through `name_frames`).
    pub fn describe(&mut self, pid: u32) -> Result<(u32, Range<u64>), String> {
        let jvm = self.procs.get_mut(&pid).ok_or("not a JVM kerntax knows")?;
        let mem = ProcessMemory { pid };
        let interp = jvm.interpreter(&mem);
        match (&jvm.layout, interp) {
            (Some(Ok(l)), Some(r)) => Ok((l.major, r)),
            (Some(Err(e)), _) => Err(e.clone()),
            _ => Err("no interpreter yet".into()),
        }
    }

    /// The name of method `n` at `line`: `pkg.Class.method (File.java:42,
    /// interpreted)`.
    pub fn name(&self, n: u64, line: i32) -> Option<String> {
        let m = self.methods.get(n as usize)?;
        Some(match (&m.file, line) {
            (Some(f), l) if l > 0 => format!("{} ({f}:{l}, {INTERPRETED_LOCATION})", m.name),
            (Some(f), _) => format!("{} ({f}, {INTERPRETED_LOCATION})", m.name),
            (None, _) => format!("{} ({INTERPRETED_LOCATION})", m.name),
        })
    }
}

impl Jvm {
    /// The interpreter's code, looked for at most every `LOOK_AGAIN` until
    /// found.
    fn interpreter(&mut self, mem: &dyn Memory) -> Option<Range<u64>> {
        if let Some(r) = &self.interpreter {
            return Some(r.clone());
        }
        if self.looked.is_some_and(|t| t.elapsed() < LOOK_AGAIN) {
            return None;
        }
        self.looked = Some(Instant::now());
        if !matches!(self.layout, Some(Ok(_))) {
            if self.failed_looks >= MAX_FAILED_LOOKS {
                return None;
            }
            self.layout = Some(
                vmstructs::read(mem, &self.symbols)
                    .map_err(|e| e.to_string())
                    .and_then(|t| {
                        Layout::new(&t, mem)
                            .ok_or_else(|| "a field kerntax reads is not in them".into())
                    }),
            );
        }
        let r = match &self.layout {
            Some(Ok(l)) => l.interpreter(mem),
            _ => None,
        };
        match &r {
            Some(r) => self.interpreter = Some(r.clone()),
            None => self.failed_looks = self.failed_looks.saturating_add(1),
        }
        r
    }

    /// The number of the Method at `method`, read if new (or checked again
    /// once a batch: its ConstMethod* unchanged).
    fn method(
        &mut self,
        mem: &dyn Memory,
        method: u64,
        batch: u64,
        all: &mut Vec<Arc<JavaMethod>>,
    ) -> Option<u64> {
        let layout = self.layout.as_ref()?.as_ref().ok()?;
        let cm_now = |mem: &dyn Memory| mem.read_u64(method + layout.method_const_method).ok();
        if let Some((checked, cm, n)) = self.methods.get_mut(&method) {
            if *checked == batch {
                return *n;
            }
            // Its ConstMethod* unchanged, or unreadable (the JVM gone:
            // its memory can no longer change).
            match cm_now(mem) {
                Some(now) if now != *cm => {}
                _ => {
                    *checked = batch;
                    return *n;
                }
            }
        }
        // The ConstMethod* it was read through (its code follows it), else
        // what the word that is not a Method holds there.
        let (n, cm) = match method::read(mem, layout, method) {
            Ok(m) => {
                let cm = layout.const_method_of(&m);
                all.push(Arc::new(m));
                (Some((all.len() - 1) as u64), cm)
            }
            Err(_) => (None, cm_now(mem).unwrap_or(0)),
        };
        // Methods seen are bounded by the classes loaded; a word that is
        // not one is remembered as such for the batch.
        self.methods.insert(method, (batch, cm, n));
        n
    }
}

/// The runtime addresses of the tables' symbols in the libjvm.so at `path`
/// mapped by `m`; None if it exports them not.
fn symbols(path: &str, m: &Mapping) -> Option<HashMap<&'static str, u64>> {
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: a read-only private mapping of a library on disk; a library
    // replaced under it would be a new inode.
    let data = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let obj = object::File::parse(&*data).ok()?;
    let mut out = HashMap::new();
    for s in obj.dynamic_symbols() {
        if let Ok(name) = s.name()
            && let Some(&n) = vmstructs::SYMBOLS.iter().find(|&&n| n == name)
            && s.address() != 0
        {
            out.insert(n, s.address());
        }
    }
    if out.len() != vmstructs::SYMBOLS.len() {
        return None;
    }
    let bias = ElfFile::open(path).ok()?.bias(m)?;
    for a in out.values_mut() {
        *a = a.wrapping_add(bias);
    }
    Some(out)
}

impl crate::interp::FrameNamer for Jvms {
    /// Whether `pid` is a JVM kerntax reads frames of.
    fn knows(&self, pid: u32) -> bool {
        self.procs.contains_key(&pid)
    }

    /// The frames of `frames` (with their frame pointers `fps`) that are in
    /// `pid`'s interpreter, named after their methods; `word(addr)` reads
    /// the stack copied at the sample.
    fn name_frames(
        &mut self,
        pid: u32,
        frames: &mut [FrameLoc],
        fps: &[u64],
        word: &dyn Fn(u64) -> Option<u64>,
        _module_paths: &[String],
    ) {
        let batch = self.batch;
        let Some(jvm) = self.procs.get_mut(&pid) else {
            return;
        };
        let mem = ProcessMemory { pid };
        let had_layout = matches!(jvm.layout, Some(Ok(_)));
        let failed_before = jvm.failed_looks;
        let interp = jvm.interpreter(&mem);
        match &jvm.layout {
            Some(Ok(l)) if !had_layout => self
                .seen
                .push((pid, format!("HotSpot JDK {} ({})", l.major, jvm.path))),
            Some(Err(e))
                if failed_before < MAX_FAILED_LOOKS && jvm.failed_looks == MAX_FAILED_LOOKS =>
            {
                self.seen.push((
                    pid,
                    format!(
                        "HotSpot ({}): its interpreted frames cannot be read: {e}",
                        jvm.path
                    ),
                ));
            }
            _ => {}
        }
        let Some(interp) = interp else {
            return;
        };
        let frames_before = self.stats.frames;
        for (f, &fp) in frames.iter_mut().zip(fps) {
            let FrameLoc::Jit { addr, .. } = *f else {
                continue;
            };
            if !interp.contains(&addr) {
                continue;
            }
            self.stats.frames += 1;
            // Unnamed until read: it stays `Interpreter`, counted.
            self.stats.frames_unreadable += 1;
            let (Some(method), Some(bcp)) = (
                fp.checked_sub(METHOD_SLOT * 8).and_then(&word),
                fp.checked_sub(BCP_SLOT * 8).and_then(&word),
            ) else {
                continue;
            };
            let Some(n) = jvm.method(&mem, method, batch, &mut self.methods) else {
                continue;
            };
            let m = &self.methods[n as usize];
            // A bcp outside the method's code: the slot is not this
            // method's (a native method's is its empty code's start).
            if bcp != 0 && !(m.code.start..=m.code.end).contains(&bcp) {
                continue;
            }
            self.stats.frames_unreadable -= 1;
            *f = FrameLoc::Java {
                pid,
                method: n,
                line: m.line_at(bcp),
            };
        }
        if self.stats.frames > frames_before {
            self.stats.walked(false, false, false);
        }
    }
}

impl crate::interp::Reader for Jvms {
    /// Learns whether `pid` (with `maps`) runs a HotSpot JVM: its
    /// libjvm.so's tables' symbols. Nothing is read of the JVM yet.
    fn learn(&mut self, pid: u32, maps: &[Mapping]) {
        if self.disabled || self.procs.contains_key(&pid) || self.not_jvm.contains(&pid) {
            return;
        }
        let Some((m, path)) = crate::interp::candidate_files(maps, &["libjvm.so"]).next() else {
            return;
        };
        match symbols(&path, m) {
            Some(symbols) => {
                self.procs.insert(
                    pid,
                    Jvm {
                        path,
                        symbols,
                        layout: None,
                        failed_looks: 0,
                        interpreter: None,
                        looked: None,
                        methods: HashMap::new(),
                    },
                );
            }
            None => {
                self.not_jvm.insert(pid);
            }
        }
    }

    fn forget(&mut self, pid: u32) {
        self.procs.remove(&pid);
        self.not_jvm.remove(&pid);
    }

    fn new_batch(&mut self) {
        self.batch += 1;
    }

    fn stats(&self) -> &crate::report::Interpreters {
        &self.stats
    }

    fn seen(&self) -> &[(u32, String)] {
        &self.seen
    }
}
