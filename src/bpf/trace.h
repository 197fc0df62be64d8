/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per-event scheduling records of the target's threads, streamed only for
 * `--perfetto` (trace.bpf.h), shared with the Rust side (which uses the
 * generated type). Everything else kerntax measures is summed in the
 * kernel; a timeline needs each switch, wake-up, new task and exit with
 * its time, so these go on a ring buffer of their own, sized at load:
 * one page when the flag is off.
 */
#ifndef KT_TRACE_H
#define KT_TRACE_H

#include "locks.h"

/* kt_trace_record.kind */
#define KT_TR_SWITCH 1     /* sched_switch with a target thread as prev or next */
#define KT_TR_WAKING 2     /* sched_waking of a target thread */
#define KT_TR_NEW 3        /* sched_process_fork of a target thread: a new thread or process */
#define KT_TR_WAKEUP_NEW 4 /* sched_wakeup_new of a target thread */
#define KT_TR_EXIT 5       /* sched_process_exit of a target thread */

/* kt_trace_record.flags */
#define KT_TR_PREV_TRACKED 1 /* switch: prev is a target thread */
#define KT_TR_NEXT_TRACKED 2 /* switch: next is a target thread */
#define KT_TR_IN_TIMER 4     /* waking: from a timer's expiry (the waker is the interrupted task) */
#define KT_TR_WAKER_TRACKED 8 /* waking: the waker is a target thread */

/* The ring buffer's size with --perfetto (bytes, a power of 2). User space
 * drains it every 100 ms; a record is ~150 bytes, so this holds ~110,000
 * records, over 1 M a second. */
#define KT_TRACE_RINGBUF_BYTES (16 << 20)

struct kt_trace_record {
	__u64 ts_ns;      /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
	__u32 kind;       /* KT_TR_* */
	__u32 cpu;        /* where the event fired */
	/* switch: prev; waking, wakeup_new, exit: the task; new: the child */
	__u32 pid;
	__u32 tid;
	/* switch: next; waking: the waker (the task running); new,
	 * wakeup_new: the parent (the task running) */
	__u32 pid2;
	__u32 tid2;
	__s32 prio;       /* task->prio, as ftrace's events carry it */
	__s32 prio2;
	__u32 state;      /* switch: prev's raw __state (the tracepoint's prev_state) */
	__u32 exit_state; /* switch: prev->exit_state */
	__u32 preempt;    /* switch: the tracepoint's preempt */
	__u32 flags;      /* KT_TR_* flags */
	char comm[16];
	char comm2[16];
	/* switch, when prev is tracked: why it left the CPU (kt_off_reason),
	 * the syscall it sleeps in and the lock it waits on, if any */
	__u32 off_reason;
	__u32 nr;
	struct kt_lock_key lock;
	__s32 target_cpu; /* waking, wakeup_new: the task's wake_cpu */
	__u32 _pad;
};

#endif
