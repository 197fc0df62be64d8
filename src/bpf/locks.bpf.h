/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Lock contention: every futex wait/wake and SysV semop of a tracked thread,
 * attributed to its lock.
 *
 * Why inside the syscall programs rather than an object of its own: futex and
 * semop are syscalls, and a second program on sys_enter/sys_exit would double
 * the cost every syscall on the machine pays. This header is included by
 * syscalls.bpf.c; locks.h has the types shared with Rust.
 *
 * Why sample at the exit: only then are the wait time and its outcome known,
 * and the user stack is the same as at the entry (the thread was in the
 * kernel). Sampling is per lock, so a cold lock keeps its stacks next to a
 * hot one.
 */
#ifndef KT_LOCKS_BPF_H
#define KT_LOCKS_BPF_H

#define KT_NR_SEMOP 65
#define KT_NR_FUTEX 202
#define KT_NR_SEMTIMEDOP 220
#define KT_NR_FUTEX_WAITV 449

#define KT_FUTEX_WAIT 0
#define KT_FUTEX_WAKE 1
#define KT_FUTEX_REQUEUE 3
#define KT_FUTEX_CMP_REQUEUE 4
#define KT_FUTEX_WAKE_OP 5
#define KT_FUTEX_LOCK_PI 6
#define KT_FUTEX_UNLOCK_PI 7
#define KT_FUTEX_WAIT_BITSET 9
#define KT_FUTEX_WAKE_BITSET 10
#define KT_FUTEX_WAIT_REQUEUE_PI 11
#define KT_FUTEX_CMP_REQUEUE_PI 12
#define KT_FUTEX_LOCK_PI2 13
#define KT_FUTEX_PRIVATE_FLAG 128
#define KT_FUTEX_CLOCK_REALTIME 256
#define KT_FUTEX2_PRIVATE 128

#define KT_EAGAIN 11
#define KT_ETIMEDOUT 110

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* memory only for what is used */
	__uint(max_entries, 16384);
	__type(key, struct kt_lock_key);
	__type(value, struct kt_lock_stats);
} kt_locks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* memory only for what is used */
	__uint(max_entries, 65536);
	__type(key, struct kt_lock_thread_key);
	__type(value, __u64);
} kt_lock_threads SEC(".maps");

static __always_inline bool is_lock_syscall(__u32 nr)
{
	return nr == KT_NR_FUTEX || nr == KT_NR_FUTEX_WAITV || nr == KT_NR_SEMOP ||
	       nr == KT_NR_SEMTIMEDOP;
}

/*
 * A futex word's identity: a shared futex is the same lock in every process
 * that maps its memory, so it is named by the file (shmem included) and
 * offset behind it, as the kernel's futex hash does.
 */
static __always_inline void futex_key(struct kt_lock_key *k, __u64 uaddr, bool shared)
{
	struct kt_vma v;
	struct file *f;

	if (shared && vma_of(uaddr, &v) && (f = v.file)) {
		k->kind = KT_LOCK_SHARED;
		k->addr = (v.pgoff << 12) + (uaddr - v.start);
		k->ino = BPF_CORE_READ(f, f_inode, i_ino);
		k->dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
		return;
	}
	k->kind = KT_LOCK_PRIVATE;
	k->pid = bpf_get_current_pid_tgid() >> 32;
	k->addr = uaddr;
}

static __always_inline __u32 futex_op(int cmd)
{
	switch (cmd) {
	case KT_FUTEX_WAIT:
	case KT_FUTEX_WAIT_BITSET:
		return KT_LOCK_OP_WAIT;
	case KT_FUTEX_LOCK_PI:
	case KT_FUTEX_LOCK_PI2:
	case KT_FUTEX_WAIT_REQUEUE_PI:
		return KT_LOCK_OP_WAIT_PI;
	case KT_FUTEX_WAKE:
	case KT_FUTEX_WAKE_BITSET:
	case KT_FUTEX_REQUEUE:
	case KT_FUTEX_CMP_REQUEUE:
	case KT_FUTEX_WAKE_OP:
	case KT_FUTEX_UNLOCK_PI:
	case KT_FUTEX_CMP_REQUEUE_PI:
		return KT_LOCK_OP_WAKE;
	default:
		return KT_LOCK_OP_OTHER;
	}
}

struct kt_futex_waitv {
	__u64 val;
	__u64 uaddr;
	__u32 flags;
	__u32 reserved;
};

struct kt_sembuf {
	__u16 num;
	__s16 op;
	__s16 flg;
};

/*
 * At a lock syscall's entry: which lock and operation, and the thread's
 * clocks, so the exit can tell the time on CPU and whether it slept.
 * Returns the operation (KT_LOCK_OP_NONE if the arguments can't be read).
 */
static __noinline __u32 lock_enter(struct pt_regs *regs, struct kt_task *t, __u32 nr)
{
	struct kt_lock_key *k = &t->lock;
	__u32 op = KT_LOCK_OP_NONE;

	__builtin_memset(k, 0, sizeof(*k));
	if (nr == KT_NR_FUTEX) {
		int fop = regs->si;

		op = futex_op(fop & ~(KT_FUTEX_PRIVATE_FLAG | KT_FUTEX_CLOCK_REALTIME));
		futex_key(k, regs->di, !(fop & KT_FUTEX_PRIVATE_FLAG));
	} else if (nr == KT_NR_FUTEX_WAITV) {
		struct kt_futex_waitv w;

		/* Attributed to the first futex waited on. */
		if (bpf_probe_read_user(&w, sizeof(w), (void *)regs->di) == 0) {
			op = KT_LOCK_OP_WAIT;
			futex_key(k, w.uaddr, !(w.flags & KT_FUTEX2_PRIVATE));
		}
	} else {
		struct kt_sembuf sb;

		/* semop(semid, sops, nsops): the first operation decides. */
		if (bpf_probe_read_user(&sb, sizeof(sb), (void *)regs->si) == 0) {
			op = sb.op > 0 ? KT_LOCK_OP_WAKE : KT_LOCK_OP_WAIT;
			k->kind = KT_LOCK_SYSV;
			k->addr = ((__u64)(__u32)regs->di << 32) | sb.num;
		}
	}
	t->lock_op = op;
	t->lock_switches = CUR_FIELD(nvcsw);
	return op;
}

static __always_inline struct kt_lock_stats *lock_stats(struct kt_lock_key *k)
{
	struct kt_lock_stats *s = bpf_map_lookup_elem(&kt_locks, k);

	if (s)
		return s;
	/* A racing insert by another CPU is fine: each has its own copy. */
	bpf_map_update_elem(&kt_locks, k, &kt_zero_lock_stats, BPF_NOEXIST);
	s = bpf_map_lookup_elem(&kt_locks, k);
	if (!s) {
		count_loss(lock_map_full);
	}
	return s;
}

static __always_inline void count_waiter(struct kt_lock_key *k)
{
	struct kt_lock_thread_key tk = { .lock = *k, .tid = (__u32)bpf_get_current_pid_tgid() };
	__u64 one = 1, *n = bpf_map_lookup_elem(&kt_lock_threads, &tk);

	if (n) {
		__sync_fetch_and_add(n, 1);
	} else if (bpf_map_update_elem(&kt_lock_threads, &tk, &one, BPF_NOEXIST) != 0 &&
		   !bpf_map_lookup_elem(&kt_lock_threads, &tk)) {
		count_loss(lock_thread_map_full);
	}
}

/* At the exit: count the operation on its lock, and decide whether `smp`
 * samples it. Global, as kt_sample_stack, to be verified once. */
KT_GLOBAL int kt_lock_exit(struct kt_task *t, long ret, __u64 d_ns, struct kt_stack_sample *smp)
{
	struct kt_lock_sample ls = { .wait_ns = d_ns };
	struct kt_lock_stats *s;
	__s64 cpu_ns;
	__u64 seen;
	__u64 slot;

	if (!t || !smp)
		return 0;
	ls.lock = t->lock;
	ls.op = t->lock_op;
	s = lock_stats(&ls.lock);
	if (!s)
		return 0;
	/* Time on CPU inside the call: the wall time minus the time switched
	 * out (kept by kt_switch, on the same clock). */
	cpu_ns = (__s64)d_ns - (__s64)(t->off_cpu_ns - t->enter_off_cpu_ns);
	if (cpu_ns > 0)
		__sync_fetch_and_add(&s->cpu_ns, cpu_ns);
	ls.blocked = CUR_FIELD(nvcsw) != t->lock_switches;
	switch (ls.op) {
	case KT_LOCK_OP_WAIT_PI:
		__sync_fetch_and_add(&s->pi, 1);
		/* fall through */
	case KT_LOCK_OP_WAIT:
		__sync_fetch_and_add(&s->waits, 1);
		__sync_fetch_and_add(&s->wait_ns, d_ns);
		if (d_ns > s->max_wait_ns)
			s->max_wait_ns = d_ns;
		slot = log2_u64(d_ns);
		if (slot >= KT_HIST_SLOTS)
			slot = KT_HIST_SLOTS - 1;
		__sync_fetch_and_add(&s->hist_log2_ns[slot], 1);
		if (ls.blocked) {
			__sync_fetch_and_add(&s->blocked, 1);
			__sync_fetch_and_add(&s->blocked_ns, d_ns);
		}
		if (ret == -KT_EAGAIN)
			__sync_fetch_and_add(&s->futile, 1);
		else if (ret == -KT_ETIMEDOUT)
			__sync_fetch_and_add(&s->timeouts, 1);
		count_waiter(&ls.lock);
		break;
	case KT_LOCK_OP_WAKE:
		__sync_fetch_and_add(&s->wakes, 1);
		/* Futex wakes and requeues return the threads they moved. */
		if (ret > 0 && ls.lock.kind != KT_LOCK_SYSV)
			__sync_fetch_and_add(&s->woken, ret);
		break;
	default:
		__sync_fetch_and_add(&s->other, 1);
	}
	seen = s->waits + s->wakes + s->other;
	if (s->sample_countdown) {
		s->sample_countdown--;
		return 0;
	}
	smp->flags |= KT_SAMPLE_LOCK;
	smp->weight = s->sample_gap + 1;
	smp->lock = ls;
	s->sample_gap = next_gap(seen);
	s->sample_countdown = s->sample_gap;
	s->samples++;
	return 0;
}

#endif
