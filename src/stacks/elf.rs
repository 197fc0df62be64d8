//! The ELF files mapped by target processes: opened once each, memory-mapped,
//! and shared between processes. They give the unwinder its `.eh_frame` tables
//! and convert runtime addresses to addresses as stated in the file, which is
//! what symbolization needs once the process is gone.

use std::collections::HashMap;
use std::fs::File;
use std::ops::{Deref, Range};
use std::sync::Arc;

use anyhow::{Context, Result};
use memmap2::Mmap;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

use super::maps::Mapping;
use super::segments::{Segment, Segments};

/// A file's bytes: memory-mapped from disk, or in memory (the fuzz
/// harness's input).
pub type Image = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// A byte range of a file's image, cheap to clone.
#[derive(Clone)]
pub struct Bytes {
    map: Image,
    range: Range<usize>,
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &(*self.map).as_ref()[self.range.clone()]
    }
}

struct Section {
    name: &'static str,
    svma: Range<u64>,
    file: Range<usize>,
}

/// Sections the unwinder reads.
const UNWIND_SECTIONS: &[&str] = &[
    ".text",
    ".eh_frame",
    ".eh_frame_hdr",
    ".got",
    ".debug_frame",
];

pub struct ElfFile {
    map: Image,
    /// Data objects (variables) by address, read on first use: (address,
    /// size, demangled name), sorted.
    data_symbols: std::sync::OnceLock<Vec<(u64, u64, String)>>,
    segments: Segments,
    sections: Vec<Section>,
    /// Whether the symbolizer may read the file's debug info: no section
    /// claims to inflate to more than compression can (`plausibly_inflates`).
    pub debug_info_ok: bool,
}

/// The most a compressed section's bytes can inflate by: zlib's best ratio
/// is about 1032:1; zstd's is higher only on runs no compiler writes.
const MAX_INFLATION: u64 = 1100;
/// And the most any one section may claim at all.
const MAX_INFLATED_BYTES: u64 = 4 << 30;

/// Whether a section's compression header claims a size its compressed
/// bytes can inflate to. blazesym allocates the claimed size up front: a
/// file claiming terabytes would abort kerntax (found by fuzzing,
/// `fuzz/regressions/elf/compressed-section-claims-too-much`).
fn plausibly_inflates(r: &object::CompressedFileRange) -> bool {
    r.format == object::CompressionFormat::None
        || r.uncompressed_size
            <= r.compressed_size
                .saturating_mul(MAX_INFLATION)
                .saturating_add(4096)
                .min(MAX_INFLATED_BYTES)
}

impl ElfFile {
    pub fn open(path: &str) -> Result<ElfFile> {
        let file = File::open(path).with_context(|| format!("opening {path}"))?;
        // SAFETY: read-only private mapping; a file truncated under us would
        // fault, which is the accepted risk of every profiler reading binaries.
        let map: Mmap = unsafe { Mmap::map(&file) }.with_context(|| format!("mapping {path}"))?;
        ElfFile::parse(Arc::new(map)).with_context(|| format!("parsing ELF {path}"))
    }

    /// The ELF file in `image`. Its headers are the file's word, not the
    /// truth: a section whose range overflows or lies outside the image is
    /// left out, and segment arithmetic saturates (found by fuzzing: a
    /// section ending past 2^64 wrapped to a range that panicked when read).
    pub fn parse(image: Image) -> Result<ElfFile> {
        let map = image;
        let bytes: &[u8] = (*map).as_ref();
        let obj = object::File::parse(bytes)?;
        let segments = Segments(
            obj.segments()
                .map(|s| {
                    let (offset, file_size) = s.file_range();
                    let executable = matches!(
                        s.flags(),
                        object::SegmentFlags::Elf { p_flags, .. } if p_flags.0 & object::elf::PF_X.0 != 0
                    );
                    Segment {
                        offset,
                        vaddr: s.address(),
                        file_size,
                        executable,
                    }
                })
                .collect(),
        );
        let sections = UNWIND_SECTIONS
            .iter()
            .filter_map(|&name| {
                let s = obj.section_by_name(name)?;
                let (offset, size) = s.file_range()?;
                let end = offset.checked_add(size)?;
                let file = usize::try_from(offset).ok()?..usize::try_from(end).ok()?;
                (file.end <= bytes.len()).then_some(())?;
                Some(Section {
                    name,
                    svma: s.address()..s.address().checked_add(s.size())?,
                    file,
                })
            })
            .collect();
        let debug_info_ok = obj.sections().all(|s| {
            s.compressed_file_range()
                .is_ok_and(|r| plausibly_inflates(&r))
        });
        drop(obj);
        Ok(ElfFile {
            debug_info_ok,
            map,
            data_symbols: Default::default(),
            segments,
            sections,
        })
    }

    /// Runtime address minus stated address for what `m` maps
    /// (`Segments::bias`): the unwinder's, for executable mappings.
    pub fn bias(&self, m: &Mapping) -> Option<u64> {
        self.segments.bias(m)
    }

    #[cfg(test)]
    pub(crate) fn segments(&self) -> &Segments {
        &self.segments
    }

    /// The same for any mapping, with all of its process's `maps` at hand
    /// to settle a page two segments begin in (`Segments::load_bias`).
    pub fn load_bias(&self, m: &Mapping, maps: &[Mapping]) -> Option<u64> {
        self.segments.load_bias(m, maps)
    }

    /// The variable at `svma` (an address as stated in the file) and the
    /// offset into it: `("g_lock", 0)`, `("g_table", 0x10)`.
    pub fn data_symbol(&self, svma: u64) -> Option<(&str, u64)> {
        let table = self
            .data_symbols
            .get_or_init(|| data_symbols((*self.map).as_ref()));
        let i = table
            .partition_point(|&(addr, _, _)| addr <= svma)
            .checked_sub(1)?;
        let &(addr, size, ref name) = &table[i];
        (svma - addr < size.max(1)).then(|| (name.as_str(), svma - addr))
    }

    /// The stated addresses of `.text`, where a file's frames are.
    pub fn text_range(&self) -> Option<Range<u64>> {
        let s = self.sections.iter().find(|s| s.name == ".text")?;
        (s.svma.start < s.svma.end).then(|| s.svma.clone())
    }

    pub fn section_info(&self) -> SectionInfo<'_> {
        SectionInfo {
            file: self.map.clone(),
            sections: &self.sections,
        }
    }
}

/// Demangles a Rust or C++ symbol; other names are returned as they are.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z")
        && let Some(d) = cpp_demangle::Symbol::new(name.as_bytes())
            .ok()
            .and_then(|s| s.demangle().ok())
    {
        return d;
    }
    name.to_string()
}

fn data_symbols(bytes: &[u8]) -> Vec<(u64, u64, String)> {
    let Ok(obj) = object::File::parse(bytes) else {
        return vec![];
    };
    let mut table: Vec<(u64, u64, String)> = obj
        .symbols()
        .chain(obj.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Data && s.address() != 0)
        .filter_map(|s| Some((s.address(), s.size(), demangle(s.name().ok()?))))
        .collect();
    table.sort();
    table.dedup_by_key(|e| e.0);
    table
}

pub struct SectionInfo<'a> {
    file: Image,
    sections: &'a [Section],
}

impl SectionInfo<'_> {
    fn find(&self, name: &[u8]) -> Option<&Section> {
        self.sections.iter().find(|s| s.name.as_bytes() == name)
    }
}

impl framehop::ModuleSectionInfo<Bytes> for SectionInfo<'_> {
    fn base_svma(&self) -> u64 {
        0
    }
    fn section_svma_range(&mut self, name: &[u8]) -> Option<Range<u64>> {
        self.find(name).map(|s| s.svma.clone())
    }
    fn section_data(&mut self, name: &[u8]) -> Option<Bytes> {
        self.find(name).map(|s| Bytes {
            map: self.file.clone(),
            range: s.file.clone(),
        })
    }
}

/// kerntax's own vDSO, written to a file named vdso.so: every process on
/// this kernel maps the same image, whose .eh_frame and symbols it has.
fn vdso_file() -> Option<&'static std::path::Path> {
    static FILE: std::sync::OnceLock<Option<(tempfile::TempDir, std::path::PathBuf)>> =
        std::sync::OnceLock::new();
    FILE.get_or_init(|| {
        let maps = super::maps::read(std::process::id()).ok()?;
        let vdso = maps.iter().find(|m| m.path.as_deref() == Some("[vdso]"))?;
        // SAFETY: the vDSO mapping of this process is readable for its whole range.
        let image = unsafe {
            std::slice::from_raw_parts(vdso.start as *const u8, (vdso.end - vdso.start) as usize)
        };
        let dir = tempfile::tempdir().ok()?;
        let path = dir.path().join("vdso.so");
        std::fs::write(&path, image).ok()?;
        Some((dir, path))
    })
    .as_ref()
    .map(|(_, p)| p.as_path())
}

/// Every file seen in a target's mappings, numbered: `FrameLoc::InModule`
/// refers to modules by this number.
#[derive(Default)]
pub struct ModuleTable {
    pub paths: Vec<String>,
    elves: Vec<Option<Arc<ElfFile>>>,
    index: HashMap<(u64, u64, String), usize>,
    /// Files that could not be opened or parsed.
    pub failed: u64,
}

impl ModuleTable {
    /// The module number of the file behind `m` (a file mapping), and its
    /// ELF contents when they could be read.
    pub fn get(&mut self, m: &Mapping) -> (usize, Option<Arc<ElfFile>>) {
        let mut path = m.path.clone().unwrap_or_default();
        if path == "[vdso]" {
            path = vdso_file()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or(path);
        }
        let key = (m.dev, m.inode, path.clone());
        if let Some(&i) = self.index.get(&key) {
            return (i, self.elves[i].clone());
        }
        let elf = ElfFile::open(&path).ok().map(Arc::new);
        if elf.is_none() {
            self.failed += 1;
        }
        let i = self.add(path, elf.clone());
        self.index.insert(key, i);
        (i, elf)
    }

    /// Numbers the file at `path`, with its contents if read.
    pub fn add(&mut self, path: String, elf: Option<Arc<ElfFile>>) -> usize {
        self.paths.push(path);
        self.elves.push(elf);
        self.paths.len() - 1
    }

    /// Whether the symbolizer may read module `i`'s debug info: only that
    /// of a file kerntax parsed and found plausible.
    pub fn debug_info_ok(&self, i: usize) -> bool {
        self.elves
            .get(i)
            .and_then(Option::as_ref)
            .is_some_and(|e| e.debug_info_ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static TEST_DATA_SYMBOL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(7);

    #[test]
    fn finds_a_static_variable_by_address_with_its_offset() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.to_string_lossy();
        let maps = crate::stacks::maps::read(std::process::id()).unwrap();
        let elf = ElfFile::open(&exe).unwrap();
        let text = maps
            .iter()
            .find(|m| m.executable && m.path.as_deref() == Some(&*exe))
            .unwrap();
        let addr = &TEST_DATA_SYMBOL as *const _ as u64;
        // .data lies in a later PT_LOAD than .text; with a PIE every segment
        // shares the load bias. (Rust's linker packs segments so that the
        // text mapping starts inside a page the previous segment also covers:
        // the bias must come from the segment the mapping starts.)
        let bias = elf.bias(text).unwrap();
        let (name, off) = elf
            .data_symbol(addr - bias)
            .expect("the static is a data symbol");
        assert!(name.ends_with("TEST_DATA_SYMBOL"), "{name}");
        assert_eq!(off, 0);
        assert_eq!(elf.data_symbol(addr - bias + 4).unwrap().1, 4);
        assert_eq!(
            demangle("_ZN7kerntax4main17h0123456789abcdefE"),
            "kerntax::main"
        );
        assert_eq!(demangle("g_config_lock"), "g_config_lock");
    }

    #[test]
    fn a_compressed_section_may_claim_what_compression_can_inflate_to() {
        let range = |compressed_size, uncompressed_size| object::CompressedFileRange {
            format: object::CompressionFormat::Zlib,
            offset: 0,
            compressed_size,
            uncompressed_size,
        };
        let bound = 1000 * MAX_INFLATION + 4096;
        assert!(plausibly_inflates(&range(1000, bound)));
        assert!(!plausibly_inflates(&range(1000, bound + 1)));
        assert!(plausibly_inflates(&range(u64::MAX / 2, MAX_INFLATED_BYTES)));
        assert!(!plausibly_inflates(&range(
            u64::MAX / 2,
            MAX_INFLATED_BYTES + 1
        )));
        assert!(plausibly_inflates(&object::CompressedFileRange::none(
            Some((0, 10))
        )));
        // A real file with zlib-compressed DWARF, and the same file whose
        // .debug_info claims 4 TiB.
        let fuzz = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
        let real = ElfFile::open(&fuzz.join("corpus/elf/dwarf-zlib").to_string_lossy()).unwrap();
        assert!(real.debug_info_ok);
        let path = fuzz.join("regressions/elf/compressed-section-claims-too-much");
        assert!(
            !ElfFile::open(&path.to_string_lossy())
                .unwrap()
                .debug_info_ok
        );
    }

    #[test]
    fn bias_of_a_position_independent_executable_text_mapping() {
        // Own test binary: its text segment mapping is described by our maps.
        let maps = crate::stacks::maps::read(std::process::id()).unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.to_string_lossy();
        let text = maps
            .iter()
            .find(|m| m.executable && m.path.as_deref() == Some(&*exe))
            .expect("own text mapping");
        let elf = ElfFile::open(&exe).unwrap();
        let bias = elf.bias(text).unwrap();
        // The address of a function in this binary minus the bias is its
        // address as the file states it, which lies inside .text.
        let f = bias_of_a_position_independent_executable_text_mapping as fn() as usize as u64;
        let svma = f - bias;
        let text_section = elf.sections.iter().find(|s| s.name == ".text").unwrap();
        assert!(
            text_section.svma.contains(&svma),
            "{svma:#x} not in {:?}",
            text_section.svma
        );
    }
}
