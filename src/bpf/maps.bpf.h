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
		return 0;
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

/* A change of [start, end) of the current process, its mappings not yet
 * filled in; None if the ring buffer is full (counted). */
static __always_inline struct kt_map_change_event *map_change_event(__u64 start, __u64 end)
{
	struct kt_map_change_event *ev;

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

	if (ev)
		bpf_ringbuf_submit(ev, 0);
	return 0;
}

/* Sends the executable file mappings now in [start, end) of the current
 * process. */
__attribute__((noinline)) int kt_send_map_change(__u64 start, __u64 end)
{
	struct kt_map_change_event *ev;
	struct bpf_iter_task_vma it;
	struct vm_area_struct *vma;
	__u64 first_file = 0;

	if (!kt_cfg_vma_iter || !bpf_iter_task_vma_new)
		return 0;
	ev = map_change_event(start, end);
	if (!ev)
		return 0;
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
			m->start = vma->vm_start;
			m->end = vma->vm_end;
			m->offset = (__u64)vma->vm_pgoff << 12;
			m->ino = BPF_CORE_READ(f, f_inode, i_ino);
			m->dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
			m->flags = KT_MAPPING_EXEC;
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
	bpf_ringbuf_submit(ev, 0);
	return 0;
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
		kt_send_map_change(start, end);
}
