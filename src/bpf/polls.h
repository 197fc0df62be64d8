/* SPDX-License-Identifier: GPL-2.0 */
/*
 * I/O multiplexing efficiency (poll, ppoll, select, pselect6, epoll_wait,
 * epoll_pwait, epoll_pwait2), shared by polls.bpf.h and the Rust side.
 */
#ifndef KT_POLLS_H
#define KT_POLLS_H

struct kt_poll_key {
	__u32 pid;
	__u32 nr;
};

/* Per process, syscall and CPU. */
struct kt_poll_stats {
	__u64 calls;
	__u64 fds;       /* fds passed, summed (epoll: the interest set's size) */
	__u64 max_fds;
	__u64 ready;     /* ready fds returned, summed */
	__u64 timeouts;  /* calls that returned 0 */
	__u64 errors;
	__u64 total_ns;
	__u64 cpu_ns;    /* on CPU inside the calls */
	__u32 sample_countdown;
	__u32 sample_gap;
};

/* The fds an epoll instance watches, counted from epoll_ctl calls seen. */
struct kt_epoll_key {
	__u32 pid;
	__s32 epfd;
};

#endif
