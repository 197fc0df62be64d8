/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Lock contention, shared by locks.bpf.h and the Rust side (which uses the
 * types generated from the object's BTF).
 *
 * A lock is what a futex word or SysV semaphore identifies: every futex
 * wait/wake and semop is attributed to one, counted per lock in the kernel,
 * and its user stack sampled per lock at the syscall's exit, when the wait
 * time and outcome are known.
 */
#ifndef KT_LOCKS_H
#define KT_LOCKS_H

enum kt_lock_kind {
	KT_LOCK_PRIVATE = 1, /* a futex word in one process: (pid, address) */
	KT_LOCK_SHARED = 2,  /* a futex word in shared memory: (dev, inode, offset) */
	KT_LOCK_SYSV = 3,    /* a SysV semaphore: (semid, semnum) */
};

enum kt_lock_op {
	KT_LOCK_OP_NONE = 0,
	KT_LOCK_OP_WAIT = 1,    /* FUTEX_WAIT*, futex_waitv, semop that may block */
	KT_LOCK_OP_WAIT_PI = 2, /* FUTEX_LOCK_PI/PI2, FUTEX_WAIT_REQUEUE_PI */
	KT_LOCK_OP_WAKE = 3,    /* FUTEX_WAKE*, requeues, UNLOCK_PI, semop posts */
	KT_LOCK_OP_OTHER = 4,   /* other futex operations (e.g. TRYLOCK_PI) */
};

struct kt_lock_key {
	__u32 kind;
	__u32 pid;  /* KT_LOCK_PRIVATE: process */
	__u64 addr; /* PRIVATE: address; SHARED: file offset; SYSV: semid << 32 | semnum */
	__u64 ino;  /* SHARED */
	__u32 dev;  /* SHARED: kernel dev_t */
	__u32 _pad;
};

/* Per lock and per CPU (summed by user space). */
struct kt_lock_stats {
	__u64 waits;       /* wait calls */
	__u64 blocked;     /* waits during which the thread was switched out */
	__u64 futile;      /* waits that failed at once with EAGAIN: the word changed */
	__u64 timeouts;    /* waits ended by ETIMEDOUT */
	__u64 wait_ns;     /* time inside all wait calls */
	__u64 blocked_ns;  /* time inside the waits that blocked */
	__u64 max_wait_ns;
	__u64 cpu_ns;      /* on-CPU time inside every call on this lock */
	__u64 wakes;       /* wake calls */
	__u64 woken;       /* threads they woke (futex wakes and requeues) */
	__u64 other;       /* other operations */
	__u64 pi;          /* priority-inheritance operations */
	__u64 samples;
	__u32 sample_countdown;
	__u32 sample_gap;
	__u64 hist_log2_ns[40]; /* wait calls by time inside, as KT_HIST_SLOTS */
};

/* A thread's wait calls on a lock, to count distinct waiters. */
struct kt_lock_thread_key {
	struct kt_lock_key lock;
	__u32 tid;
	__u32 _pad;
};

/* What a stack sample of a lock operation adds to a syscall sample. */
struct kt_lock_sample {
	struct kt_lock_key lock;
	__u32 op;          /* enum kt_lock_op; 0 for a plain syscall sample */
	__u32 blocked;
	__u64 wait_ns;     /* time inside this call */
};

#endif
