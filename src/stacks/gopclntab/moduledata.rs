//! A Go binary's `runtime.moduledata`, found without symbols: where its
//! text starts and where its `go:func.*` data is (inline trees).
//!
//! Why: the function table's header no longer states the text start from
//! Go 1.26 on (it needed a relocation), and the inline trees are stated as
//! offsets from `moduledata.gofunc`, which only the module's data says.
//! The module's data is found by what it must hold: its first word points
//! at the function table, its second at the table's function names (the
//! `funcnametab` slice), read from the file or, in a position-independent
//! binary, from the relative relocations that fill them at load.

use std::collections::HashMap;

use object::elf::{R_AARCH64_RELATIVE, R_X86_64_RELATIVE};
use object::{Object, ObjectSection, RelocationFlags, SectionKind};

use super::{Header, Layout, uptr_at};

/// What the module's data says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Module {
    pub text: u64,
    /// The file offset of `go:func.*` (Go 1.18 and later).
    pub gofunc: Option<usize>,
}

/// Words of `moduledata` before `text` (the pointer to the header, six
/// slices, findfunctab, minpc, maxpc): the same from Go 1.16 on.
const TEXT_WORD: usize = 22;
/// The word of `gofunc`: after types, etypes and rodata (Go 1.18 and
/// 1.19), and two more words from Go 1.20 on (the coverage counters).
const GOFUNC_WORD_GO118: usize = 38;
const GOFUNC_WORD_GO120: usize = 40;

/// A section: its address, its size, and where its bytes are in the file
/// (offset, length; None for one that takes no room there, `.bss`).
type Section = (u64, u64, Option<(usize, usize)>);

/// The address-space view of the file: each section's address range and
/// where its bytes are, and the words relocations fill at load.
struct Image<'a> {
    map: &'a [u8],
    sections: Vec<Section>,
    relocated: HashMap<u64, u64>,
    ptr: usize,
}

impl Image<'_> {
    fn file_offset(&self, addr: u64) -> Option<usize> {
        self.sections.iter().find_map(|&(start, size, file)| {
            let (off, len) = file?;
            let delta = usize::try_from(addr.checked_sub(start)?).ok()?;
            (addr < start.checked_add(size)? && delta < len).then_some(())?;
            off.checked_add(delta)
        })
    }

    fn word(&self, addr: u64) -> Option<u64> {
        if let Some(&v) = self.relocated.get(&addr) {
            return Some(v);
        }
        uptr_at(self.map, self.file_offset(addr)?, self.ptr)
    }
}

/// The module's data of the Go binary `obj` (mapped at `map`), whose
/// function table, with header `h`, is at `pclntab` (an address).
pub(super) fn find(obj: &object::File<'_>, map: &[u8], pclntab: u64, h: &Header) -> Option<Module> {
    let gofunc_word = match h.layout {
        Layout::Go116 => None,
        Layout::Go118 => Some(GOFUNC_WORD_GO118),
        Layout::Go120 => Some(GOFUNC_WORD_GO120),
    };
    let ptr = h.ptr;
    let funcnames = pclntab.checked_add(h.tabs.funcnames as u64)?;
    let relocated: HashMap<u64, u64> = obj
        .dynamic_relocations()
        .into_iter()
        .flatten()
        .filter(|(_, r)| {
            matches!(r.flags(), RelocationFlags::Elf { r_type }
                if r_type == R_X86_64_RELATIVE || r_type == R_AARCH64_RELATIVE)
        })
        .filter_map(|(at, r)| Some((at, u64::try_from(r.addend()).ok()?)))
        .collect();
    let image = Image {
        map,
        sections: obj
            .sections()
            .map(|s| {
                let file = s
                    .file_range()
                    .and_then(|(o, l)| Some((usize::try_from(o).ok()?, usize::try_from(l).ok()?)));
                (s.address(), s.size(), file)
            })
            .collect(),
        relocated,
        ptr,
    };
    let is_module = |at: u64| {
        image.word(at) == Some(pclntab)
            && at.checked_add(ptr as u64).and_then(|next| image.word(next)) == Some(funcnames)
    };
    // A relocated binary fills the first word at load; otherwise it is in
    // the file, in a data section, aligned.
    let mut at = image
        .relocated
        .iter()
        .filter(|&(_, &v)| v == pclntab)
        .map(|(&a, _)| a)
        .filter(|&a| is_module(a))
        .min();
    if at.is_none() {
        at = obj
            .sections()
            .filter(|s| matches!(s.kind(), SectionKind::Data | SectionKind::ReadOnlyData))
            .find_map(|s| {
                let (off, len) = s.file_range()?;
                let (off, len) = (usize::try_from(off).ok()?, usize::try_from(len).ok()?);
                let bytes = map.get(off..off.checked_add(len)?)?;
                let want = pclntab.to_le_bytes();
                (0..len.saturating_sub(2 * ptr))
                    .step_by(ptr)
                    .filter(|&i| bytes[i..i + ptr] == want[..ptr])
                    .filter_map(|i| s.address().checked_add(i as u64))
                    .find(|&a| is_module(a))
            });
    }
    let at = at?;
    let word = |i: usize| image.word(at.checked_add((i * ptr) as u64)?);
    let text = word(TEXT_WORD)?;
    let gofunc = gofunc_word
        .and_then(word)
        .and_then(|a| image.file_offset(a));
    Some(Module { text, gofunc })
}
