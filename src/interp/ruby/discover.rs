//! Finding CRuby in a process: the mapped libruby (or ruby executable)
//! whose dynamic symbols export the VM's entry (`rb_vm_exec`), its version
//! (`ruby_version`, a string in the file) and where each thread's current
//! execution context is: the thread-local `ruby_current_ec`. Debian's
//! libruby reaches it the general-dynamic way, through two GOT slots that
//! the dynamic loader fills (its TLS module id, its offset in the module's
//! block); a walk reads the module's block from the thread's DTV.

use std::io;

use object::elf::{R_X86_64_DTPMOD64, R_X86_64_DTPOFF64};
use object::{Object, ObjectSection, ObjectSymbol, RelocationFlags, RelocationTarget};

use crate::interp::memory::Memory;
use crate::stacks::elf::ElfFile;
use crate::stacks::maps::Mapping;

const VM_EXEC: &str = "rb_vm_exec";
const EC: &str = "ruby_current_ec";
const VERSION: &str = "ruby_version";

/// CRuby as mapped in one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    pub path: String,
    /// (major, minor, teeny): `ruby_version` "3.1.2".
    pub version: (u32, u32, u32),
    /// The VM's entry, as the file states it (svma) and as mapped.
    pub vm_exec_svma: std::ops::Range<u64>,
    pub vm_exec: std::ops::Range<u64>,
    /// Where a thread finds its execution context (None: not found, so no
    /// frames can be walked).
    pub ec: Option<EcTls>,
}

/// `ruby_current_ec` reached through the DTV: the GOT slots the dynamic
/// loader fills, as mapped, and the module id read from the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EcTls {
    pub module_slot: u64,
    pub offset_slot: u64,
    pub module: u64,
    pub offset: u64,
}

impl Runtime {
    pub fn version_text(&self) -> String {
        let (a, b, c) = self.version;
        format!("{a}.{b}.{c}")
    }
}

/// What a file says of itself: rb_vm_exec (address, size), the version,
/// and the GOT slots of ruby_current_ec's module id and offset (svma).
struct Exported {
    vm_exec: (u64, u64),
    version: (u32, u32, u32),
    slots: Option<(u64, u64)>,
}

fn version_of(text: &[u8]) -> Option<(u32, u32, u32)> {
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    let s = std::str::from_utf8(&text[..end]).ok()?;
    let mut parts = s.split('.').map(|p| p.parse::<u32>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

fn exported(path: &str) -> io::Result<Option<Exported>> {
    let data = std::fs::read(path)?;
    let file = object::File::parse(&*data)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{path}: {e}")))?;
    let (mut vm_exec, mut version, mut ec_index) = (None, None, None);
    for s in file.dynamic_symbols() {
        match s.name() {
            Ok(VM_EXEC) if s.address() != 0 => vm_exec = Some((s.address(), s.size())),
            Ok(VERSION) if s.address() != 0 => {
                version = file
                    .sections()
                    .find_map(|sec| sec.data_range(s.address(), 16).ok().flatten())
                    .and_then(version_of);
            }
            Ok(EC) => ec_index = Some(s.index()),
            _ => {}
        }
    }
    let (Some(vm_exec), Some(version)) = (vm_exec, version) else {
        return Ok(None);
    };
    let (mut module, mut offset) = (None, None);
    for (at, r) in file.dynamic_relocations().into_iter().flatten() {
        let (RelocationFlags::Elf { r_type }, RelocationTarget::Symbol(i)) =
            (r.flags(), r.target())
        else {
            continue;
        };
        if Some(i) != ec_index {
            continue;
        }
        match r_type {
            R_X86_64_DTPMOD64 => module = Some(at),
            R_X86_64_DTPOFF64 => offset = Some(at),
            _ => {}
        }
    }
    Ok(Some(Exported {
        vm_exec,
        version,
        slots: module.zip(offset),
    }))
}

/// CRuby in the process whose mappings are `maps`, read through `mem`;
/// None when no mapped file exports the VM.
pub fn find(maps: &[Mapping], mem: &dyn Memory) -> io::Result<Option<Runtime>> {
    for (m, path) in crate::interp::candidate_files(maps, &["libruby", "ruby"]) {
        let Some(x) = exported(&path)? else { continue };
        let elf = ElfFile::open(&path).map_err(|e| io::Error::other(format!("{e:#}")))?;
        let Some(bias) = elf.bias(m) else { continue };
        let ec = match x.slots {
            Some((module, offset)) => {
                let (module_slot, offset_slot) =
                    (module.wrapping_add(bias), offset.wrapping_add(bias));
                Some(EcTls {
                    module_slot,
                    offset_slot,
                    module: mem.read_u64(module_slot)?,
                    offset: mem.read_u64(offset_slot)?,
                })
            }
            None => None,
        };
        let (start, size) = x.vm_exec;
        return Ok(Some(Runtime {
            path,
            version: x.version,
            vm_exec_svma: start..start + size,
            vm_exec: start.wrapping_add(bias)..start.wrapping_add(bias) + size,
            ec,
        }));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_string_up_to_its_nul() {
        assert_eq!(version_of(b"3.1.2\0\0x"), Some((3, 1, 2)));
        assert_eq!(version_of(b"3.1\0"), None);
        assert_eq!(version_of(b"x.1.2\0"), None);
    }
}
