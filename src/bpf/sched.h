/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Off-CPU time and wake-ups of tracked threads, shared by sched.bpf.h and
 * the Rust side.
 */
#ifndef KT_SCHED_H
#define KT_SCHED_H

#include "locks.h"

/* Why a thread was off CPU. */
enum kt_off_reason {
	KT_OFF_PREEMPTED = 1, /* switched out while runnable: waited on a run queue */
	KT_OFF_SYSCALL = 2,   /* slept inside the syscall `nr` (lock: inside `lock`) */
	KT_OFF_OTHER = 3,     /* slept outside any syscall (page fault I/O, ...) */
	KT_OFF_RUNQ = 4,      /* woken, waiting on a run queue to run again */
};

/* Or'ed into kt_offcpu_key.reason (KT_OFF_SYSCALL, KT_OFF_OTHER): the sleep
 * was uninterruptible (TASK_UNINTERRUPTIBLE: the disk, a journal commit, a
 * page read in, a kernel lock), not a wait for an event a thread or a peer
 * sends. */
#define KT_OFF_UNINTERRUPTIBLE 0x100

/* A wake-up that comes after a thread went to sleep and before its
 * switch-out ends the sleep that switch-out begins, if the switch-out comes
 * within this (the scheduler picking the next task takes microseconds). An
 * older one belongs to a sleep that never happened. */
#define KT_EARLY_WAKE_MAX_NS 1000000ULL

struct kt_offcpu_key {
	__u32 pid;
	__u32 tid;
	__u32 reason;
	__u32 nr;                 /* KT_OFF_SYSCALL */
	struct kt_lock_key lock;  /* KT_OFF_SYSCALL inside a lock wait */
};

struct kt_time_count {
	__u64 ns;
	__u64 count;
};

#define KT_NOT_IN_SYSCALL 0xffffffff

/* Who ended whose sleep, and how. */
struct kt_wakeup_key {
	__u32 waker_pid;
	__u32 waker_tid;
	__u32 woken_pid;
	__u32 woken_tid;
	__u32 waker_nr;     /* the waker's syscall, or KT_NOT_IN_SYSCALL */
	__u32 waker_flags;  /* KT_WAKER_* */
	char waker_comm[16];
};

/* Who ended a sleep, as an off-CPU sample carries it: the wait's release side. */
struct kt_waker_ref {
	__u32 pid;
	__u32 tid;
	__u32 nr;     /* the waker's syscall, or KT_NOT_IN_SYSCALL */
	__u32 flags;  /* KT_WAKER_*; 0 with tid 0: no wake-up was seen (e.g. a signal) */
};

#define KT_WAKER_TRACKED 1  /* the waker is part of the target */
#define KT_WAKER_KTHREAD 2  /* a kernel thread (or the idle task: timers) */
/* kt_waker_ref.flags bits 8-15: log2 of the CPU time the waker had run since
 * its own last sleep ended, plus 1 (0: not known). */
#define KT_WAKER_RAN_SHIFT 8

#endif
