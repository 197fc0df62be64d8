//! Where CRuby keeps a thread's frames and what they point at, per minor
//! version: offsets of `rb_execution_context_t`, `rb_control_frame_t`,
//! `rb_iseq_t` and its constant body, and of the string and array objects
//! an iseq's location is made of. Checked against Debian's 3.1.2 build
//! (a child that read its own frames through Fiddle, and
//! tests/ruby_frames.rs against `caller_locations`); the walk validates
//! what it reads (an iseq must be an imemo of the iseq type) rather than
//! trust an offset.

/// The layout of one minor version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// `rb_execution_context_t`: `vm_stack`, `vm_stack_size` (in VALUEs),
    /// `cfp` (the current control frame).
    pub ec_vm_stack: u64,
    pub ec_vm_stack_size: u64,
    pub ec_cfp: u64,
    /// `rb_control_frame_t`: its size (frames are an array that grows down
    /// from the end of the VM stack), `pc`, `iseq`, `ep`.
    pub cfp_size: u64,
    pub cfp_pc: usize,
    pub cfp_iseq: usize,
    pub cfp_ep: usize,
    /// `rb_iseq_t.body`.
    pub iseq_body: u64,
    /// `rb_iseq_constant_body`: `type`, `iseq_encoded`, `location`
    /// (`pathobj`, `base_label`, `label`, `first_lineno`), `insns_info`
    /// (`body`, `positions`, `size`, `succ_index_table`).
    pub body_type: usize,
    pub body_size: usize,
    pub body_encoded: usize,
    pub body_pathobj: usize,
    pub body_label: usize,
    pub body_first_lineno: usize,
    pub body_insns_info: usize,
    pub body_insns_positions: usize,
    pub body_insns_size: usize,
    pub body_succ_table: usize,
    /// Bytes of the body read at once (every field above).
    pub body_read: usize,
    /// `iseq_insn_info_entry`: its size, `line_no` at 0.
    pub insn_info_entry: u64,
}

/// CRuby 3.1.
pub const RUBY_3_1: Layout = Layout {
    ec_vm_stack: 0,
    ec_vm_stack_size: 8,
    ec_cfp: 16,
    // pc, sp, iseq, self, ep, block_code, __bp__, jit_return.
    cfp_size: 64,
    cfp_pc: 0,
    cfp_iseq: 16,
    cfp_ep: 32,
    iseq_body: 16,
    body_type: 0,
    body_size: 4,
    body_encoded: 8,
    body_pathobj: 64,
    body_label: 80,
    body_first_lineno: 88,
    body_insns_info: 120,
    body_insns_positions: 128,
    body_insns_size: 136,
    body_succ_table: 144,
    body_read: 152,
    insn_info_entry: 12,
};

/// The layout of Ruby `major.minor`; None when not supported.
pub fn for_version(major: u32, minor: u32) -> Option<Layout> {
    match (major, minor) {
        (3, 1) => Some(RUBY_3_1),
        _ => None,
    }
}

/// `RBasic.flags`: the type in the low 5 bits; an imemo's own type in the
/// 4 bits at `FL_USHIFT` (12).
pub const T_MASK: u64 = 0x1f;
pub const T_STRING: u64 = 0x05;
pub const T_ARRAY: u64 = 0x07;
pub const T_IMEMO: u64 = 0x1a;
pub const IMEMO_SHIFT: u64 = 12;
pub const IMEMO_MASK: u64 = 0x0f;
pub const IMEMO_ISEQ: u64 = 7;
/// `FL_USER1`: a string's NOEMBED flag, an array's EMBED flag.
pub const FL_USER1: u64 = 1 << 13;
/// An embedded string's length: 5 bits from `FL_USHIFT + 2`.
pub const STR_EMBED_LEN_SHIFT: u64 = 14;
pub const STR_EMBED_LEN_MASK: u64 = 0x1f;
/// An embedded array's length: 2 bits from `FL_USHIFT + 3`.
pub const ARY_EMBED_LEN_SHIFT: u64 = 15;
pub const ARY_EMBED_LEN_MASK: u64 = 0x3;
/// `RString`: embedded bytes at 16; else `len` at 16, `ptr` at 24.
pub const STR_EMBED: u64 = 16;
pub const STR_HEAP_LEN: u64 = 16;
pub const STR_HEAP_PTR: u64 = 24;
/// `RArray`: embedded elements at 16; else `len` at 16, `ptr` at 32.
pub const ARY_EMBED: u64 = 16;
pub const ARY_HEAP_LEN: u64 = 16;
pub const ARY_HEAP_PTR: u64 = 32;
/// `ep[0]`'s flags: the frame's magic (type) in the bits of
/// `VM_FRAME_MAGIC_MASK`, and `VM_FRAME_FLAG_FINISH`: the frame returns
/// from its `rb_vm_exec` activation (the outermost of a run).
pub const FRAME_MAGIC_MASK: u64 = 0x7fff_0001;
pub const FRAME_MAGIC_CFUNC: u64 = 0x5555_0001;
pub const FRAME_FLAG_FINISH: u64 = 0x0020;
