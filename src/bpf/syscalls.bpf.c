// SPDX-License-Identifier: GPL-2.0
/*
 * Exact per-syscall accounting of a process tree, with sampled user stacks.
 *
 * Why BTF raw tracepoints (tp_btf) on sys_enter/sys_exit: they hand the program
 * the user registers without the argument copy of classic tracepoints, which
 * costs less per call. Why task local storage as the "tracked" flag: every
 * syscall of every task on the machine runs these programs, and the storage
 * lookup is the cheapest way to say "not ours" and leave; it also carries the
 * entry timestamp to the exit without a hash map.
 */
#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "syscalls.h"

/*
 * A function reached from many paths that takes pointers: global, so the
 * verifier checks it once on its own rather than once per way of reaching
 * it (kt_sys_exit: 15,481 instructions verified instead of 74,964, and
 * start-up 150 ms shorter on 6.18). Kernels before 5.12 refuse pointer
 * arguments to global functions (and before 5.13 any program holding a
 * callback, even as dead code): for them build.rs compiles this same
 * source with KT_OLD_VERIFIER into a second object, which user space
 * loads instead (collect/features.rs).
 */
#ifdef KT_OLD_VERIFIER
#define KT_GLOBAL static __noinline
#else
#define KT_GLOBAL __noinline
#endif

char LICENSE[] SEC("license") = "GPL";

/* Ring buffer records are only ever reached through pointers, which emit no
 * BTF; these unused globals put them in BTF so the Rust types get generated. */
struct kt_stack_event *kt_btf_stack_event __attribute__((unused));
struct kt_proc_event *kt_btf_proc_event __attribute__((unused));
struct kt_exit_maps_event *kt_btf_exit_maps_event __attribute__((unused));
struct kt_map_change_event *kt_btf_map_change_event __attribute__((unused));

/* The sampling constants, for the report to state (read-only data). */
const volatile __u32 kt_cfg_sample_shift = KT_SAMPLE_SHIFT;
const volatile __u32 kt_cfg_max_period_log2 = KT_MAX_PERIOD_LOG2;
/* kerntax itself: never adopted, even when it is a child of its target. */
const volatile __u32 kt_self_tgid = 0;

extern int bpf_probe_read_user_dynptr(struct bpf_dynptr *dptr, __u32 off, __u32 size,
				      const void *unsafe_ptr) __ksym __weak;
extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma *it, struct task_struct *task,
				 __u64 addr) __ksym __weak;
extern struct vm_area_struct *bpf_iter_task_vma_next(struct bpf_iter_task_vma *it) __ksym __weak;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma *it) __ksym __weak;

#define KT_VM_EXEC 0x4
#define KT_NR_SCHED_YIELD 24

/* The target processes found when tracking starts (the attached process and
 * its children then); later processes are tracked by their task storage. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* memory only for what is used */
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u32);
} kt_tgids SEC(".maps");

/*
 * Threads whose task storage could not be created at fork (the storage lock
 * of that CPU was busy, or memory was short): they get it at their first
 * syscall instead. kt_adopt_pending keeps that check off the hot path.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* memory only for what is used */
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} kt_adopt SEC(".maps");

__u64 kt_adopt_pending;

/* Set by user space for the final snapshot, once the programs are
 * detached: each live thread's pending off-CPU time and wake-ups then go
 * into the maps (sched.bpf.h). */
__u32 kt_flush_pending;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KT_MAX_SYSCALLS);
	__type(key, __u32);
	__type(value, struct kt_syscall_stats);
} kt_syscalls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	/* Allocated as used: preallocating 4,096 per-CPU entries was the
	 * largest part of creating the maps, which the target waits for. */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, struct kt_errno_key);
	__type(value, __u64);
} kt_errnos SEC(".maps");

struct kt_thread_key {
	__u32 tid;
	__u32 _pad;
	__u64 start_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* memory only for what is used */
	__uint(max_entries, 65536);
	__type(key, struct kt_thread_key);
	__type(value, struct kt_thread_record);
} kt_exited SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kt_kernel_loss);
} kt_loss SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kt_sampler);
} kt_samplers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kt_totals);
} kt_totals SEC(".maps");

static __always_inline struct kt_totals *totals(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&kt_totals, &zero);
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, KT_RINGBUF_BYTES);
} kt_events SEC(".maps");

/* Per process, the span of its executable-mapping changes that user space
 * did not get whole and no complete change has covered since; its samples
 * carry it (kt_stack_sample's maps_lost_lo/hi, maps.bpf.h). Preallocated: filled from
 * syscall tracepoints on every kernel. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KT_MAPS_LOST_PROCS);
	__type(key, __u32);
	__type(value, struct kt_maps_lost);
} kt_maps_lost SEC(".maps");
/* One variable in a section of its own: the two objects (KT_OLD_VERIFIER)
 * placed separate globals in .bss in different orders. */
struct kt_maps_lost_state {
	__u32 procs;        /* records in kt_maps_lost: while 0, no lookup */
	__u32 changes_made; /* for kt_cfg_lose_map_changes */
};
struct kt_maps_lost_state kt_maps_lost_state SEC(".data");
/* A fault for tests (KERNTAX_FAULT_LOSE_MAP_CHANGES=N, collect/mod.rs): every
 * Nth change of a process's mappings is lost as to a full ring buffer, and
 * counted so (maps.bpf.h). */
const volatile __u32 kt_cfg_lose_map_changes = 0;

/* One end (`hi`: the end, else the start) of the span of the current
 * process's mappings that its samples do not know (maps.bpf.h), 0 if none.
 * Global, and called for both ends whatever they are: a branch on a lost
 * span inside kt_sample_stack, which the old verifiers check once per path
 * that reaches it, took 5.10's sys_exit past a million instructions. */
__noinline __u64 kt_maps_lost_edge(__u32 hi)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct kt_maps_lost *l;

	if (!kt_maps_lost_state.procs)
		return 0;
	l = bpf_map_lookup_elem(&kt_maps_lost, &tgid);
	if (!l)
		return 0;
	return hi ? l->hi : l->lo;
}

static __always_inline struct kt_kernel_loss *loss(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&kt_loss, &zero);
}

/* Counts one of something dropped (a kt_kernel_loss field). */
#define count_loss(field)                                  \
	do {                                               \
		struct kt_kernel_loss *__l = loss();       \
		if (__l)                                   \
			__l->field++;                      \
	} while (0)

#include "compat.bpf.h"

/*
 * floor(log2(v)), 0 for 0. In 64-bit arithmetic throughout: 6.1's verifier
 * loses a register's upper bounds after a 32-bit OR with a non-constant
 * operand, so a 32-bit result, even checked against a bound, could not
 * index a histogram there ("math between map_value pointer and register
 * with unbounded min value").
 */
static __always_inline __u64 log2_u64(__u64 v)
{
	__u64 r = 0, s;
	s = (v > 0xFFFFFFFFULL) << 5; v >>= s; r |= s;
	s = (v > 0xFFFF) << 4; v >>= s; r |= s;
	s = (v > 0xFF) << 3; v >>= s; r |= s;
	s = (v > 0xF) << 2; v >>= s; r |= s;
	s = (v > 0x3) << 1; v >>= s; r |= s;
	r |= (v >> 1);
	return r;
}

/*
 * One whole page of copy_stack_pages: the `i`th after sp's, `off` bytes
 * from sp. The offset's bound is checked behind a compiler barrier, which
 * clang would otherwise fold away: the verifiers of 5.10 and 6.1 do not
 * relate two registers and saw it reach 16,383. The size is a constant, not
 * the rest of `len`: a size computed from `len` made the verifier track
 * each path's `len` apart, and 5.10 gave up on sys_exit at a million
 * instructions. The bytes past `len` are dropped by the caller.
 */
static __always_inline void copy_stack_page(__u8 *dst, __u64 sp, __u64 len, __u64 off, int i,
					    __u64 *got, __u32 *flags)
{
	asm volatile("" : "+r"(off));
	if (off >= len || off > 4096 * i)
		return;
	if (bpf_probe_read_user(dst + off, 4096, (void *)(sp + off)) == 0)
		*got = off + 4096;
	else
		*flags |= 1U << (KT_SAMPLE_ABSENT_SHIFT + i);
}

/*
 * A page not present in the range (the never-touched gap below a new
 * process's argument strings; the page at sp, as the stack grows into it;
 * the middle of a large frame whose bottom was written first) fails a whole
 * copy: copy page by page instead, the rest of sp's page then whole ones,
 * and mark the pages that failed (KT_SAMPLE_ABSENT_SHIFT) for user space,
 * which never reads them. Returns the bytes up to the end of the last page
 * copied, at most `len`. (What lies past the fourth page, at most 4 KB - 1
 * bytes of the 16 KB, is left out: no verifier could bound its offset.)
 */
static __always_inline __u64 copy_stack_pages(__u8 *dst, __u64 sp, __u64 len, __u32 *flags)
{
	__u64 first = 4096 - (sp & 4095), got = 0;

	_Static_assert(KT_SAMPLE_ABSENT_PAGES == 4 && KT_STACK_BYTES == 4 * 4096,
		       "page 3 (at most 12 KB from sp) and its 4 KB fit in KT_STACK_BYTES");
	asm volatile("" : "+r"(first));
	if (first > 4096)
		return 0;
	if (bpf_probe_read_user(dst, first, (void *)sp) == 0)
		got = first;
	else
		*flags |= 1U << KT_SAMPLE_ABSENT_SHIFT;
	copy_stack_page(dst, sp, len, first, 1, &got, flags);
	copy_stack_page(dst, sp, len, first + 4096, 2, &got, flags);
	copy_stack_page(dst, sp, len, first + 8192, 3, &got, flags);
	return got < len ? got : len;
}

/* Bytes of user stack worth copying from sp: no further than its mapping. */
static __always_inline __u64 stack_span(__u64 sp)
{
	__u64 len = KT_STACK_BYTES, end = vma_end_of(sp);

	if (end > sp && end - sp < len)
		len = end - sp;
	return len;
}

#define KT_NR_EXECVE 59
#define KT_NR_EXECVEAT 322

#define KT_PF_EXITING 0x00000004

#include "python.bpf.h"
#include "ruby.bpf.h"

/*
 * Nothing of the user stack could be copied. That is no loss in do_exit
 * (the thread's user memory is, or is being, torn down) or inside execve
 * (past its point of no return the saved user registers belong to the image
 * being replaced, and unwinding them in the new one would name the wrong
 * code). Anywhere else it is a lost stack. Tested only once a copy failed:
 * a test on every sample made the verifier's work, and start-up, 25 ms
 * longer.
 */
static __always_inline void no_stack(struct kt_stack_sample *s)
{
	if (!BPF_CORE_READ(cur_task(), mm) || (CUR_FIELD(flags) & KT_PF_EXITING) || s->nr == KT_NR_EXECVE ||
	    s->nr == KT_NR_EXECVEAT)
		s->flags |= KT_SAMPLE_NO_USER;
	else
		count_loss(stack_read_failed);
}

/*
 * How a stack sample is submitted: without waking user space, which drains
 * the ring at every timeline probe (100 ms) anyway. A wake-up per sample
 * had kerntax's own thread take a CPU from the target thousands of times a
 * second on a request/response server. Past a quarter full, every record
 * wakes it. (Process events keep the default: they are rare, and a new
 * image's maps are best read at once.)
 */
static __always_inline __u64 sample_wakeup(void)
{
	return bpf_ringbuf_query(&kt_events, BPF_RB_AVAIL_DATA) > KT_RINGBUF_BYTES / 4 ?
		       BPF_RB_FORCE_WAKEUP :
		       BPF_RB_NO_WAKEUP;
}

/*
 * The interpreter's frames of the current thread, for a process user space
 * registered as CPython's or CRuby's (their records take the same place:
 * 16 bytes each, as many): into this CPU's kt_py_scratch; returns the
 * frames walked and, shifted by 16, the KT_PY_* flags (0: not an
 * interpreter). A global function with no pointer argument, so every
 * kernel checks its loops once: inlined into kt_sample_stack, the bounded
 * loops that stand for open-coded iterators before 6.4 were checked once
 * per state that reached them, and sys_exit took 962,767 instructions of
 * 5.10's limit of a million.
 */
__noinline int kt_interp_frames(void)
{
	struct kt_interp in = { .tgid = bpf_get_current_pid_tgid() >> 32 };
	struct kt_py_scratch *sc;
	__u32 zero = 0;

	sc = bpf_map_lookup_elem(&kt_py_scratch, &zero);
	if (!sc)
		return 0;
	if (!rb_walk(&in, sc->frames, sc->frame))
		py_walk(&in, sc->frames, sc->frame);
	return in.frames | ((__u32)in.flags << 16);
}

/*
 * A record as long as the stack (Linux 6.16+: bpf_probe_read_user_dynptr):
 * copies into the ring buffer directly, the interpreter's frames' records
 * between the sample and the stack.
 */
static __always_inline void submit_sized(struct kt_stack_sample *s, __u64 sp, __u32 len,
					  struct kt_py_scratch *sc, __u32 py_bytes)
{
	__u32 off = sizeof(struct kt_stack_sample);
	struct bpf_dynptr ptr;
	__u32 first = 4096 - (sp & 4095);

	if (len > KT_STACK_BYTES)
		len = KT_STACK_BYTES;
	if (bpf_ringbuf_reserve_dynptr(&kt_events, off + py_bytes + len, 0, &ptr) != 0) {
		bpf_ringbuf_discard_dynptr(&ptr, 0);
		count_loss(ringbuf_full);
		return;
	}
	off += py_bytes;
	if (bpf_probe_read_user_dynptr(&ptr, off, len, (void *)sp) != 0) {
		/* As copy_stack_pages, into the record. */
		__u32 at = 0, n = first, got = 0;

		for (int i = 0; i < KT_SAMPLE_ABSENT_PAGES; i++) {
			if (at >= len)
				break;
			if (n > len - at)
				n = len - at;
			if (bpf_probe_read_user_dynptr(&ptr, off + at, n, (void *)(sp + at)) == 0)
				got = at + n;
			else
				s->flags |= 1U << (KT_SAMPLE_ABSENT_SHIFT + i);
			at += n;
			n = 4096;
		}
		len = got;
		if (!got)
			no_stack(s);
	}
	s->stack_len = len;
	bpf_dynptr_write(&ptr, 0, s, sizeof(struct kt_stack_sample), 0);
	if (sc && py_bytes)
		bpf_dynptr_write(&ptr, sizeof(struct kt_stack_sample), sc->frames, py_bytes, 0);
	bpf_ringbuf_submit_dynptr(&ptr, sample_wakeup());
}

/*
 * Copy the registers and top of the user stack so user space can unwind with
 * the binaries' own .eh_frame (libc and -O2 code keep no frame pointers).
 * `s` says what the sample stands for and has the user registers
 * (set_user_regs) and, in stack_len, how many bytes above sp may be
 * copied (sample_stack); this fills in the rest. Global (KT_GLOBAL), so the
 * verifier checks it once per program, not once per way of reaching it
 * (the programs' load time is time the target waits).
 *
 * Where records cannot be cut to size (before 6.16) the record is the
 * fixed kt_stack_event: the sample, room for every interpreter frame, the
 * stack.
 */
KT_GLOBAL int kt_sample_stack(struct kt_stack_sample *s)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kt_stack_event *ev;
	struct kt_py_scratch *sc;
	__u32 zero = 0, py_bytes;
	__u64 sp, len;

	if (!s)
		return 0;
	sp = s->sp;
	len = s->stack_len;

	s->hdr.kind = KT_EV_STACK;
	s->hdr.pid = pid_tgid >> 32;
	s->hdr.tid = (__u32)pid_tgid;
	s->maps_lost_lo = kt_maps_lost_edge(0);
	s->maps_lost_hi = kt_maps_lost_edge(1);
	if (len > KT_STACK_BYTES)
		len = KT_STACK_BYTES;
	/* The interpreter's frames sample_stack walked, in this CPU's scratch. */
	sc = bpf_map_lookup_elem(&kt_py_scratch, &zero);
	py_bytes = s->py_frames * sizeof(struct kt_py_frame);
	if (!sc || py_bytes > sizeof(sc->frames))
		py_bytes = 0;
	if (kt_cfg_sized_records && bpf_probe_read_user_dynptr) {
		submit_sized(s, sp, len, sc, py_bytes);
		return 0;
	}
	ev = bpf_ringbuf_reserve(&kt_events, sizeof(*ev), 0);
	if (!ev) {
		count_loss(ringbuf_full);
		return 0;
	}
	if (sc && py_bytes)
		bpf_probe_read_kernel(ev->frames, sizeof(ev->frames), sc->frames);
	if (bpf_probe_read_user(ev->stack, len, (void *)sp) != 0)
		len = copy_stack_pages(ev->stack, sp, len, &s->flags);
	if (!len)
		no_stack(s);
	s->stack_len = len;
	ev->s = *s;
	bpf_ringbuf_submit(ev, sample_wakeup());
	return 0;
}

/*
 * Samples `s`'s stack: bounded first by its mapping's end, here, in the
 * caller's frame. bpf_find_vma's callback is a call frame: one frame
 * deeper, inside kt_sample_stack, it took the deepest path (sys_exit,
 * sample_exit, kt_sample_stack, the callback) to 544 bytes of stack, over
 * the 512 that 6.1 allows a program's frames together.
 */
static __always_inline void sample_stack(struct kt_stack_sample *s)
{
	int interp = kt_interp_frames();

	s->py_frames = interp & 0xffff;
	s->py_flags = interp >> 16;
	s->stack_len = stack_span(s->sp);
	kt_sample_stack(s);
}

static __always_inline void set_user_regs(struct kt_stack_sample *s, struct pt_regs *regs)
{
	s->ip = regs->ip;
	s->sp = regs->sp;
	s->bp = regs->bp;
}

/* More than half the ring buffer waits for user space. */
static __always_inline bool ringbuf_busy(void)
{
	return bpf_ringbuf_query(&kt_events, BPF_RB_AVAIL_DATA) > (KT_RINGBUF_BYTES / 2);
}

static __always_inline struct kt_sampler *sampler(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&kt_samplers, &zero);
}

/* The gap before the next sample, once `seen` calls have been seen. */
static __always_inline __u32 next_gap(__u64 seen)
{
	__u32 shift, period;

	if (seen < (1ULL << KT_SAMPLE_SHIFT))
		return 0;
	shift = log2_u64(seen) - KT_SAMPLE_SHIFT + 1;
	if (shift > KT_MAX_PERIOD_LOG2)
		shift = KT_MAX_PERIOD_LOG2;
	period = 1U << shift;
	/* Uniform in [period/2, 3*period/2): mean period. */
	return period / 2 + (bpf_get_prandom_u32() & (period - 1));
}

#include "locks.bpf.h"
#include "polls.bpf.h"
#include "trace.bpf.h"
#include "sched.bpf.h"
#include "cpu.bpf.h"
#include "maps.bpf.h"

/*
 * The path a file syscall names, if `nr` is one (x86-64 numbers): the
 * sampled calls of a storm of stat or open calls say which file, bounded
 * by KT_EXTRA_BYTES.
 */
static __always_inline const char *path_arg(struct pt_regs *regs, __u32 nr)
{
	switch (nr) {
	case 2:   /* open */
	case 4:   /* stat */
	case 6:   /* lstat */
	case 21:  /* access */
	case 59:  /* execve */
	case 76:  /* truncate */
	case 80:  /* chdir */
	case 82:  /* rename */
	case 83:  /* mkdir */
	case 84:  /* rmdir */
	case 85:  /* creat */
	case 87:  /* unlink */
	case 89:  /* readlink */
	case 90:  /* chmod */
	case 191: /* getxattr */
	case 192: /* lgetxattr */
		return (const char *)regs->di;
	case 257: /* openat */
	case 262: /* newfstatat */
	case 263: /* unlinkat */
	case 267: /* readlinkat */
	case 269: /* faccessat */
	case 332: /* statx */
	case 437: /* openat2 */
	case 439: /* faccessat2 */
		return (const char *)regs->si;
	}
	return 0;
}

/* Gives the current thread the storage its fork could not. */
static __noinline struct kt_task *adopt_late(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct kt_task *t;

	if (!bpf_map_lookup_elem(&kt_adopt, &tid))
		return 0;
	t = cur_state_create();
	if (t && bpf_map_delete_elem(&kt_adopt, &tid) == 0)
		__sync_fetch_and_add(&kt_adopt_pending, -1);
	return t;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(kt_sys_enter, struct pt_regs *regs, long id)
{
	struct kt_task *t;
	struct kt_syscall_stats *st;
	struct kt_totals *tot;
	__u32 nr = id;
	__u64 seen;

	t = cur_state();
	if (!t && (!kt_adopt_pending || !(t = adopt_late())))
		return 0;
	st = bpf_map_lookup_elem(&kt_syscalls, &nr);
	if (!st) {
		count_loss(syscall_nr_out_of_range);
		t->enter_ns = 0;
		return 0;
	}
	/* Atomic: since Linux 6.13 syscall tracepoints run preemptible, so
	 * another task on this CPU may run this program mid-update. The exact
	 * counters (calls, returns, errors) must never lose one. The count
	 * seen is read apart, for the samplers only: an add that returns the
	 * old value (BPF_FETCH) is refused before 5.12, and a race between
	 * the two at worst moves one sample. */
	seen = st->calls;
	__sync_fetch_and_add(&st->calls, 1);
	tot = totals();
	if (tot)
		__sync_fetch_and_add(&tot->syscalls, 1);
	t->nr = nr;
	t->syscalls++;
	t->lock_op = KT_LOCK_OP_NONE;
	t->early_wake_ns = 0;
	/* read, write, pread64, pwrite64, sendto, recvfrom: length in rdx. */
	t->req_bytes = nr <= 1 || nr == 17 || nr == 18 || nr == 44 || nr == 45 ? regs->dx : 0;
	if (nr == KT_NR_SCHED_YIELD)
		t->yields++;
	if (nr - KT_NR_MMAP <= KT_NR_MUNMAP - KT_NR_MMAP)
		maps_enter(regs, nr);
	/* Lock operations and poll-family calls are sampled at their exit
	 * instead, where what they did is known. */
	if (is_lock_syscall(nr) && lock_enter(regs, t, nr) != KT_LOCK_OP_NONE) {
		/* nothing more at the entry */
	} else if (is_poll_syscall(nr)) {
		poll_enter(regs, t, nr);
	} else if (st->sample_countdown) {
		st->sample_countdown--;
	} else {
		__u64 weight = st->sample_gap + 1 + st->sample_carry;

		st->sample_gap = next_gap(seen + 1);
		st->sample_countdown = st->sample_gap;
		if (ringbuf_busy() && st->samples) {
			/* User space is behind (a burst, or its start): the next
			 * sample stands for these calls too, rather than one
			 * being lost to a full buffer. Never a call's first
			 * sample: a storm whose few samples all fell in busy
			 * moments had no call site at all (tests/any_kernel.rs,
			 * about 1 run in 15), and one sample fits in the half of
			 * the ring still free. */
			st->sample_carry = weight;
			st->samples_deferred++;
		} else {
			struct kt_stack_sample smp = { .nr = nr, .weight = weight, .flags = KT_SAMPLE_CALL };
			const char *path = path_arg(regs, nr);

			st->sample_carry = 0;
			st->samples++;
			if (path && bpf_probe_read_user_str(smp.extra, sizeof(smp.extra), path) > 0)
				smp.flags |= KT_SAMPLE_PATH;
			set_user_regs(&smp, regs);
			sample_stack(&smp);
		}
	}
	t->enter_off_cpu_ns = t->off_cpu_ns;
	t->enter_wakes = t->wakes;
	if (seen >= KT_TIME_ALL && t->lock_op == KT_LOCK_OP_NONE && !is_poll_syscall(nr)) {
		if (st->time_countdown) {
			st->time_countdown--;
			t->enter_ns = KT_ENTER_UNTIMED;
			return 0;
		}
		st->time_countdown = bpf_get_prandom_u32() % (2 * KT_TIME_PERIOD - 1);
	}
	/* Taken last so the sampling above is not billed to the syscall. */
	t->enter_ns = bpf_ktime_get_ns();
	return 0;
}

/*
 * At a syscall's exit: the lock operation it was, if any, and a sample of
 * the sleep inside it (time-weighted: every sleep until a CPU has seen
 * KT_OFF_SAMPLE_ALL, then one whenever KT_OFF_SAMPLE_NS went unsampled).
 * One stack copy serves both.
 */
static __noinline void sample_exit(struct pt_regs *regs, struct kt_task *t, long ret, __u64 d_ns)
{
	struct kt_stack_sample smp = { .nr = t->nr, .ret = ret };
	__u64 slept = t->off_cpu_ns - t->enter_off_cpu_ns;
	struct kt_sampler *sm;

	if (t->lock_op != KT_LOCK_OP_NONE) {
		/* The lock waited on, for an off-CPU sample too (op stays 0
		 * unless the lock's own sampler takes this call). */
		smp.lock.lock = t->lock;
		kt_lock_exit(t, ret, d_ns, &smp);
		t->lock_op = KT_LOCK_OP_NONE;
	} else if (is_poll_syscall(t->nr)) {
		kt_poll_exit(t, ret, d_ns, &smp);
	} else if (t->nr == KT_NR_EPOLL_CTL) {
		epoll_ctl_exit(regs, ret);
	}
	if (slept && (sm = sampler())) {
		sm->off_pending_ns += slept;
		sm->off_pending_count++;
		if (sm->off_seen++ < KT_OFF_SAMPLE_ALL || sm->off_pending_ns >= KT_OFF_SAMPLE_NS) {
			smp.flags |= KT_SAMPLE_OFFCPU;
			smp.off_ns = sm->off_pending_ns;
			smp.off_count = sm->off_pending_count;
			smp.at_ns = bpf_ktime_get_ns();
			sm->off_pending_ns = 0;
			sm->off_pending_count = 0;
			/* The wake-up that ended this call's last sleep, if one did. */
			if (t->wakes != t->enter_wakes)
				smp.waker = t->last_waker;
		}
	}
	if (smp.flags) {
		set_user_regs(&smp, regs);
		sample_stack(&smp);
	}
}

SEC("tp_btf/sys_exit")
int BPF_PROG(kt_sys_exit, struct pt_regs *regs, long ret)
{
	struct kt_syscall_stats *st;
	struct kt_task *t;
	__u64 now, delta_ns;
	__u32 nr;
	__u64 slot;

	t = cur_state();
	if (!t || !t->enter_ns)
		return 0;
	nr = t->nr;
	st = bpf_map_lookup_elem(&kt_syscalls, &nr);
	if (!st) {
		t->enter_ns = 0;
		return 0;
	}
	__sync_fetch_and_add(&st->returns, 1);
	if (t->enter_ns != KT_ENTER_UNTIMED) {
		now = bpf_ktime_get_ns();
		delta_ns = now - t->enter_ns;
		st->timed++;
		st->total_ns += delta_ns;
		if (delta_ns > st->max_ns)
			st->max_ns = delta_ns;
		slot = log2_u64(delta_ns);
		if (slot >= KT_HIST_SLOTS)
			slot = KT_HIST_SLOTS - 1;
		st->hist_log2_ns[slot]++;
	} else {
		delta_ns = 0;
	}
	t->enter_ns = 0;
	/* A wake-up that came before a switch-out which never happened. */
	t->early_wake_ns = 0;
	if (ret > 0)
		st->ret_sum += ret;
	st->req_sum += t->req_bytes;
	if (ret < 0 && ret >= -4095) {
		struct kt_errno_key key = { .nr = nr, .err = -ret };
		__u64 one = 1, *count;

		__sync_fetch_and_add(&st->errors, 1);
		count = bpf_map_lookup_elem(&kt_errnos, &key);
		if (count) {
			__sync_fetch_and_add(count, 1);
		} else if (bpf_map_update_elem(&kt_errnos, &key, &one, BPF_NOEXIST) != 0) {
			/* A racing insert on this CPU is impossible; so this is a full map. */
			count_loss(errno_map_full);
		}
	}
	/* Most calls of a storm: no lock, no poll, no sleep; nothing to sample. */
	if (t->lock_op != KT_LOCK_OP_NONE || is_poll_syscall(nr) || nr == KT_NR_EPOLL_CTL ||
	    t->off_cpu_ns != t->enter_off_cpu_ns)
		sample_exit(regs, t, ret, delta_ns);
	if (nr - KT_NR_MMAP <= KT_NR_MPROTECT - KT_NR_MMAP)
		maps_exit(regs, nr, ret);
	if (kt_maps_lost_state.procs)
		kt_maps_resync();
	return 0;
}

static __always_inline bool task_is_tracked(struct task_struct *task)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);

	return task_state(task) || bpf_map_lookup_elem(&kt_tgids, &tgid);
}

static __always_inline struct kt_proc_event *proc_event(__u32 kind, struct task_struct *task, __u32 ppid)
{
	struct kt_proc_event *ev = bpf_ringbuf_reserve(&kt_events, sizeof(*ev), 0);

	if (!ev) {
		count_loss(ringbuf_full);
		return 0;
	}
	ev->hdr.kind = kind;
	ev->hdr.pid = BPF_CORE_READ(task, tgid);
	ev->hdr.tid = BPF_CORE_READ(task, pid);
	ev->ppid = ppid;
	BPF_CORE_READ_STR_INTO(&ev->comm, task, comm);
	ev->filename[0] = 0;
	return ev;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(kt_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid, one = 1;

	if (!task_is_tracked(parent))
		return 0;
	if (!task_state_create(child)) {
		__u32 tid = child->pid;

		if (bpf_map_update_elem(&kt_adopt, &tid, &one, BPF_ANY) == 0) {
			__sync_fetch_and_add(&kt_adopt_pending, 1);
		} else {
			count_loss(task_storage_failed);
		}
	}
	if (kt_cfg_trace)
		trace_life(KT_TR_NEW, child, parent);
	if (ctgid != ptgid) {
		struct kt_proc_event *ev = proc_event(KT_EV_FORK, child, ptgid);

		if (ev)
			bpf_ringbuf_submit(ev, 0);
	}
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(kt_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct kt_proc_event *ev;

	/* First: a thread's state by id is still under the id it had. */
	task_state_moved(old_pid, p->pid);
	if (!task_is_tracked(p))
		return 0;
	ev = proc_event(KT_EV_EXEC, p, BPF_CORE_READ(p, real_parent, tgid));
	if (!ev)
		return 0;
	bpf_probe_read_kernel_str(ev->filename, sizeof(ev->filename), BPF_CORE_READ(bprm, filename));
	bpf_ringbuf_submit(ev, 0);
	if (kt_map_events_on)
		kt_send_exec_maps();
	return 0;
}

static __always_inline void fill_record(struct kt_thread_record *r, struct task_struct *task,
					const struct kt_task *t)
{
	r->pid = BPF_CORE_READ(task, tgid);
	r->tid = BPF_CORE_READ(task, pid);
	r->ppid = BPF_CORE_READ(task, real_parent, tgid);
	r->exit_code = BPF_CORE_READ(task, exit_code);
	BPF_CORE_READ_STR_INTO(&r->comm, task, comm);
	r->utime_ns = BPF_CORE_READ(task, utime);
	r->stime_ns = BPF_CORE_READ(task, stime);
	r->runtime_ns = BPF_CORE_READ(task, se.sum_exec_runtime);
	r->voluntary_switches = BPF_CORE_READ(task, nvcsw);
	r->involuntary_switches = BPF_CORE_READ(task, nivcsw);
	r->start_ns = BPF_CORE_READ(task, start_time);
	r->yields = t ? t->yields : 0;
	r->syscalls = t ? t->syscalls : 0;
}

/*
 * Sends the mappings of a process as its last thread exits (see
 * kt_exit_maps_event).
 * Needs the exit tracepoint to fire before the memory map is released
 * (Linux 6.17+) and the VMA iterator kfuncs; elsewhere it sends nothing.
 */
static __always_inline void emit_exit_maps(struct task_struct *p, __u32 kind)
{
	struct kt_exit_maps_event *ev;
	struct vm_area_struct *vma;
	__u64 start_brk, brk, prev_end = 0;
	bool prev_file = false;

	if (!kt_cfg_vma_iter || !bpf_iter_task_vma_new || !BPF_CORE_READ(p, mm))
		return;
	ev = bpf_ringbuf_reserve(&kt_events, sizeof(*ev), 0);
	if (!ev) {
		count_loss(ringbuf_full);
		return;
	}
	ev->hdr.kind = kind;
	ev->hdr.pid = p->tgid;
	ev->hdr.tid = p->pid;
	ev->truncated = 0;
	ev->count = 0;
	start_brk = BPF_CORE_READ(p, mm, start_brk);
	brk = BPF_CORE_READ(p, mm, brk);
	bpf_for_each(task_vma, vma, p, 0) {
		struct kt_exit_mapping *m;
		struct file *f = BPF_CORE_READ(vma, vm_file);
		/* The count lives in the event, not a register, so the verifier
		 * sees one loop state instead of one per count. */
		__u32 n = ev->count, flags = 0;
		bool bss = !f && vma->vm_start == prev_end && prev_file;

		prev_end = vma->vm_end;
		prev_file = f != 0;
		if (vma->vm_flags & KT_VM_EXEC)
			flags |= KT_MAPPING_EXEC;
		if (!f && vma->vm_start >= start_brk && vma->vm_end <= brk)
			flags |= KT_MAPPING_HEAP;
		if (!f && !bss && !(flags & KT_MAPPING_HEAP))
			continue;
		if (n >= KT_MAX_EXIT_MAPS) {
			ev->truncated = 1;
			break;
		}
		m = &ev->maps[n];
		m->start = vma->vm_start;
		m->end = vma->vm_end;
		m->offset = (__u64)vma->vm_pgoff << 12;
		m->ino = f ? BPF_CORE_READ(f, f_inode, i_ino) : 0;
		m->dev = f ? BPF_CORE_READ(f, f_inode, i_sb, s_dev) : 0;
		m->flags = flags;
		ev->count = n + 1;
	}
	bpf_ringbuf_submit(ev, 0);
}

/*
 * Before an exec replaces the memory map (Linux 6.10+; not attached where
 * the tracepoint is missing): the old image's mappings, for its samples
 * still waiting for a map. An image replaced before user space had read
 * its map had all its samples lost (tests/faults.rs, fault 1).
 */
SEC("tp_btf/sched_prepare_exec")
int BPF_PROG(kt_prepare_exec, struct task_struct *task, struct linux_binprm *bprm)
{
	if (task_is_tracked(task))
		emit_exit_maps(task, KT_EV_EXEC_MAPS);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(kt_exit, struct task_struct *p)
{
	struct kt_thread_record r = {};
	struct kt_thread_key key = {};
	struct kt_task *t = task_state(p);
	struct kt_totals *tot;

	if (!t) {
		__u32 tid = p->pid;

		/* A thread that was to be adopted late exits before any syscall. */
		if (kt_adopt_pending && bpf_map_delete_elem(&kt_adopt, &tid) == 0)
			__sync_fetch_and_add(&kt_adopt_pending, -1);
		return 0;
	}
	if (BPF_CORE_READ(p, signal, live.counter) == 0) {
		__u32 tgid = p->tgid;

		/* Its pid may be reused by a process that is none of ours. */
		bpf_map_delete_elem(&kt_tgids, &tgid);
		maps_lost_forget(tgid);
		emit_exit_maps(p, KT_EV_EXIT_MAPS);
	}
	if (kt_cfg_trace)
		trace_life(KT_TR_EXIT, p, 0);
	flush_pending(t, p->tgid, p->pid);
	fill_record(&r, p, t);
	r.exited = 1;
	t->exited = 1;
	tot = totals();
	if (tot) {
		__sync_fetch_and_add(&tot->exited_runtime_ns, r.runtime_ns);
		__sync_fetch_and_add(&tot->exited_utime_ns, r.utime_ns);
		__sync_fetch_and_add(&tot->exited_stime_ns, r.stime_ns);
	}
	key.tid = r.tid;
	key.start_ns = r.start_ns;
	if (bpf_map_update_elem(&kt_exited, &key, &r, BPF_ANY) != 0) {
		count_loss(thread_map_full);
	}
	return 0;
}

/*
 * Walks all tasks: adopts the threads of target processes and of processes
 * whose parent is a target process (repeat until no process is added to adopt
 * a whole tree) by giving them task storage, and
 * writes one kt_thread_record per tracked live thread. Run once before the
 * target runs (baseline) and once at the end (live threads' final counters).
 */
SEC("iter/task")
int kt_snapshot(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;
	struct kt_thread_record r = {};
	__u32 tgid, ptgid, one = 1;
	struct kt_task *t;

	if (!task)
		return 0;
	/* Mapping changes can be followed (maps.bpf.h). */
	if ((kt_cfg_vma_iter && bpf_iter_task_vma_new) || kt_cfg_find_vma ||
	    bpf_core_field_exists(struct mm_struct___rb, mm_rb))
		kt_map_events_on = 1;
	tgid = task->tgid;
	if (tgid == kt_self_tgid)
		return 0;
	t = task_state(task);
	if (!t) {
		if (!bpf_map_lookup_elem(&kt_tgids, &tgid)) {
			ptgid = BPF_CORE_READ(task, real_parent, tgid);
			if (!bpf_map_lookup_elem(&kt_tgids, &ptgid))
				return 0;
			bpf_map_update_elem(&kt_tgids, &tgid, &one, BPF_ANY);
		}
		t = task_state_create(task);
		if (!t)
			count_loss(task_storage_failed);
	}
	/* Past its exit hook, it is counted among the exited (its record, the
	 * exited totals) until it is released: a probe that read the totals
	 * and met it here too counted its CPU twice, and the timeline's next
	 * interval, clamped at zero, kept the excess (CI on 5eacc4a: 1.30 s
	 * of CPU in the timeline against 0.86 s). */
	if (t && t->exited)
		return 0;
	if (t && kt_flush_pending)
		flush_pending(t, tgid, task->pid);
	fill_record(&r, task, t);
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}
