/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CRuby's control frames, read at sample time for processes user space
 * registered in kt_rb_procs (issue 20). A frame's iseq and program counter
 * are read now (the frame is gone once the method returns); what the iseq
 * says (label, file, line table) is read in user space, once per iseq.
 *
 * Per sample: the thread pointer (task->thread.fsbase), its DTV, the
 * block of libruby's thread-locals, the thread's execution context, then
 * per control frame one read of its pc, iseq and ep and, for a Ruby
 * frame, one of its environment's flags. C methods' frames (no pc) are
 * recorded empty and left to user space to pass over: the native stack
 * names them.
 */
#ifndef KT_RUBY_BPF_H
#define KT_RUBY_BPF_H

#include "ruby.h"

_Static_assert(sizeof(struct kt_rb_frame) == sizeof(struct kt_py_frame),
	       "Ruby and Python records take the same place");

/* The bytes of a control frame read at once: pc, sp, iseq, self, ep. */
#define KT_RB_CFP_READ 40
/* glibc x86-64: the DTV is the TCB's second word; 16 bytes per module. */
#define KT_RB_TCB_DTV 8
#define KT_RB_DTV_ENTRY 16

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* tgid */
	__type(value, struct kt_rb_proc);
} kt_rb_procs SEC(".maps");

static __always_inline __u64 rb_field(__u8 *cfp, __u32 off)
{
	if (off > KT_RB_CFP_READ - sizeof(__u64))
		return 0;
	return *(__u64 *)(cfp + off);
}

/* One control frame into records[i], as py_step: 0 to go on, 1 at the
 * stack's end, -1 when a read failed; `*cfp` moves to the caller's. */
static __always_inline int rb_step(struct kt_rb_proc *p, struct kt_rb_frame *records, int i,
				   __u8 *cfp_buf, __u64 *cfp, __u64 end)
{
	struct kt_rb_frame *f;
	__u64 pc, iseq, ep, flags = 0;

	if (*cfp >= end || i < 0 || i >= KT_RB_FRAMES)
		return 1;
	f = &records[i];
	if (bpf_probe_read_user(cfp_buf, KT_RB_CFP_READ, (void *)*cfp) != 0)
		return -1;
	pc = rb_field(cfp_buf, p->cfp_pc);
	iseq = rb_field(cfp_buf, p->cfp_iseq);
	ep = rb_field(cfp_buf, p->cfp_ep);
	/* A C method's frame (no pc) is recorded empty: a record per
	 * control frame keeps the walk straight for the verifier. */
	if (pc && iseq && ep && bpf_probe_read_user(&flags, sizeof(flags), (void *)ep) != 0)
		return -1;
	f->iseq = pc ? iseq : 0;
	f->pc_lo = (__u32)pc;
	f->flags = (__u32)flags;
	*cfp += p->cfp_size;
	return 0;
}

/*
 * Walks the current thread's Ruby frames into `frames` (KT_RB_FRAMES
 * records of 16 bytes), setting s->frames and s->flags; 0 for a
 * process not registered.
 */
static __always_inline int rb_walk(struct kt_interp *s, void *frames, __u8 *cfp_buf)
{
	__u32 tgid = s->tgid;
	struct kt_rb_proc *p = bpf_map_lookup_elem(&kt_rb_procs, &tgid);
	__u64 tp, dtv = 0, block = 0, ec = 0, head[4] = {}, stack, end, cfp;
	__u32 n = 0;
	int i, r = 0;

	if (!p)
		return 0;
	s->flags = KT_PY_WALKED | KT_PY_RUBY;
	tp = BPF_CORE_READ(cur_task(), thread.fsbase);
	if (bpf_probe_read_user(&dtv, sizeof(dtv), (void *)(tp + KT_RB_TCB_DTV)) != 0 || !dtv ||
	    bpf_probe_read_user(&block, sizeof(block),
				(void *)(dtv + p->tls_module * KT_RB_DTV_ENTRY)) != 0)
		goto fault;
	/* A thread that never touched libruby's thread-locals: no block. */
	if (!block || block == (__u64)-1) {
		s->flags |= KT_PY_NO_THREAD;
		return 1;
	}
	if (bpf_probe_read_user(&ec, sizeof(ec), (void *)(block + p->tls_offset)) != 0)
		goto fault;
	if (!ec) {
		s->flags |= KT_PY_NO_THREAD;
		return 1;
	}
	if (p->ec_vm_stack > 16 || p->ec_vm_stack_size > 16 || p->ec_cfp > 16 ||
	    bpf_probe_read_user(head, 3 * sizeof(__u64), (void *)ec) != 0)
		goto fault;
	stack = head[p->ec_vm_stack / 8 & 3];
	end = stack + head[p->ec_vm_stack_size / 8 & 3] * 8 - p->cfp_size;
	cfp = head[p->ec_cfp / 8 & 3];
	if (cfp < stack || cfp > end || !p->cfp_size)
		goto fault;
	/* An open-coded iterator where the kernel has them, as py_walk's. */
	if (kt_cfg_open_iter && bpf_iter_num_new) {
		bpf_for(i, 0, KT_RB_FRAMES) {
			r = rb_step(p, frames, i, cfp_buf, &cfp, end);
			if (r)
				break;
			n = i + 1;
		}
	} else {
		for (i = 0; i < KT_RB_FRAMES; i++) {
			r = rb_step(p, frames, i, cfp_buf, &cfp, end);
			if (r)
				break;
			n = i + 1;
		}
	}
	if (r < 0)
		goto fault;
	if (cfp < end)
		s->flags |= KT_PY_TRUNCATED;
	s->frames = n;
	return 1;
fault:
	s->flags |= KT_PY_FAULT;
	s->frames = n;
	return 1;
}

#endif
