//! Reading the running kernel's BTF for what it offers BPF programs (helpers,
//! map types, kfuncs, tracepoints' arguments, types), and the one probe
//! BTF cannot answer: whether the verifier takes pointer arguments to global
//! functions, asked by loading a two-function program.
//!
//! Why BTF rather than the kernel's version: distributions backport BPF
//! features (RHEL 9's 5.14 has much of 5.19's), and a feature's presence in
//! the kernel's own type information is what libbpf's CO-RE and kfunc
//! resolution go by too.

use std::ffi::{CStr, CString};
use std::path::Path;

use libbpf_rs::libbpf_sys as sys;

const KIND_STRUCT: u32 = 4;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_ENUM64: u32 = 19;

/// A kernel's BTF, parsed by libbpf.
pub struct KernelBtf(*mut sys::btf);

impl Drop for KernelBtf {
    fn drop(&mut self) {
        // SAFETY: a btf btf__parse returned, freed once.
        unsafe { sys::btf__free(self.0) };
    }
}

fn kind(t: &sys::btf_type) -> u32 {
    (t.info >> 24) & 0x1f
}

fn vlen(t: &sys::btf_type) -> usize {
    (t.info & 0xffff) as usize
}

impl KernelBtf {
    /// The BTF at `path` (the kernel's own, or KERNTAX_BTF's), if it parses.
    pub fn open(path: &Path) -> Option<Self> {
        let c = CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: a NUL-terminated path; no BTF.ext is asked for.
        let btf = unsafe { sys::btf__parse(c.as_ptr(), std::ptr::null_mut()) };
        // libbpf returns NULL (errno set) or an error pointer on failure.
        if btf.is_null() || (btf as isize) < 0 && (btf as isize) > -4096 {
            return None;
        }
        Some(KernelBtf(btf))
    }

    fn find(&self, name: &str, kind: u32) -> Option<&sys::btf_type> {
        let c = CString::new(name).ok()?;
        // SAFETY: a valid btf and a NUL-terminated name.
        let id = unsafe { sys::btf__find_by_name_kind(self.0, c.as_ptr(), kind) };
        self.type_by_id(u32::try_from(id).ok()?)
    }

    fn type_by_id(&self, id: u32) -> Option<&sys::btf_type> {
        // SAFETY: libbpf returns NULL for an id out of range; the type lives
        // as long as the btf.
        unsafe { sys::btf__type_by_id(self.0, id).as_ref() }
    }

    fn name(&self, offset: u32) -> &str {
        // SAFETY: libbpf returns a pointer into the btf's string section
        // (NUL-terminated) or NULL.
        unsafe {
            let p = sys::btf__name_by_offset(self.0, offset);
            if p.is_null() {
                ""
            } else {
                CStr::from_ptr(p).to_str().unwrap_or("")
            }
        }
    }

    /// Whether the kernel has a function (a kfunc, or any kernel function
    /// BTF describes) of this name.
    pub fn has_func(&self, name: &str) -> bool {
        self.find(name, KIND_FUNC).is_some()
    }

    pub fn has_struct(&self, name: &str) -> bool {
        self.find(name, KIND_STRUCT).is_some()
    }

    pub fn has_typedef(&self, name: &str) -> bool {
        self.find(name, KIND_TYPEDEF).is_some()
    }

    /// Whether `enum enum_name` has a value named `value` (the kernel's
    /// `enum bpf_func_id` lists every helper it knows, `enum bpf_map_type`
    /// every map type).
    pub fn enum_has(&self, enum_name: &str, value: &str) -> bool {
        let Some(t) = self
            .find(enum_name, KIND_ENUM)
            .or_else(|| self.find(enum_name, KIND_ENUM64))
        else {
            return false;
        };
        // The values follow the type: btf_enum (name, val) or btf_enum64
        // (name, lo, hi); the name comes first in both.
        let stride = if kind(t) == KIND_ENUM64 { 12 } else { 8 };
        let first = (t as *const sys::btf_type).wrapping_add(1) as *const u8;
        (0..vlen(t)).any(|i| {
            // SAFETY: vlen records of `stride` bytes follow the type in
            // libbpf's copy of the BTF.
            let name_off = unsafe { (first.add(i * stride) as *const u32).read_unaligned() };
            self.name(name_off) == value
        })
    }

    /// How many arguments a BTF raw tracepoint hands its programs (the
    /// kernel's `btf_trace_<name>` typedef, less its `void *` first).
    pub fn tracepoint_args(&self, tracepoint: &str) -> Option<usize> {
        let typedef = self.find(&format!("btf_trace_{tracepoint}"), KIND_TYPEDEF)?;
        // SAFETY: the union's both members are a u32 type id here.
        let ptr = self.type_by_id(unsafe { typedef.__bindgen_anon_1.type_ })?;
        let proto = self.type_by_id(unsafe { ptr.__bindgen_anon_1.type_ })?;
        (kind(proto) == KIND_FUNC_PROTO).then(|| vlen(proto).saturating_sub(1))
    }
}

/// Whether the verifier takes a pointer argument to a global function
/// (Linux 5.12+). kerntax's programs pass their samples to global
/// functions, each verified once; a kernel that refuses them gets the
/// object whose functions are static instead. Any failure here answers no:
/// the static object loads everywhere, only more slowly.
pub fn global_functions_take_pointers() -> bool {
    // SAFETY: libbpf's BTF writer and the bpf() syscall with buffers that
    // outlive the calls; every object made here is freed here.
    unsafe {
        let btf = sys::btf__new_empty();
        if btf.is_null() || (btf as isize) < 0 {
            return false;
        }
        let ok = prog_with_global_pointer_arg(btf);
        sys::btf__free(btf);
        ok
    }
}

unsafe fn prog_with_global_pointer_arg(btf: *mut sys::btf) -> bool {
    let c = |s: &str| CString::new(s).unwrap();
    let (int, s, p, a, f, main) = (c("int"), c("s"), c("p"), c("a"), c("f"), c("main"));
    // SAFETY (whole block): `btf` is a valid BTF being written.
    unsafe {
        let int_id = sys::btf__add_int(btf, int.as_ptr(), 4, sys::BTF_INT_SIGNED as i32);
        let struct_id = sys::btf__add_struct(btf, s.as_ptr(), 8);
        if int_id < 0 || struct_id < 0 || sys::btf__add_field(btf, a.as_ptr(), int_id, 0, 0) < 0 {
            return false;
        }
        let ptr_id = sys::btf__add_ptr(btf, struct_id);
        let f_proto = sys::btf__add_func_proto(btf, int_id);
        if ptr_id < 0 || f_proto < 0 || sys::btf__add_func_param(btf, p.as_ptr(), ptr_id) < 0 {
            return false;
        }
        let f_id = sys::btf__add_func(btf, f.as_ptr(), sys::BTF_FUNC_GLOBAL, f_proto);
        let main_proto = sys::btf__add_func_proto(btf, int_id);
        let main_id = sys::btf__add_func(btf, main.as_ptr(), sys::BTF_FUNC_STATIC, main_proto);
        if f_id < 0 || main_id < 0 || sys::btf__load_into_kernel(btf) != 0 {
            return false;
        }
        // main: *(u64 *)(r10 - 8) = 0; r1 = r10 - 8; call f; r0 = 0; exit
        // f:    r0 = 0; exit
        let insns = [
            insn(0x7a, 10, 0, -8, 0), // BPF_ST | BPF_MEM | BPF_DW
            insn(0xbf, 1, 10, 0, 0),  // r1 = r10
            insn(0x07, 1, 0, 0, -8),  // r1 += -8
            insn(0x85, 0, 1, 0, 2),   // call pc+2 (BPF_PSEUDO_CALL)
            insn(0xb7, 0, 0, 0, 0),   // r0 = 0
            insn(0x95, 0, 0, 0, 0),   // exit
            insn(0xb7, 0, 0, 0, 0),
            insn(0x95, 0, 0, 0, 0),
        ];
        let funcs = [
            sys::bpf_func_info {
                insn_off: 0,
                type_id: main_id as u32,
            },
            sys::bpf_func_info {
                insn_off: 6,
                type_id: f_id as u32,
            },
        ];
        let mut opts = sys::bpf_prog_load_opts {
            sz: size_of::<sys::bpf_prog_load_opts>() as _,
            prog_btf_fd: sys::btf__fd(btf) as u32,
            func_info: funcs.as_ptr().cast(),
            func_info_cnt: funcs.len() as u32,
            func_info_rec_size: size_of::<sys::bpf_func_info>() as u32,
            ..Default::default()
        };
        let (name, license) = (c("kt_probe"), c("GPL"));
        let fd = sys::bpf_prog_load(
            sys::BPF_PROG_TYPE_SOCKET_FILTER,
            name.as_ptr(),
            license.as_ptr(),
            insns.as_ptr(),
            insns.len() as _,
            &mut opts,
        );
        if fd < 0 {
            return false;
        }
        libc::close(fd);
        true
    }
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> sys::bpf_insn {
    let mut i = sys::bpf_insn {
        code,
        off,
        imm,
        ..Default::default()
    };
    i.set_dst_reg(dst);
    i.set_src_reg(src);
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's kernel (6.18) has everything the probes look for.
    #[test]
    fn reads_this_kernels_btf() {
        let Some(btf) = KernelBtf::open(Path::new("/sys/kernel/btf/vmlinux")) else {
            return; // no kernel BTF here: nothing to read
        };
        assert!(btf.enum_has("bpf_func_id", "BPF_FUNC_map_lookup_elem"));
        assert!(btf.enum_has("bpf_map_type", "BPF_MAP_TYPE_RINGBUF"));
        assert!(!btf.enum_has("bpf_map_type", "BPF_MAP_TYPE_NO_SUCH_THING"));
        assert!(!btf.enum_has("no_such_enum", "X"));
        assert!(btf.has_struct("task_struct"));
        assert!(!btf.has_struct("no_such_struct"));
        // sched_switch(preempt, prev, next, prev_state) since 5.18.
        assert_eq!(btf.tracepoint_args("sched_switch"), Some(4));
        assert_eq!(btf.tracepoint_args("sys_enter"), Some(2));
        assert_eq!(btf.tracepoint_args("no_such_tracepoint"), None);
        assert!(btf.has_typedef("btf_trace_sched_switch"));
    }

    #[test]
    fn a_file_that_is_no_btf_is_none() {
        assert!(KernelBtf::open(Path::new("/proc/self/status")).is_none());
        assert!(KernelBtf::open(Path::new("/nonexistent/btf")).is_none());
    }
}
