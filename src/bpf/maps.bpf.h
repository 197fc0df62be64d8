/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Changes of a tracked process's executable file mappings, streamed in ring
 * order with the stack samples (struct kt_map_change_event).
 *
 * Why: user space reads /proc/PID/maps when it unwinds a batch of samples,
 * up to 100 ms after they were taken. A library dlclose'd and another
 * dlopen'ed at its address in between had every sample of the first named
 * in the second (tests/faults.rs). perf solves this with its MMAP records;
 * these are the same, limited to what unwinding needs: executable mappings
 * of files. Anonymous executable memory (JIT code) is named by address from
 * perf maps and read from /proc as before.
 *
 * Cost: one compare on every other syscall (mmap, mprotect and munmap are
 * numbers 9 to 11); on those, a walk of the VMAs in the range (under the
 * memory map's read lock, taken with trylock: a busy map is counted in
 * map_changes_unread and user space falls back to /proc).
 *
 * Before the VMA iterator (6.7) the walk looks the mappings up one at a
 * time (vma_lookup: bpf_find_vma from 5.17, the VMA tree before), from the
 * range's start while they are contiguous, at most KT_WALK_VMAS of them:
 * what a mapping call makes or changes is contiguous (mmap's one mapping,
 * mprotect's range, which must be all mapped); a munmap'd range that
 * begins in a hole is taken as holding no file code. Without it a
 * short-lived process whose map user space never got to read lost the
 * names of its libraries (6.1 and 6.12 in issue 35's kernel matrix).
 *
 * At exec the new image's code (the program's and the dynamic loader's,
 * which are mapped before it runs) is sent the same way (kt_send_exec_maps).
 *
 * Included by syscalls.bpf.c after the ring buffer, count_loss and the VMA
 * iterator kfuncs.
 */

#define KT_NR_MMAP 9
#define KT_NR_MPROTECT 10
#define KT_NR_MUNMAP 11
#define KT_PROT_EXEC 0x4
#define KT_MAP_FIXED 0x10
#define KT_PAGE_MASK 4095ULL

/* Set once the snapshot iterator has run where the VMA iterator exists:
 * user space then trusts the changes over a later read of /proc. */
__u32 kt_map_events_on;

/* The page range of a call's (addr, len): false if it is empty or wraps. */
static __always_inline bool change_range(__u64 addr, __u64 len, __u64 *start, __u64 *end)
{
	__u64 s = addr & ~KT_PAGE_MASK;
	__u64 e = (addr + len + KT_PAGE_MASK) & ~KT_PAGE_MASK;

	if (!len || e <= s)
		return false;
	*start = s;
	*end = e;
	return true;
}

static __always_inline bool exec_file_vma(struct vm_area_struct *vma)
{
	return (vma->vm_flags & KT_VM_EXEC) && BPF_CORE_READ(vma, vm_file);
}

/* Mappings looked up one by one where there is no VMA iterator, up to
 * KT_WALK_VMAS of them. The walks are unrolled by hand (clang declines to
 * unroll them for the object for old verifiers): compiled as loops, their
 * latch may be a call or a callback's address falling through into the
 * loop's head, an edge the verifiers of 5.10 and 6.1 refuse ("back-edge
 * from insn"). */
#define KT_WALK_VMAS 8
_Static_assert((KT_MAX_CHANGED_MAPS & (KT_MAX_CHANGED_MAPS - 1)) == 0,
	       "a mapping's slot is masked to KT_MAX_CHANGED_MAPS");
#define KT_WALK_ON 2
#define KT_TIMES_8(x) x x x x x x x x

/* One mapping of exec_file_map_walked: KT_WALK_ON to go on to the next. */
static __always_inline int exec_file_step(__u64 *addr, __u64 end)
{
	struct kt_vma v;
	int r;

	if (*addr >= end)
		return 0;
	r = vma_lookup(*addr, &v);
	if (r <= 0)
		return r;
	if ((v.flags & KT_VM_EXEC) && v.file)
		return 1;
	*addr = v.end;
	return KT_WALK_ON;
}

/* kt_exec_file_map_in by lookups: -1 a busy map, 0 none found (a hole
 * ends the walk). */
static __always_inline int exec_file_map_walked(__u64 start, __u64 end)
{
	__u64 addr = start;
	int r;

	KT_TIMES_8(r = exec_file_step(&addr, end); if (r != KT_WALK_ON) return r;)
	return 0;
}

/*
 * Whether [start, end) of the current process holds an executable file
 * mapping: 1 yes, 0 no, -1 the memory map could not be read.
 *
 * This and kt_send_map_change are global functions: the verifier checks
 * each once on its own. Inlined into sys_exit, whose many paths each
 * carried them, the VMA and path loops took it from ~8,000 instructions
 * verified to 229,608, and kerntax's start-up from ~100 to ~410 ms.
 */
__attribute__((noinline)) int kt_exec_file_map_in(__u64 start, __u64 end)
{
	struct bpf_iter_task_vma it;
	struct vm_area_struct *vma;
	int found = 0;

	/* First: before 6.7 all that follows is dead code, its calls unknown
	 * to the kernel (and before 5.11 bpf_get_current_task_btf too). */
	if (!kt_cfg_vma_iter || !bpf_iter_task_vma_new)
		return exec_file_map_walked(start, end);
	if (bpf_iter_task_vma_new(&it, bpf_get_current_task_btf(), start) != 0) {
		bpf_iter_task_vma_destroy(&it);
		return -1;
	}
	while ((vma = bpf_iter_task_vma_next(&it))) {
		if (vma->vm_start >= end)
			break;
		if (exec_file_vma(vma)) {
			found = 1;
			break;
		}
	}
	bpf_iter_task_vma_destroy(&it);
	return found;
}

/*
 * The path of `f` as its names from the file up to the root, crossing mounts
 * as d_path does (bpf_d_path is not offered to tracepoints). Without d_path's
 * locks a rename racing this may give a mixed name: user space checks the
 * file it names by device and inode before taking it.
 */
static __always_inline void file_path_parts(struct kt_map_change_event *ev, __u64 file)
{
	struct file *f = (void *)file;
	struct dentry *d = BPF_CORE_READ(f, f_path.dentry);
	__u64 off = bpf_core_field_offset(struct mount, mnt);
	struct mount *mnt = (void *)((__u64)BPF_CORE_READ(f, f_path.mnt) - off);
	int i;

	ev->path_parts = 0;
	/* A step per name, and some to cross mounts. */
	for (i = 0; i < KT_PATH_PARTS + 8; i++) {
		struct dentry *parent = BPF_CORE_READ(d, d_parent);
		__u32 n = ev->path_parts;

		if (d == BPF_CORE_READ(mnt, mnt.mnt_root) || d == parent) {
			struct mount *up = BPF_CORE_READ(mnt, mnt_parent);

			if (up == mnt)
				return; /* the root */
			d = BPF_CORE_READ(mnt, mnt_mountpoint);
			mnt = up;
			continue;
		}
		if (n >= KT_PATH_PARTS)
			break;
		bpf_probe_read_kernel_str(&ev->path[n * KT_PATH_PART_BYTES], KT_PATH_PART_BYTES,
					  BPF_CORE_READ(d, d_name.name));
		ev->path_parts = n + 1;
		d = parent;
	}
	ev->flags |= KT_CHANGE_PATH_CUT;
}

/*
 * A change that user space will not get whole: the ring buffer was full, or
 * the memory map busy, or too many mappings for one event. The process's
 * samples say so (their record's maps_lost_lo/hi, the span of what was
 * lost) and user space names none of their frames there, until the ranges
 * lost are sent again whole (kt_maps_resync, at the process's next system
 * call) or a complete change covers them. Without this, the frames of a
 * library whose loading was lost were named from a later read of /proc, by
 * then maybe another library at its address (tests/faults.rs, once in CI
 * on 6.12).
 *
 * The kt_send_* functions only say how it went (KT_SENT_*); their callers
 * note it: a branch on it inside the lookup walk was taken once per way
 * out of the walk, and 5.10's sys_exit went past a million instructions.
 */
#define KT_SENT_WHOLE 0
#define KT_SENT_PART 1 /* sent, its mappings unread or too many */
#define KT_SENT_LOST 2 /* not sent: the ring buffer full */

static __always_inline void maps_lost(__u64 start, __u64 end)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct kt_maps_lost *l = bpf_map_lookup_elem(&kt_maps_lost, &tgid);
	struct kt_maps_lost n = { .lo = start, .hi = end, .n = 1 };
	__u32 i;

	if (!l) {
		n.ranges[0].start = start;
		n.ranges[0].end = end;
		if (bpf_map_update_elem(&kt_maps_lost, &tgid, &n, BPF_NOEXIST) != 0)
			count_loss(maps_lost_untracked);
		else
			__sync_fetch_and_add(&kt_maps_lost_state.procs, 1);
		return;
	}
	if (start < l->lo)
		l->lo = start;
	if (end > l->hi)
		l->hi = end;
	i = l->n;
	if (i < KT_MAPS_LOST_RANGES) {
		l->ranges[i & (KT_MAPS_LOST_RANGES - 1)].start = start;
		l->ranges[i & (KT_MAPS_LOST_RANGES - 1)].end = end;
		l->n = i + 1;
		return;
	}
	/* Merged into the last: sent again as one range. */
	if (start < l->ranges[KT_MAPS_LOST_RANGES - 1].start)
		l->ranges[KT_MAPS_LOST_RANGES - 1].start = start;
	if (end > l->ranges[KT_MAPS_LOST_RANGES - 1].end)
		l->ranges[KT_MAPS_LOST_RANGES - 1].end = end;
}

/* What the current process lost is known again. */
static __always_inline void maps_lost_forget(__u32 tgid)
{
	if (bpf_map_delete_elem(&kt_maps_lost, &tgid) == 0)
		__sync_fetch_and_add(&kt_maps_lost_state.procs, -1);
}

/* How a change of [start, end) went (KT_SENT_*): one not whole is kept for
 * the process's samples; one whole, in ring order before any sample that
 * sees this, that covers all that was lost ends it. Global: checked once. */
__attribute__((noinline)) int kt_note_change(__u64 start, __u64 end, int sent)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct kt_maps_lost *l;

	if (sent != KT_SENT_WHOLE) {
		maps_lost(start, end);
		return 0;
	}
	if (!kt_maps_lost_state.procs)
		return 0;
	l = bpf_map_lookup_elem(&kt_maps_lost, &tgid);
	if (l && start <= l->lo && l->hi <= end)
		maps_lost_forget(tgid);
	return 0;
}

/* How an event went, once submitted. */
static __always_inline int sent_as(struct kt_map_change_event *ev)
{
	return ev->flags & (KT_CHANGE_UNREAD | KT_CHANGE_TRUNCATED) ? KT_SENT_PART : KT_SENT_WHOLE;
}

/* A change of [start, end) of the current process, its mappings not yet
 * filled in; None if the ring buffer is full (counted), or every Nth with
 * the fault for tests (kt_cfg_lose_map_changes). */
static __always_inline struct kt_map_change_event *map_change_event(__u64 start, __u64 end)
{
	struct kt_map_change_event *ev = 0;
	__u32 every = kt_cfg_lose_map_changes;

	if (!every || ++kt_maps_lost_state.changes_made % every != 0)
		ev = bpf_ringbuf_reserve(&kt_events, sizeof(*ev), 0);
	if (!ev) {
		count_loss(ringbuf_full);
		return 0;
	}
	ev->hdr.kind = KT_EV_MAP_CHANGE;
	ev->hdr.pid = bpf_get_current_pid_tgid() >> 32;
	ev->hdr.tid = (__u32)bpf_get_current_pid_tgid();
	ev->start = start;
	ev->end = end;
	ev->count = 0;
	ev->flags = 0;
	ev->path_parts = 0;
	return ev;
}

/* Sends that [start, end) of the current process holds no executable file
 * mapping any more (the sys_enter side: no VMA walk to verify there). */
__attribute__((noinline)) int kt_send_map_gone(__u64 start, __u64 end)
{
	struct kt_map_change_event *ev = map_change_event(start, end);

	if (!ev) {
		kt_note_change(start, end, KT_SENT_LOST);
		return KT_SENT_LOST;
	}
	bpf_ringbuf_submit(ev, 0);
	kt_note_change(start, end, KT_SENT_WHOLE);
	return KT_SENT_WHOLE;
}

/* A slot of a change event filled with an executable file mapping. */
static __always_inline void fill_file_code(struct kt_exit_mapping *m, __u64 start, __u64 end,
					   __u64 pgoff, struct file *f)
{
	m->start = start;
	m->end = end;
	m->offset = pgoff << 12;
	m->ino = BPF_CORE_READ(f, f_inode, i_ino);
	m->dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
	m->flags = KT_MAPPING_EXEC;
}

/* Where a walk of kt_send_map_walked is. */
struct kt_walk {
	__u64 addr;
	__u64 first_file;
	__u64 lo; /* the span of the executable file mappings found */
	__u64 hi;
};

/* One mapping of kt_send_map_walked, added to `ev` if it holds file code:
 * KT_WALK_ON to go on to the next. */
static __always_inline int send_map_step(struct kt_map_change_event *ev, struct kt_walk *w,
					 __u64 end)
{
	struct kt_exit_mapping *m;
	struct file *f;
	struct kt_vma v;
	__u32 i = ev->count;
	__u64 slot;
	int r;

	if (w->addr >= end)
		return 0;
	r = vma_lookup(w->addr, &v);
	if (r < 0) {
		ev->flags |= KT_CHANGE_UNREAD;
		count_loss(map_changes_unread);
		return 0;
	}
	if (r == 0)
		return 0;
	w->addr = v.end;
	if (!(v.flags & KT_VM_EXEC) || !v.file)
		return KT_WALK_ON;
	if (i >= KT_MAX_CHANGED_MAPS) {
		ev->flags |= KT_CHANGE_TRUNCATED;
		return 0;
	}
	/* Not BPF_CORE_READ(v.file, ...): kt_vma is no kernel type. */
	f = v.file;
	/* Masked as well, where the compiler cannot drop it as redundant:
	 * 5.10 and 6.1 lose the check's bound on the index. */
	slot = i;
	asm volatile("%0 &= %1" : "+r"(slot) : "i"(KT_MAX_CHANGED_MAPS - 1));
	m = &ev->maps[slot];
	fill_file_code(m, v.start, v.end, v.pgoff, f);
	ev->count = i + 1;
	if (!w->first_file) {
		w->first_file = (__u64)f;
		w->lo = v.start;
	}
	w->hi = v.end;
	return KT_WALK_ON;
}

/* kt_send_map_change by lookups. What the walk does not reach (a hole, or
 * more than KT_WALK_VMAS mappings) is left out of the change's range;
 * `narrow`: so is all but the span of the executable file mappings found
 * (the image at exec: its data mappings, read from /proc, stay). */
__attribute__((noinline)) int kt_send_map_walked(__u64 start, __u64 end, __u32 narrow)
{
	struct kt_map_change_event *ev = map_change_event(start, end);
	struct kt_walk w = { .addr = start };
	int sent;

	if (!ev)
		return KT_SENT_LOST;
	do {
		KT_TIMES_8(if (send_map_step(ev, &w, end) != KT_WALK_ON) break;)
	} while (0);
	if (!(ev->flags & KT_CHANGE_UNREAD) && w.addr < end)
		ev->end = w.addr;
	if (narrow) {
		if (!w.hi || (ev->flags & KT_CHANGE_UNREAD)) {
			bpf_ringbuf_discard(ev, 0);
			return 0;
		}
		if (w.lo > ev->start)
			ev->start = w.lo;
		if (w.hi < ev->end)
			ev->end = w.hi;
	}
	if (ev->end <= ev->start) {
		bpf_ringbuf_discard(ev, 0);
		return 0;
	}
	if (w.first_file)
		file_path_parts(ev, w.first_file);
	sent = sent_as(ev);
	bpf_ringbuf_submit(ev, 0);
	return sent;
}

/* Sends the executable file mappings now in [start, end) of the current
 * process; how it went (KT_SENT_*). */
__attribute__((noinline)) int kt_send_map_change(__u64 start, __u64 end)
{
	struct kt_map_change_event *ev;
	struct bpf_iter_task_vma it;
	struct vm_area_struct *vma;
	__u64 first_file = 0;
	int sent;

	if (!kt_cfg_vma_iter || !bpf_iter_task_vma_new)
		return kt_send_map_walked(start, end, 0);
	ev = map_change_event(start, end);
	if (!ev)
		return KT_SENT_LOST;
	if (bpf_iter_task_vma_new(&it, bpf_get_current_task_btf(), start) != 0) {
		ev->flags |= KT_CHANGE_UNREAD;
	} else {
		while ((vma = bpf_iter_task_vma_next(&it))) {
			struct kt_exit_mapping *m;
			struct file *f;
			/* The count lives in the event (one loop state for the
			 * verifier), as in emit_exit_maps. */
			__u32 i = ev->count;

			if (vma->vm_start >= end)
				break;
			if (!exec_file_vma(vma))
				continue;
			if (i >= KT_MAX_CHANGED_MAPS) {
				ev->flags |= KT_CHANGE_TRUNCATED;
				break;
			}
			f = BPF_CORE_READ(vma, vm_file);
			m = &ev->maps[i];
			fill_file_code(m, vma->vm_start, vma->vm_end, vma->vm_pgoff, f);
			ev->count = i + 1;
			if (i == 0)
				first_file = (__u64)f;
		}
	}
	bpf_iter_task_vma_destroy(&it);
	if (ev->flags & KT_CHANGE_UNREAD)
		count_loss(map_changes_unread);
	/* The first mapping's path, walked once the iterator is done. */
	if (first_file)
		file_path_parts(ev, first_file);
	sent = sent_as(ev);
	bpf_ringbuf_submit(ev, 0);
	return sent;
}

/* kt_send_map_change, how it went noted (kt_send_map_change itself is also
 * kt_maps_resync's, which notes nothing). A function of its own: the note
 * made in sys_exit took 5.10's verifier past a million instructions. */
__attribute__((noinline)) int kt_send_map_noted(__u64 start, __u64 end)
{
	int sent = kt_send_map_change(start, end);

	kt_note_change(start, end, sent);
	return sent;
}

/*
 * At the entry of mmap (MAP_FIXED), mprotect (without PROT_EXEC) and munmap:
 * executable file mappings about to be replaced or unmapped go, before the
 * call (samples after it cannot run in them).
 */
static __always_inline void maps_enter(struct pt_regs *regs, __u32 nr)
{
	__u64 start, end;

	if (nr == KT_NR_MMAP && !(regs->r10 & KT_MAP_FIXED))
		return;
	if (nr == KT_NR_MPROTECT && (regs->dx & KT_PROT_EXEC))
		return;
	if (!change_range(regs->di, regs->si, &start, &end))
		return;
	/* Whatever a busy map hid, the range holds no executable file mapping
	 * after the call: the change is sent unread only when it may matter. */
	if (kt_exec_file_map_in(start, end) != 0)
		kt_send_map_gone(start, end);
}

/*
 * At the exit of a successful mmap or mprotect with PROT_EXEC: the
 * executable file mappings now in the range, if any (anonymous executable
 * memory is a JIT's, read from /proc).
 */
static __always_inline void maps_exit(struct pt_regs *regs, __u32 nr, long ret)
{
	__u64 start, end, addr = nr == KT_NR_MMAP ? (__u64)ret : regs->di;

	if (nr == KT_NR_MUNMAP || (ret < 0 && ret >= -4095))
		return;
	if (nr == KT_NR_MPROTECT && ret != 0)
		return;
	if (!(regs->dx & KT_PROT_EXEC) || !change_range(addr, regs->si, &start, &end))
		return;
	if (kt_exec_file_map_in(start, end) != 0)
		kt_send_map_noted(start, end);
}

/* The dynamic loader's mappings lie within this of its base. */
#define KT_LOADER_SPAN (64ULL << 20)
#define KT_AT_NULL 0
#define KT_AT_BASE 7
/* Pairs of the saved auxiliary vector looked at (x86-64 keeps 25). */
#define KT_AUXV_PAIRS 32

/* The dynamic loader's base in the current process (AT_BASE), 0 if none. */
static __always_inline __u64 loader_base(struct mm_struct *mm)
{
	__u64 auxv = (__u64)mm + bpf_core_field_offset(struct mm_struct, saved_auxv);
	__u32 pairs = bpf_core_field_size(struct mm_struct, saved_auxv) / 16;

	/* No calls in a loop here either (see KT_WALK_VMAS): unrolled. */
#pragma unroll
	for (__u32 i = 0; i < KT_AUXV_PAIRS; i++) {
		__u64 kv[2];

		if (i >= pairs)
			return 0;
		if (bpf_probe_read_kernel(kv, sizeof(kv), (void *)(auxv + i * 16)) != 0)
			return 0;
		if (kv[0] == KT_AT_NULL)
			return 0;
		if (kv[0] == KT_AT_BASE)
			return kv[1];
	}
	return 0;
}

/*
 * At exec (the current task's, its new memory map in place): the new
 * image's code, in ring order before its first sample: the program's
 * (start_code to end_code) and the dynamic loader's, looked up from its
 * base. Libraries follow as ld.so maps them (maps_exit). Lookups, not the
 * VMA iterator, on every kernel: a few mappings, each found at once.
 */
__attribute__((noinline)) int kt_send_exec_maps(void)
{
	struct mm_struct *mm;
	__u64 code, code_end, base;

	mm = (void *)BPF_CORE_READ(cur_task(), mm);
	if (!mm)
		return 0;
	code = BPF_CORE_READ(mm, start_code) & ~KT_PAGE_MASK;
	code_end = BPF_CORE_READ(mm, end_code);
	if (code < code_end)
		kt_send_map_walked(code, code_end, 1);
	base = loader_base(mm) & ~KT_PAGE_MASK;
	if (base)
		kt_send_map_walked(base, base + KT_LOADER_SPAN, 1);
	return 0;
}

/*
 * At a system call's exit in a process with changes lost (maps_lost), once
 * the ring buffer has room: the last range lost is sent again as it is
 * now, in ring order; when none is left the process's samples are whole
 * again. One range a call. One that still cannot be sent whole (the map
 * busy again, too many mappings) is tried at the next call; until then
 * the samples' frames in the span lost are left unnamed. (The lookup walk
 * sends what it reaches: past a hole, or past KT_WALK_VMAS mappings, the
 * range is read from /proc, as any change's there.)
 */
__attribute__((noinline)) int kt_maps_resync(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct kt_maps_lost *l = bpf_map_lookup_elem(&kt_maps_lost, &tgid);
	__u64 start, end;
	__u32 n, i;

	if (!l || ringbuf_busy())
		return 0;
	n = l->n;
	if (n == 0 || n > KT_MAPS_LOST_RANGES) {
		maps_lost_forget(tgid);
		return 0;
	}
	i = (n - 1) & (KT_MAPS_LOST_RANGES - 1);
	start = l->ranges[i].start;
	end = l->ranges[i].end;
	if (kt_send_map_change(start, end) != KT_SENT_WHOLE)
		return 0;
	/* Unless another thread lost one more meanwhile. */
	l = bpf_map_lookup_elem(&kt_maps_lost, &tgid);
	if (!l || l->n != n || l->ranges[i].start != start || l->ranges[i].end != end)
		return 0;
	if (n == 1)
		maps_lost_forget(tgid);
	else
		l->n = n - 1;
	return 0;
}
