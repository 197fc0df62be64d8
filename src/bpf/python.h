/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CPython frames at sample time (issue 20), shared by python.bpf.h and the
 * Rust side (src/interp/python/walk.rs fills kt_py_proc; the records come
 * back in every stack sample of the process).
 */
#ifndef KT_PYTHON_H
#define KT_PYTHON_H

/* Python frames recorded per sample, innermost first; deeper is cut. */
#define KT_PY_FRAMES 32

/*
 * Where one process's CPython keeps a thread's frames, found in user space
 * when the process is first seen: the thread-state key's address, glibc's
 * thread-specific slot for it, and the offsets of this minor version.
 */
struct kt_py_proc {
	__u64 key_addr;        /* the int key of the interpreter's thread-state TSS */
	__u32 tsd_offset;      /* from the thread pointer to key 0's value */
	__u32 tsd_stride;      /* bytes per key */
	__u16 tstate_cframe;   /* PyThreadState -> _PyCFrame * */
	__u16 cframe_frame;    /* _PyCFrame -> current _PyInterpreterFrame * */
	__u16 frame_code;      /* _PyInterpreterFrame -> f_code */
	__u16 frame_previous;  /* -> previous frame */
	__u16 frame_instr;     /* -> prev_instr */
	__u16 frame_entry;     /* -> is_entry (a byte) */
	__u16 frame_owner;     /* -> owner (a byte) */
	__u16 code_units;      /* the code object's header: instructions start here */
};

/* One Python frame: its code object, the instruction it last ran. */
struct kt_py_frame {
	__u64 code;
	__s32 lasti;           /* code units from the first instruction; -1: none yet */
	__u8 entry;            /* the byte at frame_entry */
	__u8 owner;            /* the byte at frame_owner */
	__u16 _pad;
};

/* kt_stack_sample.py_flags */
#define KT_PY_WALKED 1     /* the process is Python and its chain was read */
#define KT_PY_NO_THREAD 2  /* the thread has no thread state (not Python's) */
#define KT_PY_FAULT 4      /* a read failed midway (frames kept up to there) */
#define KT_PY_TRUNCATED 8  /* deeper than KT_PY_FRAMES */
#define KT_PY_RUBY 16      /* the records are CRuby's (struct kt_rb_frame, ruby.h) */

#endif
