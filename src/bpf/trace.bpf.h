/* SPDX-License-Identifier: GPL-2.0 */
/*
 * `--perfetto`: one record per scheduling event of a target thread (trace.h),
 * on a ring buffer of its own so a burst of them never crowds out the stack
 * samples. Off by default: `kt_cfg_trace` is read-only data set at load, so
 * with it 0 the verifier drops every branch below as dead code and the
 * default mode's programs are the same instructions as without this file.
 * Records lost to a full buffer are counted (trace_ringbuf_full), never
 * silent.
 */
#ifndef KT_TRACE_BPF_H
#define KT_TRACE_BPF_H

/* Set by user space at load for --perfetto. */
const volatile __u32 kt_cfg_trace = 0;

/* Sized at load: KT_TRACE_RINGBUF_BYTES with --perfetto, one page without. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} kt_trace SEC(".maps");

/* Puts struct kt_trace_record in BTF for the generated Rust type. */
struct kt_trace_record *kt_btf_trace_record __attribute__((unused));

/* A record to fill, or NULL (counted) when the buffer is full. */
static __always_inline struct kt_trace_record *trace_reserve(__u32 kind, __u64 now)
{
	struct kt_trace_record *r = bpf_ringbuf_reserve(&kt_trace, sizeof(*r), 0);

	if (!r) {
		count_loss(trace_ringbuf_full);
		return 0;
	}
	__builtin_memset(r, 0, sizeof(*r));
	r->ts_ns = now;
	r->kind = kind;
	r->cpu = bpf_get_smp_processor_id();
	return r;
}

/* Like stack samples: no wake-up per record (user space drains every
 * 100 ms), except past a quarter full. */
static __always_inline void trace_submit(struct kt_trace_record *r)
{
	bpf_ringbuf_submit(r, bpf_ringbuf_query(&kt_trace, BPF_RB_AVAIL_DATA) >
					  KT_TRACE_RINGBUF_BYTES / 4 ?
				      BPF_RB_FORCE_WAKEUP :
				      BPF_RB_NO_WAKEUP);
}

static __always_inline void trace_task(struct task_struct *p, __u32 *pid, __u32 *tid, __s32 *prio,
				       char *comm)
{
	*pid = p->tgid;
	*tid = p->pid;
	*prio = p->prio;
	__builtin_memcpy(comm, p->comm, 16);
}

/* The current task, read as trace_task reads a task (with probe reads
 * where its pointer is a plain one: before 5.11, compat.bpf.h). */
static __always_inline void trace_current(__u32 *pid, __u32 *tid, __s32 *prio, char *comm)
{
	struct task_struct *p;

	if (kt_cfg_current_btf) {
		trace_task(bpf_get_current_task_btf(), pid, tid, prio, comm);
		return;
	}
	p = cur_task();
	*pid = BPF_CORE_READ(p, tgid);
	*tid = BPF_CORE_READ(p, pid);
	*prio = BPF_CORE_READ(p, prio);
	BPF_CORE_READ_STR_INTO(comm, p, comm);
}

/*
 * A switch with a target thread on either side; `tp` is prev's storage
 * (NULL: not a target thread), read after switched_out set its reason.
 */
static __always_inline void trace_switch(bool preempt, struct task_struct *prev, struct task_struct *next,
				    unsigned int prev_state, struct kt_task *tp, bool next_tracked,
				    __u64 now)
{
	struct kt_trace_record *r = trace_reserve(KT_TR_SWITCH, now);

	if (!r || !prev || !next) {
		if (r)
			bpf_ringbuf_discard(r, 0);
		return;
	}
	trace_task(prev, &r->pid, &r->tid, &r->prio, r->comm);
	trace_task(next, &r->pid2, &r->tid2, &r->prio2, r->comm2);
	r->state = prev_state;
	r->exit_state = prev->exit_state;
	r->preempt = preempt;
	r->flags = (tp ? KT_TR_PREV_TRACKED : 0) | (next_tracked ? KT_TR_NEXT_TRACKED : 0);
	if (tp) {
		r->off_reason = tp->off_reason;
		if (tp->off_reason == KT_OFF_SYSCALL) {
			r->nr = tp->nr;
			if (tp->lock_op == KT_LOCK_OP_WAIT || tp->lock_op == KT_LOCK_OP_WAIT_PI)
				r->lock = tp->lock;
		}
	}
	trace_submit(r);
}

/* A target thread being woken; the waker is the task running now. */
static __always_inline void trace_waking(struct task_struct *p, __u64 now, bool timer)
{
	struct kt_trace_record *r = trace_reserve(KT_TR_WAKING, now);

	if (!r || !p) {
		if (r)
			bpf_ringbuf_discard(r, 0);
		return;
	}
	trace_task(p, &r->pid, &r->tid, &r->prio, r->comm);
	trace_current(&r->pid2, &r->tid2, &r->prio2, r->comm2);
	r->target_cpu = p->wake_cpu;
	r->flags = (timer ? KT_TR_IN_TIMER : 0) |
		   (cur_state() ? KT_TR_WAKER_TRACKED : 0);
	trace_submit(r);
}

/* A new thread or process of the target (its fork), an exit, or a new
 * task's first wake-up: the task and, for a fork, its parent, for a
 * wake-up the task running (`parent` NULL). */
static __always_inline void trace_life(__u32 kind, struct task_struct *p, struct task_struct *parent)
{
	struct kt_trace_record *r = trace_reserve(kind, bpf_ktime_get_ns());

	if (!r)
		return;
	trace_task(p, &r->pid, &r->tid, &r->prio, r->comm);
	if (parent)
		trace_task(parent, &r->pid2, &r->tid2, &r->prio2, r->comm2);
	else if (kind == KT_TR_WAKEUP_NEW)
		trace_current(&r->pid2, &r->tid2, &r->prio2, r->comm2);
	r->target_cpu = p->wake_cpu;
	trace_submit(r);
}

/* Attached only with --perfetto: a new task's first wake-up. */
SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(kt_trace_wakeup_new, struct task_struct *p)
{
	if (kt_cfg_trace && task_state(p))
		trace_life(KT_TR_WAKEUP_NEW, p, 0);
	return 0;
}

#endif
