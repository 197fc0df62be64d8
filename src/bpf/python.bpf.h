/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CPython's frame chain, read at sample time for processes user space
 * registered in kt_py_procs (issue 20). A 3.11/3.12 frame lives in a
 * per-thread chunk of heap that the next call reuses, not on the C stack
 * the sample copies, so it must be read now; what the frame points to (the
 * code object: names, file, line table) lives long and is read in user
 * space, once per code object.
 *
 * Per sample: the thread pointer (task->thread.fsbase), the key of the
 * interpreter's thread-state TSS, glibc's slot for it, the thread state,
 * its current frame; then per frame one read of KT_PY_FRAME_READ bytes,
 * recording the code object, the instruction it last ran and the two
 * bytes that tell where a C call entered the interpreter.
 */
#ifndef KT_PYTHON_BPF_H
#define KT_PYTHON_BPF_H

#include "python.h"

/* The bytes of a frame read at once: every field walked, 3.11 and 3.12. */
#define KT_PY_FRAME_READ 80
/* glibc keeps keys below this in the thread descriptor itself. */
#define KT_PY_TSD_KEYS 32

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* tgid */
	__type(value, struct kt_py_proc);
} kt_py_procs SEC(".maps");

/* A walk of an interpreter's frames: whose, and what it found (the
 * sample's py_frames and py_flags). */
struct kt_interp {
	__u32 tgid;
	__u16 frames;
	__u16 flags;
};

struct kt_py_scratch {
	struct kt_py_frame frames[KT_PY_FRAMES];
	__u8 frame[KT_PY_FRAME_READ];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kt_py_scratch);
} kt_py_scratch SEC(".maps");

/* A field of the frame just read, at an offset user space gave (0 when
 * outside what was read). */
static __always_inline __u64 py_field(__u8 *frame, __u32 off)
{
	if (off > KT_PY_FRAME_READ - sizeof(__u64))
		return 0;
	return *(__u64 *)(frame + off);
}

static __always_inline __u8 py_byte(__u8 *frame, __u32 off)
{
	if (off > KT_PY_FRAME_READ - 1)
		return 0;
	return frame[off];
}

/* One frame of the walk into records[i]: 0 to go on, 1 at the chain's
 * end, -1 when a read failed. `*frame` moves to the previous frame. */
static __always_inline int py_step(struct kt_py_proc *p, struct kt_py_frame *records, int i,
				   __u8 *buf, __u64 *frame)
{
	struct kt_py_frame *f;
	__u64 code, instr;

	if (!*frame)
		return 1;
	if (i < 0 || i >= KT_PY_FRAMES)
		return 1;
	f = &records[i];
	if (bpf_probe_read_user(buf, KT_PY_FRAME_READ, (void *)*frame) != 0)
		return -1;
	code = py_field(buf, p->frame_code);
	instr = py_field(buf, p->frame_instr);
	f->code = code;
	/* Signed: a frame that has run nothing points one unit before. */
	f->lasti = (__s32)((__s64)(instr - code - p->code_units) >> 1);
	f->entry = py_byte(buf, p->frame_entry);
	f->owner = py_byte(buf, p->frame_owner);
	f->_pad = 0;
	*frame = py_field(buf, p->frame_previous);
	return 0;
}

/*
 * Walks the current thread's Python frames into `records` (KT_PY_FRAMES of
 * them), setting s->frames and s->flags; nothing for a process not
 * registered. `buf` holds one frame as read.
 */
static __always_inline void py_walk(struct kt_interp *s, struct kt_py_frame *records, __u8 *buf)
{
	__u32 tgid = s->tgid;
	struct kt_py_proc *p = bpf_map_lookup_elem(&kt_py_procs, &tgid);
	__u64 tp, tstate = 0, cframe = 0, frame = 0;
	__s32 key;
	__u32 n = 0;
	int i, r = 0;

	if (!p)
		return;
	s->flags = KT_PY_WALKED;
	tp = BPF_CORE_READ(cur_task(), thread.fsbase);
	if (bpf_probe_read_user(&key, sizeof(key), (void *)p->key_addr) != 0)
		goto fault;
	if (key < 0 || key >= KT_PY_TSD_KEYS) {
		s->flags |= KT_PY_NO_THREAD;
		return;
	}
	if (bpf_probe_read_user(&tstate, sizeof(tstate),
				(void *)(tp + p->tsd_offset + (__u64)key * p->tsd_stride)) != 0)
		goto fault;
	if (!tstate) {
		s->flags |= KT_PY_NO_THREAD;
		return;
	}
	if (bpf_probe_read_user(&cframe, sizeof(cframe), (void *)(tstate + p->tstate_cframe)) != 0 ||
	    !cframe || bpf_probe_read_user(&frame, sizeof(frame), (void *)(cframe + p->cframe_frame)) != 0)
		goto fault;
	/* An open-coded iterator where the kernel has them (6.4+): the
	 * verifier walks its body until its states repeat, not once per frame
	 * (load time: issue 21). Before, a bounded loop, walked per frame. */
	if (kt_cfg_open_iter && bpf_iter_num_new) {
		bpf_for(i, 0, KT_PY_FRAMES) {
			r = py_step(p, records, i, buf, &frame);
			if (r)
				break;
			n = i + 1;
		}
	} else {
		for (i = 0; i < KT_PY_FRAMES; i++) {
			r = py_step(p, records, i, buf, &frame);
			if (r)
				break;
			n = i + 1;
		}
	}
	if (r < 0)
		goto fault;
	if (frame)
		s->flags |= KT_PY_TRUNCATED;
	s->frames = n;
	return;
fault:
	s->flags |= KT_PY_FAULT;
	s->frames = n;
}

#endif
