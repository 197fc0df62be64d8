//! Names for unwound frames, resolved from the files themselves (blazesym,
//! with DWARF where the file or its separate debug file has it), after the
//! profiled processes may be gone.

use std::collections::{BTreeMap, HashMap};

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{CodeInfo, Input, Symbolized, Symbolizer};

use super::elf::ModuleTable;
use super::gopclntab::{GoFrame, GoFuncs};
use super::jit::{self, JitMaps};
use crate::frame::{Frame, JIT_LOCATION, file_name, is_language_runtime, is_runtime_library};
use crate::interp::Interpreters;
use crate::model::FrameLoc;

/// Names of frames in files, kept across a live view's windows, and the
/// symbolizer that read them: it keeps each file's parsed symbols and
/// decompressed debug info (libc6-dbg's DWARF is compressed: inflating it
/// again for each window was a third of `kerntax top`'s CPU).
#[derive(Default)]
pub struct NameCache {
    names: HashMap<FrameLoc, Vec<Frame>>,
    symbolizer: Option<Symbolizer>,
}

/// Symbolized frames: each location becomes one or more strings (inlined
/// functions first), innermost first.
#[derive(Default)]
pub struct Symbols {
    names: HashMap<FrameLoc, Vec<Frame>>,
    /// Frames that got no function name.
    pub unresolved: u64,
}

fn location(ci: &CodeInfo<'_>) -> String {
    let file = ci.file.to_string_lossy();
    match ci.line {
        Some(line) => format!("{file}:{line}"),
        None => file.into_owned(),
    }
}

/// `name (file:line)` where debug info exists, `name (library)` otherwise;
/// always `name (library)` for a language runtime's library, so its frames
/// can be told from the program's (`frame::layer`).
pub fn frame_string(name: &str, code: Option<&CodeInfo<'_>>, module: &str) -> String {
    match code {
        Some(ci) if !is_language_runtime(module) => format!("{name} ({})", location(ci)),
        _ => format!("{name} ({})", file_name(module)),
    }
}

/// A Go frame as `frame_string` writes others: `name (file.go:line)`,
/// `name (binary)` where the table gives no line, and `[inlined]` after a
/// call the compiler inlined.
fn go_frame_string(f: &GoFrame<'_>, module: &str) -> String {
    let s = match (f.file, f.line) {
        (Some(file), Some(line)) => format!("{} ({}:{line})", f.name, file_name(file)),
        _ => format!("{} ({})", f.name, file_name(module)),
    };
    if f.inlined { s + " [inlined]" } else { s }
}

/// The highest address asked of the symbolizer: no file states code in
/// the last page of the address space, and blazesym's range arithmetic
/// overflows there (found by fuzzing, `fuzz/regressions/elf`).
const MAX_CODE_SVMA: u64 = u64::MAX - 0x1000;

/// blazesym's names for `addrs` of the file `src`; none when the file
/// cannot be read, or when its contents make blazesym panic: a hostile or
/// corrupt binary costs its own frames' names, not the run (the panic's
/// message is printed; the frames count as unresolved).
fn symbolize<'s>(
    symbolizer: &'s Symbolizer,
    src: &Source<'_>,
    addrs: &[u64],
) -> Vec<Symbolized<'s>> {
    let asked: Vec<u64> = addrs.iter().map(|&a| a.min(MAX_CODE_SVMA)).collect();
    let mut named = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        symbolizer.symbolize(src, Input::VirtOffset(&asked))
    }))
    .ok()
    .and_then(Result::ok)
    .unwrap_or_default();
    for (r, &a) in named.iter_mut().zip(addrs) {
        if a > MAX_CODE_SVMA {
            *r = Symbolized::Unknown(blazesym::symbolize::Reason::InvalidFileOffset);
        }
    }
    named
}

impl Symbols {
    /// How many of a stack's strings (as `stack` gives them) come from its
    /// innermost frames in runtime libraries or the vDSO.
    pub fn runtime_prefix(&self, modules: &ModuleTable, frames: &[FrameLoc]) -> usize {
        let mut n = 0;
        for f in frames {
            let runtime = match f {
                FrameLoc::InModule { module, .. } => modules
                    .paths
                    .get(*module)
                    .is_some_and(|p| is_runtime_library(p)),
                FrameLoc::Unmapped { mapping, .. } => mapping.as_deref() == Some("[vdso]"),
                FrameLoc::Jit { .. }
                | FrameLoc::Python { .. }
                | FrameLoc::Ruby { .. }
                | FrameLoc::Java { .. }
                | FrameLoc::Js { .. } => false,
            };
            if !runtime {
                break;
            }
            n += self.names.get(f).map_or(1, Vec::len);
        }
        n
    }

    pub fn resolve<'a>(
        modules: &ModuleTable,
        jit_maps: &JitMaps,
        interpreters: Interpreters<'_>,
        locs: impl IntoIterator<Item = &'a FrameLoc>,
    ) -> Symbols {
        Symbols::resolve_cached(None, modules, jit_maps, interpreters, locs)
    }

    /// `resolve`, taking the names of frames in files from `cache` and
    /// keeping there the ones it resolves: a live view names each window's
    /// stacks, mostly the same frames, once a second (`kerntax top`).
    pub fn resolve_cached<'a>(
        cache: Option<&mut NameCache>,
        modules: &ModuleTable,
        jit_maps: &JitMaps,
        interpreters: Interpreters<'_>,
        locs: impl IntoIterator<Item = &'a FrameLoc>,
    ) -> Symbols {
        let mut by_module: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
        let mut out = Symbols::default();
        let (mut cached, kept) = match cache {
            Some(NameCache { names, symbolizer }) => (
                Some(names),
                Some(&*symbolizer.get_or_insert_with(Symbolizer::new)),
            ),
            None => (None, None),
        };
        for loc in locs {
            match loc {
                FrameLoc::InModule { module, svma } => {
                    match cached.as_deref().and_then(|c| c.get(loc)) {
                        Some(names) => {
                            out.names.insert(loc.clone(), names.clone());
                        }
                        None => by_module.entry(*module).or_default().push(*svma),
                    }
                }
                FrameLoc::Unmapped { addr, mapping } => {
                    let s = match mapping {
                        Some(m) => format!("{} {addr:#x}", file_name(m)),
                        None => format!("[unknown] {addr:#x}"),
                    };
                    out.names.insert(loc.clone(), vec![Frame::new(s)]);
                    out.unresolved += 1;
                }
                FrameLoc::Jit { pid, addr } => {
                    if out.names.contains_key(loc) {
                        continue;
                    }
                    let s = match jit_maps.lookup(*pid, *addr) {
                        Some(name) => format!("{} ({JIT_LOCATION})", jit::display_name(name)),
                        None => {
                            out.unresolved += 1;
                            format!("[jit] {addr:#x}")
                        }
                    };
                    out.names.insert(loc.clone(), vec![Frame::new(s)]);
                }
                FrameLoc::Python { .. }
                | FrameLoc::Ruby { .. }
                | FrameLoc::Java { .. }
                | FrameLoc::Js { .. } => {
                    if out.names.contains_key(loc) {
                        continue;
                    }
                    let s = match interpreters.name(loc) {
                        Some(Ok(name)) => name,
                        unread => {
                            out.unresolved += 1;
                            unread
                                .and_then(Result::err)
                                .unwrap_or("[unread]")
                                .to_string()
                        }
                    };
                    out.names.insert(loc.clone(), vec![Frame::new(s)]);
                }
            }
        }
        for (module, mut addrs) in by_module {
            // One symbolizer per file: its parsed symbols and debug info
            // are freed before the next file's (one for all held every
            // file's at once: the end of a run's memory peak, issue 21);
            // a live view keeps one for all its windows.
            let fresh;
            let symbolizer = match kept {
                Some(s) => s,
                None => {
                    fresh = Symbolizer::new();
                    &fresh
                }
            };
            addrs.sort_unstable();
            addrs.dedup();
            let path = &modules.paths[module];
            let mut elf = Elf::new(path);
            elf.debug_syms = modules.debug_info_ok(module);
            let src = Source::Elf(elf);
            let results = symbolize(symbolizer, &src, &addrs);
            // A return address planted by a trampoline (makecontext's
            // __start_context) points at a function's first byte, so the
            // lookup address one before it falls outside: try it as is.
            let missed: Vec<u64> = addrs
                .iter()
                .zip(&results)
                .filter(|(_, r)| matches!(r, Symbolized::Unknown(_)))
                .map(|(&a, _)| a.saturating_add(1))
                .collect();
            let retried = symbolize(symbolizer, &src, &missed);
            let mut retried = retried.iter();
            // A stripped Go binary: its own function table names what the
            // symbols no longer do (read once, on the first miss).
            let mut go: Option<Option<GoFuncs>> = None;
            for (i, &svma) in addrs.iter().enumerate() {
                let result = match results.get(i) {
                    Some(Symbolized::Unknown(_)) => retried.next(),
                    r => r,
                };
                let texts: Vec<String> = match result {
                    Some(Symbolized::Sym(sym)) => {
                        let mut v: Vec<String> = sym
                            .inlined
                            .iter()
                            .rev()
                            .map(|f| {
                                frame_string(&f.name, f.code_info.as_ref(), path) + " [inlined]"
                            })
                            .collect();
                        v.push(frame_string(&sym.name, sym.code_info.as_deref(), path));
                        v
                    }
                    _ => match go
                        .get_or_insert_with(|| GoFuncs::open(path))
                        .as_ref()
                        .and_then(|g| g.frames(svma))
                    {
                        Some(frames) => frames.iter().map(|f| go_frame_string(f, path)).collect(),
                        None => {
                            out.unresolved += 1;
                            vec![format!("{}+{svma:#x}", file_name(path))]
                        }
                    },
                };
                // Typed once, here (`frame::Frame`).
                let names: Vec<Frame> = texts.into_iter().map(Frame::new).collect();
                if let Some(c) = cached.as_deref_mut() {
                    c.insert(FrameLoc::InModule { module, svma }, names.clone());
                }
                out.names.insert(FrameLoc::InModule { module, svma }, names);
            }
        }
        out
    }

    /// The frames of a stack, innermost first.
    pub fn stack(&self, frames: &[FrameLoc]) -> Vec<Frame> {
        frames
            .iter()
            .flat_map(|f| {
                self.names
                    .get(f)
                    .cloned()
                    .unwrap_or_else(|| vec![Frame::new("[unresolved]")])
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_strings_prefer_file_and_line_then_library() {
        assert_eq!(
            frame_string("swapcontext", None, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
            "swapcontext (libc.so.6)"
        );
        let ci = CodeInfo {
            dir: None,
            file: std::ffi::OsStr::new("calls.c").into(),
            line: Some(42),
            column: None,
            _non_exhaustive: (),
        };
        assert_eq!(
            frame_string("mask_inner", Some(&ci), "/x/calls"),
            "mask_inner (calls.c:42)"
        );
    }

    #[test]
    fn unmapped_frames_are_named_by_their_region_and_counted() {
        let locs = [
            FrameLoc::Unmapped {
                addr: 0x7fff0010,
                mapping: Some("[vdso]".into()),
            },
            FrameLoc::Unmapped {
                addr: 0x1234,
                mapping: None,
            },
        ];
        let (python, ruby, java, js) = Default::default();
        let s = Symbols::resolve(
            &ModuleTable::default(),
            &JitMaps::default(),
            Interpreters {
                python: &python,
                ruby: &ruby,
                java: &java,
                js: &js,
            },
            &locs,
        );
        assert_eq!(
            s.stack(&locs),
            vec![
                "[vdso] 0x7fff0010".to_string(),
                "[unknown] 0x1234".to_string()
            ]
        );
        assert_eq!(s.unresolved, 2);
    }
}
