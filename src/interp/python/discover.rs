//! Finding CPython in a process: the mapped file (the python executable
//! or a libpython) whose dynamic symbols export the eval loop, its version
//! (`Py_Version`, read from the process) and the runtime addresses of what
//! the frame walk and the code reader need. Distribution builds are
//! stripped but export all of these in `.dynsym`.

use std::collections::HashMap;
use std::io;

use object::{Object, ObjectSymbol};

use crate::interp::memory::Memory;
use crate::stacks::elf::ElfFile;
use crate::stacks::maps::Mapping;

/// The symbols a file must export to be a CPython.
const EVAL: &str = "_PyEval_EvalFrameDefault";
const NEEDED: &[&str] = &[EVAL, "_PyRuntime", "Py_Version", "PyCode_Type"];
/// The function whose first load names the thread-state key.
const GET_TSTATE: &str = "PyGILState_GetThisThreadState";

/// CPython as mapped in one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    pub path: String,
    /// `Py_Version`: 0x030b02f0 is 3.11.2 final.
    pub version: u32,
    /// Runtime addresses (bias applied).
    pub runtime: u64,
    pub code_type: u64,
    /// The eval loop's code, start..end.
    pub eval: std::ops::Range<u64>,
    /// The eval loop as the file states it (svma), for frames unwound.
    pub eval_svma: std::ops::Range<u64>,
    /// The int key of the interpreter's thread-state TSS (None: not found,
    /// so no frames can be walked).
    pub key_addr: Option<u64>,
}

impl Runtime {
    pub fn minor(&self) -> u32 {
        (self.version >> 16) & 0xff
    }

    /// "3.11.2".
    pub fn version_text(&self) -> String {
        format!(
            "{}.{}.{}",
            self.version >> 24,
            self.minor(),
            (self.version >> 8) & 0xff
        )
    }
}

/// Symbols by name: (address, size).
type Exported = HashMap<&'static str, (u64, u64)>;

/// What a file exports of NEEDED and GET_TSTATE: name -> (address,
/// size); and the thread-state key's address as the file states it.
fn exported(path: &str) -> io::Result<(Exported, Option<u64>)> {
    let data = std::fs::read(path)?;
    let file = object::File::parse(&*data)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{path}: {e}")))?;
    let mut out = HashMap::new();
    for s in file.dynamic_symbols() {
        if let Ok(name) = s.name()
            && let Some(&n) = NEEDED.iter().chain([&GET_TSTATE]).find(|&&n| n == name)
            && s.address() != 0
        {
            out.insert(n, (s.address(), s.size()));
        }
    }
    let key = match (out.get(GET_TSTATE), out.get("_PyRuntime")) {
        (Some(&(f, size)), Some(&(rt, rt_size))) => code_of(&file, f, size.clamp(16, 64))
            .and_then(|code| tss_key(code, f, rt..rt + rt_size))
            .filter(|k| (rt..rt + rt_size).contains(k)),
        _ => None,
    };
    Ok((out, key))
}

/// The bytes of the code at `svma` in `file`.
fn code_of<'a>(file: &object::File<'a>, svma: u64, len: u64) -> Option<&'a [u8]> {
    use object::ObjectSection;
    file.sections()
        .find_map(|s| s.data_range(svma, len).ok().flatten())
}

/// The key's address from `PyGILState_GetThisThreadState`'s code (at
/// `svma`), `_PyRuntime` being at `runtime`: the int the thread-state TSS
/// keeps its key in, as the code reaches it before the call or jump to
/// `pthread_getspecific`/`PyThread_tss_get` —
/// - loaded: `mov edi, [rip+k]` (3.11, a static build);
/// - passed by address, a `Py_tss_t` whose second int is the key:
///   `lea rdi, [rip+t]`;
/// - through the GOT in a shared libpython: `mov rax, [rip+got]` (the
///   runtime's address), then `lea rbx, [rax+d]` (3.12: the `Py_tss_t` at
///   `_PyRuntime+d`) or `mov edi, [rax+d]`.
///
/// A test of whether the state is set up may come first.
pub fn tss_key(code: &[u8], svma: u64, runtime: std::ops::Range<u64>) -> Option<u64> {
    use iced_x86::{Decoder, DecoderOptions, FlowControl, Mnemonic, OpKind, Register};
    let mut d = Decoder::with_ip(64, code, svma, DecoderOptions::NONE);
    // Registers holding the runtime's address, loaded from the GOT.
    let mut holds_runtime: Vec<Register> = Vec::new();
    for _ in 0..16 {
        if !d.can_decode() {
            break;
        }
        let i = d.decode();
        if i.op_count() == 2 && i.op0_kind() == OpKind::Register && i.op1_kind() == OpKind::Memory {
            let dst = i.op0_register();
            let (lea, load32) = (
                i.mnemonic() == Mnemonic::Lea,
                i.mnemonic() == Mnemonic::Mov && dst.size() == 4,
            );
            if i.is_ip_rel_memory_operand() {
                let at = i.ip_rel_memory_address();
                if runtime.contains(&at) {
                    if load32 {
                        return Some(at);
                    }
                    if lea && dst.size() == 8 {
                        return Some(at + 4);
                    }
                } else if i.mnemonic() == Mnemonic::Mov && dst.size() == 8 {
                    holds_runtime.push(dst.full_register());
                }
            } else if holds_runtime.contains(&i.memory_base().full_register())
                && i.memory_index() == Register::None
            {
                let at = runtime.start.wrapping_add(i.memory_displacement64());
                if load32 {
                    return Some(at);
                }
                if lea && dst.size() == 8 {
                    return Some(at + 4);
                }
            }
        }
        match i.flow_control() {
            FlowControl::Next | FlowControl::ConditionalBranch | FlowControl::Call => {}
            _ => break,
        }
    }
    None
}

/// CPython in the process whose mappings are `maps`, read through `mem`;
/// None when no mapped file exports the eval loop.
pub fn find(maps: &[Mapping], mem: &dyn Memory) -> io::Result<Option<Runtime>> {
    // Only files that can be CPython: python3.X executables and
    // libpython3.X; anything else is not read in full.
    for (m, path) in crate::interp::candidate_files(maps, &["python", "libpython"]) {
        let (syms, key) = exported(&path)?;
        if NEEDED.iter().any(|n| !syms.contains_key(n)) {
            continue;
        }
        let elf = ElfFile::open(&path).map_err(|e| io::Error::other(format!("{e:#}")))?;
        let Some(bias) = elf.bias(m) else { continue };
        let at = |n: &str| syms[n].0.wrapping_add(bias);
        let mut v = [0u8; 4];
        mem.read(at("Py_Version"), &mut v)?;
        let (eval, eval_size) = syms[EVAL];
        return Ok(Some(Runtime {
            path,
            version: u32::from_le_bytes(v),
            runtime: at("_PyRuntime"),
            code_type: at("PyCode_Type"),
            eval: eval.wrapping_add(bias)..eval.wrapping_add(bias) + eval_size,
            eval_svma: eval..eval + eval_size,
            key_addr: key.map(|k| k.wrapping_add(bias)),
        }));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNTIME: std::ops::Range<u64> = 0xa5b740..0xa5b740 + 0x28b20;

    /// Debian's 3.11.2 (objdump of /usr/bin/python3.11): a test of the
    /// runtime's state, its cold branch, the key loaded, the tail jump.
    #[test]
    fn the_key_is_the_load_before_pthread_getspecific() {
        let code = [
            0x48, 0x83, 0x3d, 0x50, 0x3d, 0x56, 0x00, 0x00, // cmpq $0,[rip+0x563d50]
            0x0f, 0x84, 0x1f, 0xc8, 0xf2, 0xff, // je (cold)
            0x8b, 0x3d, 0x50, 0x3d, 0x56, 0x00, // mov edi,[rip+0x563d50]
            0xe9, 0xa7, 0x8a, 0xf2, 0xff, // jmp pthread_getspecific
        ];
        assert_eq!(tss_key(&code, 0x4f7c30, RUNTIME), Some(0xa5b994));
        // lea rdi,[rip+0x100]; jmp: the Py_tss_t's key is its second int.
        let lea = [0x48, 0x8d, 0x3d, 0x00, 0x01, 0x00, 0x00, 0xe9, 0, 0, 0, 0];
        let rt = 0x1000..0x2000;
        assert_eq!(
            tss_key(&lea, 0x1000, rt.clone()),
            Some(0x1000 + 7 + 0x100 + 4)
        );
        // A jump first: nothing found past it.
        let jmp = [0xe9, 0, 0, 0, 0, 0x8b, 0x3d, 0, 0, 0, 0];
        assert_eq!(tss_key(&jmp, 0x1000, rt), None);
    }

    /// pyenv's 3.12.1 libpython (objdump): the runtime's address from the
    /// GOT, the Py_tss_t at +0x608, its key at +0x60c.
    #[test]
    fn the_key_is_found_through_the_got_in_a_shared_libpython() {
        let code = [
            0x48, 0x8b, 0x05, 0xc9, 0xc0, 0x26, 0x00, // mov rax,[rip+0x26c0c9]
            0x53, // push rbx
            0x48, 0x8d, 0x98, 0x08, 0x06, 0x00, 0x00, // lea rbx,[rax+0x608]
            0x48, 0x89, 0xdf, // mov rdi,rbx
            0xe8, 0xd9, 0x21, 0xe3, 0xff, // call PyThread_tss_is_created
        ];
        let rt = 0x643340..0x643340 + 0x704a8;
        assert_eq!(tss_key(&code, 0x2d7c30, rt), Some(0x643340 + 0x60c));
    }
}
