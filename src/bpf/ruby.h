/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CRuby frames at sample time (issue 20), shared by ruby.bpf.h and the
 * Rust side (src/interp/ruby/frames.rs fills kt_rb_proc; the records come
 * back in every stack sample of the process, where a CPython's would, with
 * KT_PY_RUBY set in py_flags).
 */
#ifndef KT_RUBY_H
#define KT_RUBY_H

/* Control frames recorded per sample, innermost first (C methods' among
 * them, empty); deeper is cut. */
#define KT_RB_FRAMES 32

/*
 * Where one process's CRuby keeps a thread's frames, found in user space:
 * the thread-local ruby_current_ec as the dynamic loader placed it (its
 * module's id in the thread's DTV, its offset in the module's block) and
 * the offsets of this minor version.
 */
struct kt_rb_proc {
	__u64 tls_module;
	__u64 tls_offset;
	__u16 ec_vm_stack;      /* rb_execution_context_t -> vm_stack */
	__u16 ec_vm_stack_size; /* -> vm_stack_size (VALUEs) */
	__u16 ec_cfp;           /* -> cfp, the current control frame */
	__u16 cfp_size;         /* bytes per control frame */
	__u16 cfp_pc;
	__u16 cfp_iseq;
	__u16 cfp_ep;
	__u16 _pad;
};

/* One Ruby frame: its iseq, the low half of its pc (its iseq's code is
 * under 4 GiB, so user space restores the rest from where the code
 * starts), the low half of its environment's flags (type, FINISH). */
struct kt_rb_frame {
	__u64 iseq;
	__u32 pc_lo;
	__u32 flags;
};

#endif
