/* SPDX-License-Identifier: GPL-2.0 */
/*
 * How efficiently a thread waits for I/O: fds passed and fds ready per
 * poll/select/epoll call, exact per process and syscall, and sampled per
 * call site at the exit (where both are known). A poll over 1,000 fds that
 * returns 1 ready pays for the 999 others in the kernel on every call.
 */
#ifndef KT_POLLS_BPF_H
#define KT_POLLS_BPF_H

#define KT_NR_POLL 7
#define KT_NR_SELECT 23
#define KT_NR_EPOLL_WAIT 232
#define KT_NR_EPOLL_CTL 233
#define KT_NR_PSELECT6 270
#define KT_NR_PPOLL 271
#define KT_NR_EPOLL_PWAIT 281
#define KT_NR_EPOLL_PWAIT2 441
#define KT_EPOLL_CTL_ADD 1
#define KT_EPOLL_CTL_DEL 2
#define KT_FD_SET_WORDS 16 /* FD_SETSIZE 1024 bits */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, struct kt_poll_key);
	__type(value, struct kt_poll_stats);
} kt_polls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct kt_epoll_key);
	__type(value, __s64);
} kt_epoll_sizes SEC(".maps");

static __always_inline bool is_poll_syscall(__u32 nr)
{
	return nr == KT_NR_POLL || nr == KT_NR_PPOLL || nr == KT_NR_SELECT || nr == KT_NR_PSELECT6 ||
	       nr == KT_NR_EPOLL_WAIT || nr == KT_NR_EPOLL_PWAIT || nr == KT_NR_EPOLL_PWAIT2;
}

static __always_inline __u32 popcount64(__u64 x)
{
	x = x - ((x >> 1) & 0x5555555555555555ULL);
	x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
	return (x * 0x0101010101010101ULL) >> 56;
}

/*
 * fds in a select() set of nfds bits. A global function, so the verifier
 * checks it once, and branch-free over the words (unread ones stay zero).
 */
__noinline __u32 kt_fd_set_count(__u64 set, __u32 nfds)
{
	__u64 words[KT_FD_SET_WORDS] = {};
	__u32 n = (nfds + 63) / 64, count = 0, last;

	if (!set || !n)
		return 0;
	if (n > KT_FD_SET_WORDS)
		n = KT_FD_SET_WORDS;
	if (bpf_probe_read_user(words, n * 8, (void *)set) != 0)
		return 0;
	last = (n - 1) & (KT_FD_SET_WORDS - 1);
	if (nfds % 64 && nfds <= KT_FD_SET_WORDS * 64)
		words[last] &= (1ULL << (nfds % 64)) - 1;
	for (int i = 0; i < KT_FD_SET_WORDS; i++)
		count += popcount64(words[i]);
	return count;
}

/* At the entry: how many fds the call waits on. */
static __noinline void poll_enter(struct pt_regs *regs, struct kt_task *t, __u32 nr)
{
	__u32 fds = 0;

	if (nr == KT_NR_POLL || nr == KT_NR_PPOLL) {
		fds = regs->si;
	} else if (nr == KT_NR_SELECT || nr == KT_NR_PSELECT6) {
		__u32 nfds = regs->di;

		fds = kt_fd_set_count(regs->si, nfds) + kt_fd_set_count(regs->dx, nfds) +
		      kt_fd_set_count(regs->r10, nfds);
	} else {
		struct kt_epoll_key k = { .pid = bpf_get_current_pid_tgid() >> 32, .epfd = regs->di };
		__s64 *size = bpf_map_lookup_elem(&kt_epoll_sizes, &k);

		fds = size && *size > 0 ? *size : 0;
	}
	t->poll_fds = fds;
}

/* epoll_ctl: keeps the size of each epoll instance's interest set. */
static __always_inline void epoll_ctl_exit(struct pt_regs *regs, long ret)
{
	struct kt_epoll_key k = { .pid = bpf_get_current_pid_tgid() >> 32, .epfd = regs->di };
	__s64 delta = regs->si == KT_EPOLL_CTL_ADD ? 1 : regs->si == KT_EPOLL_CTL_DEL ? -1 : 0, zero = 0, *size;

	if (ret != 0 || !delta)
		return;
	size = bpf_map_lookup_elem(&kt_epoll_sizes, &k);
	if (!size) {
		bpf_map_update_elem(&kt_epoll_sizes, &k, &zero, BPF_NOEXIST);
		size = bpf_map_lookup_elem(&kt_epoll_sizes, &k);
	}
	if (size)
		__sync_fetch_and_add(size, delta);
}

/* At the exit: count the call, and decide whether `smp` samples it.
 * Global, as kt_sample_stack, to be verified once. */
KT_GLOBAL int kt_poll_exit(struct kt_task *t, long ret, __u64 d_ns, struct kt_stack_sample *smp)
{
	struct kt_poll_key k = { .pid = bpf_get_current_pid_tgid() >> 32 };
	struct kt_poll_stats *s;
	__u32 fds, ready = ret > 0 ? ret : 0;
	__s64 cpu_ns;

	if (!t || !smp)
		return 0;
	k.nr = t->nr;
	s = bpf_map_lookup_elem(&kt_polls, &k);
	cpu_ns = (__s64)d_ns - (__s64)(t->off_cpu_ns - t->enter_off_cpu_ns);
	fds = t->poll_fds;
	if (!s) {
		bpf_map_update_elem(&kt_polls, &k, &kt_zero_poll_stats, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&kt_polls, &k);
		if (!s) {
			count_loss(poll_map_full);
			return 0;
		}
	}
	__sync_fetch_and_add(&s->calls, 1);
	__sync_fetch_and_add(&s->fds, fds);
	if (fds > s->max_fds)
		s->max_fds = fds;
	__sync_fetch_and_add(&s->ready, ready);
	if (ret == 0)
		__sync_fetch_and_add(&s->timeouts, 1);
	else if (ret < 0)
		__sync_fetch_and_add(&s->errors, 1);
	__sync_fetch_and_add(&s->total_ns, d_ns);
	if (cpu_ns > 0)
		__sync_fetch_and_add(&s->cpu_ns, cpu_ns);
	if (s->sample_countdown) {
		s->sample_countdown--;
		return 0;
	}
	smp->flags |= KT_SAMPLE_CALL | KT_SAMPLE_POLL;
	smp->weight = s->sample_gap + 1;
	smp->poll_fds = fds;
	smp->poll_ready = ready;
	/* The gap grows with the calls seen on this CPU (as for syscalls). */
	s->sample_gap = next_gap(s->calls);
	s->sample_countdown = s->sample_gap;
	return 0;
}

#endif
