/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What differs between the kernels kerntax runs on (Linux 5.10 to the newest),
 * in one place: each difference is a switch in read-only data that user space
 * sets at load from what it probed in the running kernel
 * (src/collect/features.rs), so the verifier drops the branch a kernel cannot
 * take as dead code and every kernel runs the same source. The defaults are
 * the newest kernel's.
 *
 * - Per-thread state: BPF task storage (5.11+), else a hash map keyed by
 *   thread id, filled at fork and by the snapshot, moved at a thread's
 *   exec, emptied at a dead thread's last switch.
 * - The current task: bpf_get_current_task_btf (5.11+) lets its fields be
 *   loaded directly; before, every field is read with CO-RE probe reads.
 * - A user address's mapping: bpf_find_vma (5.17+, and not in the object
 *   for old verifiers, which knows no callbacks), else a walk of the memory
 *   map's VMA red-black tree (which kernels before 6.1 have).
 * - A task's saved user registers: bpf_task_pt_regs (5.15+), else read from
 *   the top of its kernel stack as task_pt_regs() finds them.
 * - Loops over interpreter frames: open-coded iterators (6.4+), else
 *   bounded loops (python.bpf.h, ruby.bpf.h).
 * - Mapping changes and a dying process's mappings need the VMA iterator
 *   (6.7+, maps.bpf.h); stack records cut to size need
 *   bpf_probe_read_user_dynptr (6.16+), else they are of fixed size.
 * - Where sched_switch has no prev_state argument (before 5.18) another
 *   program reads it from the task (sched.bpf.h, kt_switch_legacy).
 *
 * Included by syscalls.bpf.c after syscalls.h and count_loss.
 */
#ifndef KT_COMPAT_BPF_H
#define KT_COMPAT_BPF_H

/* Set by user space at load (collect/features.rs); 1 = the kernel has it.
 * Those of kfuncs are also tested against the kfunc's address, which
 * libbpf sets to 0 where the kernel lacks it. */
const volatile __u32 kt_cfg_task_storage = 1;  /* BPF task storage, 5.11 */
const volatile __u32 kt_cfg_current_btf = 1;   /* bpf_get_current_task_btf, 5.11 */
const volatile __u32 kt_cfg_find_vma = 1;      /* bpf_find_vma, 5.17 (never in KT_OLD_VERIFIER) */
const volatile __u32 kt_cfg_task_pt_regs = 1;  /* bpf_task_pt_regs, 5.15 */
const volatile __u32 kt_cfg_open_iter = 1;     /* bpf_iter_num (bpf_for), 6.4 */
const volatile __u32 kt_cfg_vma_iter = 1;      /* bpf_iter_task_vma, 6.7 */
const volatile __u32 kt_cfg_sized_records = 1; /* bpf_probe_read_user_dynptr, 6.16 */

/*
 * Zeroed values that new map entries start from. Globals, defined here in
 * one place, not static locals: the object built for old kernels
 * (KT_OLD_VERIFIER) must lay out its read-only data as this one does,
 * and static locals are placed in the order functions are emitted.
 */
const struct kt_task kt_zero_task = {};
const struct kt_lock_stats kt_zero_lock_stats = {};
const struct kt_poll_stats kt_zero_poll_stats = {};

/* Per-thread state where task storage is available ... */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct kt_task);
} kt_tasks SEC(".maps");

/* ... and where it is not (not created there), by thread id. Preallocated
 * by user space where a perf event program may not use a map allocated as
 * it goes (before 6.1); its size is the threads kerntax can follow. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, KT_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct kt_task);
} kt_task_map SEC(".maps");

/* The state of `task` (a BTF pointer: a tracepoint's argument, an
 * iterator's task, or the current task where kt_cfg_current_btf), NULL if
 * it is not tracked. */
static __always_inline struct kt_task *task_state(struct task_struct *task)
{
	__u32 tid;

	if (kt_cfg_task_storage)
		return bpf_task_storage_get(&kt_tasks, task, 0, 0);
	tid = BPF_CORE_READ(task, pid);
	return bpf_map_lookup_elem(&kt_task_map, &tid);
}

/* Gives `task` state (zeroed) if it has none; NULL if there is no room. */
static __always_inline struct kt_task *task_state_create(struct task_struct *task)
{
	__u32 tid;

	if (kt_cfg_task_storage)
		return bpf_task_storage_get(&kt_tasks, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	tid = BPF_CORE_READ(task, pid);
	bpf_map_update_elem(&kt_task_map, &tid, &kt_zero_task, BPF_NOEXIST);
	return bpf_map_lookup_elem(&kt_task_map, &tid);
}

/* A thread's state goes with it: task storage by itself, the map's entry
 * at the thread's last switch-out (its id may be reused by a thread kerntax
 * must not follow; the exit tracepoint comes before that switch, which is
 * counted as the thread's storage would have it). */
static __always_inline void task_state_delete(struct task_struct *task)
{
	__u32 tid;

	if (kt_cfg_task_storage)
		return;
	tid = BPF_CORE_READ(task, pid);
	bpf_map_delete_elem(&kt_task_map, &tid);
}

/*
 * An exec by a thread other than its process's leader takes the leader's
 * thread id (de_thread): the map's entry moves with it. Task storage
 * belongs to the task and needs nothing.
 */
static __always_inline void task_state_moved(__u32 old_tid, __u32 new_tid)
{
	struct kt_task *t;

	if (kt_cfg_task_storage || old_tid == new_tid)
		return;
	t = bpf_map_lookup_elem(&kt_task_map, &old_tid);
	if (!t)
		return;
	if (bpf_map_update_elem(&kt_task_map, &new_tid, t, BPF_ANY) != 0)
		count_loss(task_storage_failed);
	bpf_map_delete_elem(&kt_task_map, &old_tid);
}

/* The current task, for BPF_CORE_READ (a plain pointer before 5.11). */
static __always_inline struct task_struct *cur_task(void)
{
	if (kt_cfg_current_btf)
		return bpf_get_current_task_btf();
	return (struct task_struct *)bpf_get_current_task();
}

/* A field of the current task: a direct load where the kernel types the
 * pointer, a probe read before. */
#define CUR_FIELD(field)                                                                 \
	(kt_cfg_current_btf ? bpf_get_current_task_btf()->field :                      \
			      BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), field))

/* The current thread's state, NULL if it is not tracked. */
static __always_inline struct kt_task *cur_state(void)
{
	__u32 tid;

	if (kt_cfg_task_storage)
		return bpf_task_storage_get(&kt_tasks, bpf_get_current_task_btf(), 0, 0);
	tid = (__u32)bpf_get_current_pid_tgid();
	return bpf_map_lookup_elem(&kt_task_map, &tid);
}

static __always_inline struct kt_task *cur_state_create(void)
{
	__u32 tid;

	if (kt_cfg_task_storage)
		return bpf_task_storage_get(&kt_tasks, bpf_get_current_task_btf(), 0,
					    BPF_LOCAL_STORAGE_GET_F_CREATE);
	tid = (__u32)bpf_get_current_pid_tgid();
	bpf_map_update_elem(&kt_task_map, &tid, &kt_zero_task, BPF_NOEXIST);
	return bpf_map_lookup_elem(&kt_task_map, &tid);
}

/* What a lookup of a user address's mapping found. */
struct kt_vma {
	__u64 start;
	__u64 end;
	__u64 pgoff;
	__u64 flags;
	struct file *file;
	__u32 found;
};

/* bpf_find_vma's callbacks. A callback is a function the kernel before
 * 5.13 does not know (it refuses the whole program, dead code or not): the
 * object for old verifiers has none. */
#ifndef KT_OLD_VERIFIER
static long kt_vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct kt_vma *v = data;

	v->start = vma->vm_start;
	v->end = vma->vm_end;
	v->pgoff = vma->vm_pgoff;
	v->flags = vma->vm_flags;
	v->file = BPF_CORE_READ(vma, vm_file);
	v->found = 1;
	return 0;
}

static long kt_vma_end_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	*(__u64 *)data = vma->vm_end;
	return 0;
}
#endif

/* Kernels before 6.1 keep VMAs in a red-black tree (then a maple tree). */
struct rb_node___kt {
	struct rb_node___kt *rb_right;
	struct rb_node___kt *rb_left;
} __attribute__((preserve_access_index));

struct rb_root___kt {
	struct rb_node___kt *rb_node;
} __attribute__((preserve_access_index));

struct mm_struct___rb {
	struct rb_root___kt mm_rb;
} __attribute__((preserve_access_index));

struct vm_area_struct___rb {
	unsigned long vm_start;
	unsigned long vm_end;
	unsigned long vm_pgoff;
	unsigned long vm_flags;
	struct file *vm_file;
	struct rb_node___kt vm_rb;
} __attribute__((preserve_access_index));

/* Tree depth walked: a red-black tree of n nodes is at most 2 log2(n + 1)
 * deep, 40 for half a million mappings. */
#define KT_VMA_TREE_DEPTH 40

/*
 * The VMA of the current process that holds `addr` (its address; 0: none),
 * walked without the memory map's lock where there is no bpf_find_vma, as
 * a sampling profiler reads it: a mapping changing under the walk may be
 * missed (not found), never followed outside kernel memory (probe reads).
 * A global function of scalars, so its loop is checked once on every
 * kernel (5.10 knows no others); on kernels with a maple tree (6.1+) it
 * returns at once.
 */
__noinline __u64 kt_vma_tree_find(__u64 addr)
{
	struct mm_struct___rb *mm;
	struct rb_node___kt *node;

	if (!bpf_core_field_exists(struct mm_struct___rb, mm_rb))
		return 0;
	mm = (void *)BPF_CORE_READ(cur_task(), mm);
	if (!mm)
		return 0;
	node = BPF_CORE_READ(mm, mm_rb.rb_node);
	for (int i = 0; i < KT_VMA_TREE_DEPTH && node; i++) {
		struct vm_area_struct___rb *vma =
			(void *)node - bpf_core_field_offset(struct vm_area_struct___rb, vm_rb);

		if (addr < BPF_CORE_READ(vma, vm_start))
			node = BPF_CORE_READ(node, rb_left);
		else if (addr >= BPF_CORE_READ(vma, vm_end))
			node = BPF_CORE_READ(node, rb_right);
		else
			return (__u64)vma;
	}
	return 0;
}

static __always_inline struct vm_area_struct___rb *vma_tree_find(__u64 addr)
{
	return (void *)kt_vma_tree_find(addr);
}

/* The mapping of the current process that holds `addr`. */
static __always_inline bool vma_of(__u64 addr, struct kt_vma *v)
{
	struct vm_area_struct___rb *vma;

	v->found = 0;
#ifndef KT_OLD_VERIFIER
	if (kt_cfg_find_vma) {
		bpf_find_vma(bpf_get_current_task_btf(), addr, kt_vma_cb, v, 0);
		return v->found;
	}
#endif
	vma = vma_tree_find(addr);
	if (!vma)
		return false;
	v->start = BPF_CORE_READ(vma, vm_start);
	v->end = BPF_CORE_READ(vma, vm_end);
	v->pgoff = BPF_CORE_READ(vma, vm_pgoff);
	v->flags = BPF_CORE_READ(vma, vm_flags);
	v->file = BPF_CORE_READ(vma, vm_file);
	v->found = 1;
	return true;
}

#define KT_EBUSY 16

/* vma_of, telling a memory map that was busy (-1: bpf_find_vma takes its
 * lock with trylock) from one without a mapping at `addr` (0); 1: found. */
static __always_inline int vma_lookup(__u64 addr, struct kt_vma *v)
{
	v->found = 0;
#ifndef KT_OLD_VERIFIER
	if (kt_cfg_find_vma) {
		long r = bpf_find_vma(bpf_get_current_task_btf(), addr, kt_vma_cb, v, 0);

		return r == -KT_EBUSY ? -1 : (int)v->found;
	}
#endif
	return vma_of(addr, v) ? 1 : 0;
}

/* Where the mapping holding `addr` ends (0: none found). A callback of its
 * own, with one word on the stack: the stack-sampling path is deep (a
 * program, its sampler, kt_sample_stack, the callback), and 6.1 counts the
 * callback's frame against the 512 bytes all of them share. */
static __always_inline __u64 vma_end_of(__u64 addr)
{
	struct vm_area_struct___rb *vma;

#ifndef KT_OLD_VERIFIER
	if (kt_cfg_find_vma) {
		__u64 end = 0;

		bpf_find_vma(bpf_get_current_task_btf(), addr, kt_vma_end_cb, &end, 0);
		return end;
	}
#endif
	vma = vma_tree_find(addr);
	return vma ? BPF_CORE_READ(vma, vm_end) : 0;
}

/* x86-64's kernel stack (THREAD_SIZE: 4 pages, without KASAN, as every
 * distribution kernel is built); its saved user registers end it. */
#define KT_THREAD_SIZE 16384

/* The user registers `task` entered the kernel with (the current task). */
static __always_inline void set_task_user_regs(struct kt_stack_sample *s, struct task_struct *task)
{
	struct pt_regs *regs;

	if (kt_cfg_task_pt_regs) {
		regs = (struct pt_regs *)bpf_task_pt_regs(task);
		s->ip = regs->ip;
		s->sp = regs->sp;
		s->bp = regs->bp;
		return;
	}
	regs = (void *)BPF_CORE_READ(task, stack) + KT_THREAD_SIZE - bpf_core_type_size(struct pt_regs);
	s->ip = BPF_CORE_READ(regs, ip);
	s->sp = BPF_CORE_READ(regs, sp);
	s->bp = BPF_CORE_READ(regs, bp);
}

/*
 * Where a task came off the CPU in a state other than running: sched_switch
 * passes prev_state since 5.18; before, it is read from the task (renamed
 * __state in 5.14).
 */
struct task_struct___old {
	long state;
} __attribute__((preserve_access_index));

static __always_inline unsigned int task_run_state(struct task_struct *p)
{
	if (bpf_core_field_exists(p->__state))
		return BPF_CORE_READ(p, __state);
	return BPF_CORE_READ((struct task_struct___old *)p, state);
}

#endif
