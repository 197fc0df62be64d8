/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Where tracked threads spend time off CPU, and who wakes them.
 *
 * At a switch-out the reason is noted (preempted, or asleep in which
 * syscall and lock); sched_waking notes the waker and the time; at the
 * switch-in the interval is split into the sleep (ended by the wake) and
 * the run-queue delay after it, and added to per-(thread, reason) and
 * per-(waker, woken) counters. Everything is exact; only stacks are
 * sampled, at the exit of the syscall that slept.
 */
#ifndef KT_SCHED_BPF_H
#define KT_SCHED_BPF_H

#define KT_TASK_RUNNING 0
#define KT_TASK_UNINTERRUPTIBLE 0x2
#define KT_PF_KTHREAD 0x00200000

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, struct kt_offcpu_key);
	__type(value, struct kt_time_count);
} kt_offcpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, struct kt_wakeup_key);
	__type(value, struct kt_time_count);
} kt_wakeups SEC(".maps");

static __always_inline void add_time(void *map, void *key, __u64 ns, __u64 count, bool *full)
{
	struct kt_time_count *v = bpf_map_lookup_elem(map, key), first = { .ns = ns, .count = count };

	if (v) {
		__sync_fetch_and_add(&v->ns, ns);
		__sync_fetch_and_add(&v->count, count);
	} else if (bpf_map_update_elem(map, key, &first, BPF_NOEXIST) != 0) {
		v = bpf_map_lookup_elem(map, key);
		if (v) {
			__sync_fetch_and_add(&v->ns, ns);
			__sync_fetch_and_add(&v->count, count);
		} else {
			*full = true;
		}
	}
}

/*
 * Adds `ns` to what a thread keeps pending under `*key_pend`: a thread
 * mostly sleeps in the same call on the same object, woken by the same
 * thread, over and over, so the time gathers in its task storage and
 * reaches the shared map only when the key changes (or at exit, or at the
 * final snapshot). A map update on every switch was most of a switch's
 * cost. Keys are whole 64-bit words with their padding zeroed, so they
 * compare a word at a time; `words` is their size in words.
 */
_Static_assert(sizeof(struct kt_offcpu_key) % 8 == 0, "kt_offcpu_key is whole words");
_Static_assert(sizeof(struct kt_wakeup_key) % 8 == 0, "kt_wakeup_key is whole words");

static __always_inline void pend_add(void *map, __u64 *key_pend, struct kt_time_count *pend,
				     const __u64 *key, int words, __u64 ns, bool *full)
{
	bool same = pend->count != 0;

	for (int i = 0; i < words && same; i++)
		same = key_pend[i] == key[i];
	if (same) {
		pend->ns += ns;
		pend->count++;
		return;
	}
	if (pend->count)
		add_time(map, key_pend, pend->ns, pend->count, full);
	for (int i = 0; i < words; i++)
		key_pend[i] = key[i];
	pend->ns = ns;
	pend->count = 1;
}

/* Adds a pending total to `map` under `key` and clears it. */
static __always_inline void flush_one(void *map, void *key, struct kt_time_count *pend, bool *full)
{
	if (!pend->count)
		return;
	add_time(map, key, pend->ns, pend->count, full);
	pend->ns = 0;
	pend->count = 0;
}

/* Moves a thread's pending off-CPU time and wake-ups into the maps. */
static __always_inline void flush_pending(struct kt_task *t, __u32 pid, __u32 tid)
{
	struct kt_offcpu_key runq = { .pid = pid, .tid = tid, .reason = KT_OFF_RUNQ };
	bool full = false;

	flush_one(&kt_offcpu, &runq, &t->runq_pend, &full);
	flush_one(&kt_offcpu, &t->off_key, &t->off_pend, &full);
	flush_one(&kt_wakeups, &t->wake_key, &t->wake_pend, &full);
	if (full)
		count_loss(sched_map_full);
}

static __always_inline void switched_out(struct kt_task *t, struct task_struct *prev, __u64 now,
					 bool preempt, unsigned int prev_state)
{
	struct kt_totals *tot = totals();
	bool preempted = (prev_state & 0xff) == KT_TASK_RUNNING;

	/*
	 * Switched out again with no switch-in seen since the last time: the
	 * kernel put it back on a CPU without a sched_switch event for it
	 * (seen on one 6.18 build, a few in 10,000 sleeps, none on another:
	 * a build's own fast paths). When its last interval ended is
	 * unknown, so that interval is not counted; the loss says how many.
	 */
	if (t->off_since_ns)
		count_loss(switch_in_unseen);
	if (tot)
		__sync_fetch_and_add(preempted ? &tot->involuntary_switches : &tot->voluntary_switches, 1);
	t->off_since_ns = now;
	t->woken_ns = 0;
	if (t->early_wake_ns) {
		/* Woken between going to sleep and this switch-out (the
		 * scheduler picking the next task): the sleep ends as it
		 * begins, and its waker is known. Preempted, the wake-up just
		 * kept it runnable. */
		if (!preempted && now - t->early_wake_ns <= KT_EARLY_WAKE_MAX_NS)
			t->woken_ns = now;
		else
			t->waker.woken_tid = 0;
		t->early_wake_ns = 0;
	}
	/* Asleep in D state: not preempted on its way to sleep (its state
	 * already set, still runnable), the one case where a D state is not a
	 * sleep. */
	t->off_uninterruptible = !preempted && !preempt && (prev_state & KT_TASK_UNINTERRUPTIBLE);
	if (preempted)
		t->off_reason = KT_OFF_PREEMPTED;
	else if (t->enter_ns)
		t->off_reason = KT_OFF_SYSCALL;
	else
		t->off_reason = KT_OFF_OTHER;
}

static __noinline void switched_in(struct kt_task *t, struct task_struct *next, __u64 now)
{
	struct kt_offcpu_key k = { .pid = next->tgid, .tid = next->pid, .reason = t->off_reason };
	__u64 off = now - t->off_since_ns, sleep = off, runq = 0;
	bool full = false;

	t->off_cpu_ns += off;
	if (t->woken_ns >= t->off_since_ns && t->woken_ns <= now) {
		sleep = t->woken_ns - t->off_since_ns;
		runq = now - t->woken_ns;
	}
	if (t->off_reason == KT_OFF_PREEMPTED) {
		/* The run queue's key is the thread's own: no map until the end. */
		t->runq_pend.ns += off;
		t->runq_pend.count++;
	} else {
		if (t->off_reason == KT_OFF_SYSCALL) {
			k.nr = t->nr;
			if (t->lock_op == KT_LOCK_OP_WAIT || t->lock_op == KT_LOCK_OP_WAIT_PI)
				k.lock = t->lock;
		}
		if (t->off_uninterruptible)
			k.reason |= KT_OFF_UNINTERRUPTIBLE;
		pend_add(&kt_offcpu, (__u64 *)&t->off_key, &t->off_pend, (const __u64 *)&k,
			 sizeof(k) / 8, sleep, &full);
		if (runq) {
			t->runq_pend.ns += runq;
			t->runq_pend.count++;
		}
	}
	if (t->woken_ns && t->waker.woken_tid) {
		pend_add(&kt_wakeups, (__u64 *)&t->wake_key, &t->wake_pend, (const __u64 *)&t->waker,
			 sizeof(t->waker) / 8, sleep, &full);
		t->waker.woken_tid = 0;
		t->last_wake_ns = t->woken_ns;
		t->wakes++;
		t->last_waker.pid = t->waker.waker_pid;
		t->last_waker.tid = t->waker.waker_tid;
		t->last_waker.nr = t->waker.waker_nr;
		t->last_waker.flags = t->waker.waker_flags |
				      ((t->waker_ran_log2 & 0xff) << KT_WAKER_RAN_SHIFT);
	}
	if (t->off_reason != KT_OFF_PREEMPTED) {
		t->sleep_end_in_ns = now;
		t->sleep_end_off_ns = t->off_cpu_ns;
	}
	if (full)
		count_loss(sched_map_full);
	t->off_since_ns = 0;
	t->woken_ns = 0;
}

#define KT_TASK_DEAD 0x80

static __always_inline int on_switch(bool preempt, struct task_struct *prev, struct task_struct *next,
				     unsigned int prev_state)
{
	struct kt_task *tp = task_state(prev), *t;
	__u64 now = 0;

	if (tp) {
		now = bpf_ktime_get_ns();
		switched_out(tp, prev, now, preempt, prev_state);
	}
	t = task_state(next);
	if (t && t->off_since_ns) {
		if (!now)
			now = bpf_ktime_get_ns();
		switched_in(t, next, now);
	}
	/* --perfetto only (dead code otherwise: trace.bpf.h). Flags, not
	 * `tp || t`: clang ORs the two pointers, which the verifier refuses. */
	if (kt_cfg_trace) {
		__u32 sides = tp ? 1 : 0;

		barrier_var(sides);
		if (t)
			sides |= 2;
		if (sides)
			trace_switch(preempt, prev, next, prev_state, tp, sides & 2,
				     now ? now : bpf_ktime_get_ns());
	}
	/* A dead thread's last switch-out (compat.bpf.h). */
	if (tp && !kt_cfg_task_storage && (prev_state & KT_TASK_DEAD))
		task_state_delete(prev);
	return 0;
}

/* Linux 5.18+: the state the thread left the CPU in is an argument. */
SEC("tp_btf/sched_switch")
int BPF_PROG(kt_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	return on_switch(preempt, prev, next, prev_state);
}

/*
 * Before 5.18 (loaded instead of kt_switch there): read from the thread,
 * which still has it at this point but for one case: a thread that went to
 * sleep with a signal pending is set running again before the switch, so
 * it reads as preempted (it stays runnable: its time off the CPU is run
 * queue time either way), where 5.18+ passes the state it slept in.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(kt_switch_legacy, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(preempt, prev, next, task_run_state(prev));
}

/* Samples the stack of a tracked waker inside a syscall, per CPU: every
 * wake-up until KT_SAMPLE_SHIFT's count, then ~64 per doubling of the
 * wake-ups seen. */
static __noinline void sample_waker(struct task_struct *cur, struct kt_wakeup_key *w, __u32 ran_log2)
{
	struct kt_sampler *sm = sampler();
	struct kt_stack_sample smp = { .nr = w->waker_nr, .flags = KT_SAMPLE_WAKE };

	if (!sm)
		return;
	/* Every wake-up counts, sampled or not: the gap grows with the
	 * wake-ups seen, as for syscalls (counting only the samples taken
	 * kept one wake-up in a few sampled for good). */
	sm->wakes_seen++;
	if (sm->wake_countdown) {
		sm->wake_countdown--;
		return;
	}
	smp.weight = sm->wake_gap + 1;
	smp.woken_pid = w->woken_pid;
	smp.woken_tid = w->woken_tid;
	/* What the waker had run since its own last sleep, as for the woken. */
	smp.waker.flags = (ran_log2 & 0xff) << KT_WAKER_RAN_SHIFT;
	sm->wake_gap = next_gap(sm->wakes_seen);
	sm->wake_countdown = sm->wake_gap;
	set_task_user_regs(&smp, cur);
	sample_stack(&smp);
}

/*
 * Per CPU: when the timer expiry now running began (0: none). A wake-up
 * from there (every timed sleep, timeout and poll deadline ends so) runs
 * on whatever task the interrupt hit, which woke no one: it is the
 * kernel's. A time, not a depth count: an expiry whose exit was missed
 * (it began before the exit program was attached) must not leave the CPU
 * marked for the rest of the run, so a mark older than a callback can
 * last does not count. (The per-CPU preempt count would tell interrupt
 * context directly, but its address is not in kallsyms here.)
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} kt_in_timer SEC(".maps");

#define KT_TIMER_CALLBACK_MAX_NS 200000ULL

static __always_inline void timer_mark(__u64 start_ns)
{
	__u32 zero = 0;
	__u64 *t = bpf_map_lookup_elem(&kt_in_timer, &zero);

	if (t)
		*t = start_ns;
}

SEC("tp_btf/hrtimer_expire_entry")
int kt_hrtimer_entry(void *ctx)
{
	timer_mark(bpf_ktime_get_ns());
	return 0;
}

SEC("tp_btf/hrtimer_expire_exit")
int kt_hrtimer_exit(void *ctx)
{
	timer_mark(0);
	return 0;
}

SEC("tp_btf/timer_expire_entry")
int kt_timer_entry(void *ctx)
{
	timer_mark(bpf_ktime_get_ns());
	return 0;
}

SEC("tp_btf/timer_expire_exit")
int kt_timer_exit(void *ctx)
{
	timer_mark(0);
	return 0;
}

/* Whether a timer's expiry is running on this CPU at `now`. */
static __always_inline bool in_timer(__u64 now)
{
	__u32 zero = 0;
	__u64 *t = bpf_map_lookup_elem(&kt_in_timer, &zero);

	return t && *t && now - *t < KT_TIMER_CALLBACK_MAX_NS;
}

/*
 * Runs in the waker's context: notes who woke a sleeping tracked thread,
 * from which syscall, and samples the waker's stack.
 */
SEC("tp_btf/sched_waking")
int BPF_PROG(kt_waking, struct task_struct *p)
{
	struct kt_task *t = task_state(p), *wt;
	struct task_struct *cur;
	struct kt_wakeup_key *w;
	__u64 pid_tgid, now;

	if (!t)
		return 0;
	/* --perfetto only: every wake-up of a target thread, its waker the
	 * task running (or a timer's expiry that interrupted it). */
	if (kt_cfg_trace) {
		now = bpf_ktime_get_ns();
		trace_waking(p, now, in_timer(now));
	}
	if (t->woken_ns)
		return 0;
	if (t->off_since_ns ? t->off_reason == KT_OFF_PREEMPTED : t->early_wake_ns != 0)
		return 0;
	now = bpf_ktime_get_ns();
	t->waker_ran_log2 = 0;
	/* Not yet switched out: it has gone to sleep (the wake-up would not
	 * fire otherwise) and the scheduler has still to switch away from it.
	 * On a busy machine that is a good share of futex hand-overs. */
	if (t->off_since_ns)
		t->woken_ns = now;
	else
		t->early_wake_ns = now;
	cur = cur_task();
	pid_tgid = bpf_get_current_pid_tgid();
	w = &t->waker;
	w->waker_pid = pid_tgid >> 32;
	w->waker_tid = (__u32)pid_tgid;
	w->woken_pid = p->tgid;
	w->woken_tid = p->pid;
	w->waker_nr = KT_NOT_IN_SYSCALL;
	if (in_timer(now)) {
		w->waker_pid = 0;
		w->waker_tid = 0;
		w->waker_flags = KT_WAKER_KTHREAD;
		__builtin_memcpy(w->waker_comm, "[timer]", 8);
		return 0;
	}
	w->waker_flags = (CUR_FIELD(flags) & KT_PF_KTHREAD) || !w->waker_tid ? KT_WAKER_KTHREAD : 0;
	/* Two loads from the task: bpf_get_current_comm cost ~130 ns a wake-up
	 * here (bench/costs-style A/B on the pipe ping-pong). */
	if (kt_cfg_current_btf)
		__builtin_memcpy(w->waker_comm, bpf_get_current_task_btf()->comm, sizeof(w->waker_comm));
	else
		BPF_CORE_READ_INTO(&w->waker_comm, cur, comm);
	wt = cur_state();
	if (!wt)
		return 0;
	w->waker_flags |= KT_WAKER_TRACKED;
	if (wt->sleep_end_in_ns && now >= wt->sleep_end_in_ns) {
		__u64 wall = now - wt->sleep_end_in_ns, off = wt->off_cpu_ns - wt->sleep_end_off_ns;

		t->waker_ran_log2 = log2_u64(wall > off ? wall - off : 0) + 1;
	}
	if (!wt->enter_ns)
		return 0;
	w->waker_nr = wt->nr;
	sample_waker(cur, w, t->waker_ran_log2);
	return 0;
}

#endif
