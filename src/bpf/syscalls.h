/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Types shared by syscalls.bpf.c and the Rust collector. The Rust side never
 * re-declares them: libbpf-cargo generates them from this object's BTF.
 *
 * Counting happens in per-CPU maps at sys_enter/sys_exit so figures are exact
 * without one event per syscall; only sampled user stacks and rare process
 * life-cycle events cross the ring buffer.
 */
#ifndef KT_SYSCALLS_H
#define KT_SYSCALLS_H

#include "locks.h"
#include "polls.h"
#include "sched.h"
#include "python.h"
#include "trace.h"

/* Threads followed at once where per-thread state is a hash map (kernels
 * without BPF task storage, before 5.11): a thread past it is counted in
 * task_storage_failed. */
#define KT_MAX_THREADS 32768
/* Syscall numbers above this are counted as loss (x86_64 has ~470). */
#define KT_MAX_SYSCALLS 512
/* Latency histogram: slot i holds calls with 2^i <= ns < 2^(i+1); slot 0 also 0 ns. */
#define KT_HIST_SLOTS 40
/* Bytes of user stack copied per sample, from the stack pointer upwards. */
#define KT_STACK_BYTES 16384
#define KT_RINGBUF_BYTES (8 << 20)
/*
 * Stack sampling, per CPU and syscall: every call is sampled until
 * 2^KT_SAMPLE_SHIFT calls have been seen; after that the gap to the next
 * sample is drawn at random around a mean period that doubles with the count
 * (about 2^(KT_SAMPLE_SHIFT-1) samples per doubling), capped at
 * 2^KT_MAX_PERIOD_LOG2. Each sample weighs the calls it stands for: itself
 * and the gap before it. Random gaps cannot alias with a periodic workload.
 */
#define KT_SAMPLE_SHIFT 7
#define KT_MAX_PERIOD_LOG2 12
/*
 * Latency timing, per CPU and syscall: the first KT_TIME_ALL calls are all
 * timed; after that one call in KT_TIME_PERIOD on average (random gaps of 1
 * to 2*KT_TIME_PERIOD-1 calls, which cannot alias with a periodic workload)
 * and the others only counted. Two clock reads are most of what a call of a
 * storm costs kerntax (bench/costs); counts, errors and bytes stay exact,
 * latency is estimated from the timed calls (timed < returns says so).
 * Lock operations and poll-family calls are always timed: their time is
 * what their analyses measure.
 */
#define KT_TIME_ALL 1024
#define KT_TIME_PERIOD 16
/* kt_task.enter_ns of a call counted but not timed. */
#define KT_ENTER_UNTIMED 1

struct kt_syscall_stats {
	__u64 calls;       /* entries seen (exact) */
	__u64 returns;     /* exits seen after a tracked entry */
	__u64 errors;      /* returns in [-4095, -1] */
	__u64 total_ns;    /* sum of entry->exit latency over returns */
	__u64 max_ns;
	__u64 samples;     /* stack samples emitted for this syscall */
	__u32 sample_countdown; /* calls to skip before the next sample */
	__u32 sample_gap;       /* the gap being skipped: the next sample's weight - 1 */
	__u64 sample_carry;     /* calls of samples deferred while the ring buffer was busy */
	__u64 samples_deferred;
	__u64 timed;       /* returns whose latency is in total_ns, max_ns and the histogram */
	__u32 time_countdown;   /* calls to leave untimed before the next timed one */
	__u32 _pad;
	__u64 ret_sum;     /* positive return values summed: bytes, for read/write */
	__u64 req_sum;     /* bytes asked for, for the data calls with a length argument */
	__u64 hist_log2_ns[KT_HIST_SLOTS];
};

struct kt_errno_key {
	__u32 nr;
	__u32 err;         /* positive errno */
};

/* Per tracked thread (task local storage); its presence is what "tracked" means. */
struct kt_task {
	__u64 enter_ns;    /* 0 when not inside a tracked syscall; KT_ENTER_UNTIMED
			    * inside one that is counted but not timed */
	__u32 nr;
	__u32 lock_op;     /* enum kt_lock_op of the syscall in flight */
	struct kt_lock_key lock;
	__u64 enter_off_cpu_ns;  /* off_cpu_ns at the syscall's entry */
	__u64 lock_switches;     /* nvcsw at entry: a change means it slept */
	__u64 off_since_ns;      /* when it was switched out; 0 while on CPU */
	__u64 off_cpu_ns;        /* time switched out, since tracked */
	__u32 off_reason;        /* enum kt_off_reason of the current interval */
	__u32 wakes;             /* sleeps ended by a known wake-up (last_waker's) */
	__u64 woken_ns;          /* when the current sleep was ended by a wake-up */
	struct kt_wakeup_key waker;
	__u32 poll_fds;          /* fds the poll-family call in flight waits on */
	__u32 off_uninterruptible; /* the current sleep is uninterruptible */
	__u64 req_bytes;         /* the length argument of the data call in flight */
	__u64 last_wake_ns;      /* when the last sleep was ended by a wake-up ... */
	struct kt_waker_ref last_waker; /* ... and by whom */
	__u64 yields;            /* sched_yield calls */
	__u64 syscalls;          /* syscalls entered since tracked (kerntax top's rows) */
	/* Off-CPU time and wake-ups not yet added to kt_offcpu / kt_wakeups
	 * (sched.bpf.h: added when the key changes, at exit and by the final
	 * snapshot). */
	struct kt_time_count runq_pend;
	struct kt_offcpu_key off_key;
	struct kt_time_count off_pend;
	struct kt_wakeup_key wake_key;
	struct kt_time_count wake_pend;
	/* When a wake-up came while the thread was still on its way off the
	 * CPU (0: none): `waker` holds it until the switch-out it ends. */
	__u64 early_wake_ns;
	/* When its last sleep ended (switched in after it), and its off_cpu_ns
	 * then: what it has run since, when it wakes someone, says whether it
	 * passes on a wake-up it just got (a queue's consumers) or hands over
	 * what it worked on (a lock's holder). */
	__u64 sleep_end_in_ns;
	__u64 sleep_end_off_ns;
	/* For the wake-up under way: log2 of what its waker had run since its
	 * own last sleep, plus 1 (0: not known). */
	__u32 waker_ran_log2;
	__u32 enter_wakes;       /* `wakes` at the syscall's entry */
	/* Set at its exit (kt_exit), which counted it among the exited: the
	 * task iterator, which still meets it until it is released, leaves
	 * it out, so no probe counts it twice. */
	__u32 exited;
	__u32 _pad_exited;
};

/* Per-CPU counters of anything dropped inside the kernel. */
struct kt_kernel_loss {
	__u64 ringbuf_full;          /* stack samples or events lost: ring buffer full */
	__u64 stack_read_failed;     /* a sampled user stack could not be copied */
	__u64 task_storage_failed;   /* a new thread could not be tracked */
	__u64 thread_map_full;       /* an exited thread's counters were lost */
	__u64 errno_map_full;        /* an errno count was lost */
	__u64 syscall_nr_out_of_range;
	__u64 lock_map_full;         /* a lock operation on a lock with no room */
	__u64 lock_thread_map_full;  /* a waiter not counted as distinct */
	__u64 sched_map_full;        /* off-CPU or wake-up time with no room */
	__u64 poll_map_full;         /* a poll-family call with no room */
	__u64 kernel_stack_lost;     /* a CPU sample's kernel stack: not walked or no room */
	__u64 switch_in_unseen;      /* a thread back on a CPU with no sched_switch for it */
	__u64 trace_ringbuf_full;    /* --perfetto records lost: their ring buffer full */
	__u64 map_changes_unread;    /* a change of executable mappings whose mappings could not be read */
	__u64 maps_lost_untracked;   /* a process's lost change not kept for its samples: kt_maps_lost full */
};

/* Event kinds (kt_event_header.kind); build.rs hands these to Rust. */
#define KT_EV_STACK 1
#define KT_EV_FORK 2
#define KT_EV_EXEC 3
#define KT_EV_EXIT_MAPS 4
#define KT_EV_MAP_CHANGE 5
#define KT_EV_EXEC_MAPS 6  /* a kt_exit_maps_event: the image an exec replaces */

/* Executable file mappings a map change states, at most this many. */
#define KT_MAX_CHANGED_MAPS 8
/* The first one's path, as its names from the file up to the root: at most
 * this many of at most this many bytes each. */
#define KT_PATH_PARTS 16
#define KT_PATH_PART_BYTES 64

/* Mappings sent when a process exits, at most this many. */
#define KT_MAX_EXIT_MAPS 256
/* Bytes of an exec'd program's file name kept. */
#define KT_PATH_BYTES 256

struct kt_event_header {
	__u32 kind;
	__u32 pid;
	__u32 tid;
	__u32 _pad;
};

#define KT_SAMPLE_CALL 1    /* stands for `weight` calls of syscall nr */
#define KT_SAMPLE_LOCK 2    /* stands for `weight` operations on `lock` */
#define KT_SAMPLE_OFFCPU 4  /* stands for `off_ns` of sleep inside syscall nr */
#define KT_SAMPLE_WAKE 8    /* stands for `weight` wake-ups of woken_tid */
#define KT_SAMPLE_POLL 16   /* a poll-family call: poll_fds passed, poll_ready ready */
#define KT_SAMPLE_CPU 32    /* an on-CPU sample (nr: the syscall it was in, if any) */
#define KT_SAMPLE_IN_KERNEL 64 /* ... taken in the kernel: kstack_id has its stack */
#define KT_SAMPLE_SPIN 128  /* ... at a spin-wait (PAUSE) loop in user code */
#define KT_SAMPLE_NO_USER 256 /* no user stack: exiting, or its image replaced by execve */
#define KT_SAMPLE_CAS 512   /* ... next to a LOCK CMPXCHG in user code (a CAS loop?) */
#define KT_SAMPLE_CODE 1024 /* ... extra holds the code from ip - KT_CODE_BEFORE */
#define KT_SAMPLE_PATH 2048 /* a file syscall's call: extra holds its path (NUL-ended) */
/* Bits 16-19: pages of the copied stack that could not be read (bit 0: the
 * one holding sp, then each next page), their bytes left as they were.
 * Most often a page not present yet: the thread (or a sample of it in the
 * kernel) at the instruction that faults it in as its stack grows. */
#define KT_SAMPLE_ABSENT_SHIFT 16
#define KT_SAMPLE_ABSENT_PAGES 4
/* Processes whose lost mapping changes are kept for their samples at once. */
#define KT_MAPS_LOST_PROCS 4096
/* Lost changes kept apart per process; more are merged into the last. */
#define KT_MAPS_LOST_RANGES 4

struct kt_range {
	__u64 start;
	__u64 end;
};

/* What kt_maps_lost keeps of a process: its lost changes' ranges, to send
 * again, and their span, for its samples. */
struct kt_maps_lost {
	__u64 lo;
	__u64 hi;
	__u32 n;
	__u32 pad;
	struct kt_range ranges[KT_MAPS_LOST_RANGES];
};

/* Bytes a sample carries beside the stack: the machine code around an
 * on-CPU sample's instruction (user space looks for a busy-wait loop in
 * it), or a file syscall's path. */
#define KT_EXTRA_BYTES 96
#define KT_CODE_BEFORE 64

/* A sampled user stack and what it stands for (KT_SAMPLE_* roles): taken at
 * a syscall's entry (calls), its exit (lock operations, sleep), or a wake. */
struct kt_stack_sample {
	struct kt_event_header hdr;
	__u32 nr;
	__u32 weight;
	__u32 flags;
	__u32 woken_pid;
	__u32 woken_tid;
	__u32 poll_fds;
	__u32 poll_ready;
	__s32 kstack_id;   /* KT_SAMPLE_IN_KERNEL: key in kt_kstacks, < 0 if none */
	__u64 off_ns;
	__s32 ret;         /* the syscall's return value (samples at its exit) */
	__u32 off_count;   /* KT_SAMPLE_OFFCPU: the sleeps off_ns stands for */
	struct kt_waker_ref waker; /* KT_SAMPLE_OFFCPU: who ended this call's last sleep */
	__u64 at_ns;       /* KT_SAMPLE_OFFCPU: when the call returned (CLOCK_MONOTONIC) */
	struct kt_lock_sample lock;
	__u64 ip;
	__u64 sp;
	__u64 bp;
	/* If hi > lo: its process had a change of executable mappings that
	 * user space did not get whole (the ring buffer full, the memory map
	 * busy) in [lo, hi), and none since: frames there may be in code user
	 * space does not know (maps.bpf.h). */
	__u64 maps_lost_lo;
	__u64 maps_lost_hi;
	__u32 stack_len;
	__u16 py_frames;   /* Python frames' records (kt_py_frame) after this header */
	__u16 py_flags;    /* KT_PY_*: whether and how the Python frames were read */
	__u8 extra[KT_EXTRA_BYTES]; /* KT_SAMPLE_CODE or KT_SAMPLE_PATH */
};

/* Per-CPU running totals of the target, read at every timeline interval. */
struct kt_totals {
	__u64 syscalls;
	__u64 voluntary_switches;
	__u64 involuntary_switches;
	/* Final counters of threads that exited (live ones come from the iterator). */
	__u64 exited_runtime_ns;
	__u64 exited_utime_ns;
	__u64 exited_stime_ns;
};

/* Per-CPU state of the samplers that are not per syscall or per lock. */
struct kt_sampler {
	__u64 off_pending_ns;  /* sleep not yet stood for by a sample */
	__u64 off_pending_count; /* ... in this many sleeps */
	__u64 off_seen;
	__u64 wakes_seen;
	__u32 wake_countdown;
	__u32 wake_gap;
};

/* Off-CPU samples: every sleep until a CPU has seen this many, then one
 * whenever this much sleep has gone unsampled. */
#define KT_OFF_SAMPLE_ALL 128
#define KT_OFF_SAMPLE_NS 4000000ULL

/* The record: the sample, then stack_len bytes of stack. Where the kernel
 * can copy user memory into a ring buffer record of any size (Linux 6.16+,
 * bpf_probe_read_user_dynptr) the record is cut to what was copied, and
 * py_frames interpreter frames' records (struct kt_py_frame) come between
 * the sample and the stack. Elsewhere it is this fixed-size form: the
 * sample, room for every frame record (py_frames of them used), the stack.
 * User space tells the two apart by length: a record cut to size is never
 * longer than this, and as long only when both are full, where the two
 * layouts are the same. */
struct kt_stack_event {
	struct kt_stack_sample s;
	struct kt_py_frame frames[KT_PY_FRAMES];
	__u8 stack[KT_STACK_BYTES];
};

/* A new process in the target tree (fork) or a new program image (exec). */
struct kt_proc_event {
	struct kt_event_header hdr;
	__u32 ppid;
	__u32 _pad;
	char comm[16];
	char filename[KT_PATH_BYTES]; /* exec only: as passed to execve */
};

#define KT_MAPPING_EXEC 1   /* executable */
#define KT_MAPPING_HEAP 2   /* the brk heap */

struct kt_exit_mapping {
	__u64 start;
	__u64 end;
	__u64 offset;      /* file offset of start */
	__u64 ino;         /* 0: anonymous */
	__u32 dev;         /* kernel dev_t: major << 20 | minor */
	__u32 flags;       /* KT_MAPPING_* */
};

/*
 * A process's file mappings, the anonymous ones right after them (.bss) and
 * its heap, as it exits, while its memory map still exists: samples that user
 * space had no time to unwind while the process lived are unwound against
 * this, and the addresses of its locks named.
 */
struct kt_exit_maps_event {
	struct kt_event_header hdr;
	__u32 count;
	__u32 truncated;   /* more mappings than KT_MAX_EXIT_MAPS */
	struct kt_exit_mapping maps[KT_MAX_EXIT_MAPS];
};

#define KT_CHANGE_UNREAD 1     /* the memory map was busy: maps[] unknown */
#define KT_CHANGE_TRUNCATED 2  /* more mappings than KT_MAX_CHANGED_MAPS */
#define KT_CHANGE_PATH_CUT 4   /* path[] does not reach the root */

/*
 * A tracked process changed its executable file mappings (mmap or mprotect
 * with PROT_EXEC, munmap, a MAP_FIXED mapping or an mprotect without
 * PROT_EXEC over one): in [start, end) its executable file mappings are now
 * maps[] (whole VMAs, which may reach past the range). Sent in ring order
 * with the stack samples, so each sample is unwound against the mappings
 * it was taken under (a library dlclose'd and another dlopen'ed at its
 * address between two reads of /proc/PID/maps).
 */
struct kt_map_change_event {
	struct kt_event_header hdr;
	__u64 start;
	__u64 end;
	__u32 count;
	__u32 flags;       /* KT_CHANGE_* */
	struct kt_exit_mapping maps[KT_MAX_CHANGED_MAPS];
	/* maps[0]'s file: its name, its directory's, ... up to the root
	 * (path_parts of them; KT_CHANGE_PATH_CUT: the root not reached). User
	 * space may not see the mapping in /proc before it goes. */
	__u32 path_parts;
	__u32 _pad;
	char path[KT_PATH_PARTS * KT_PATH_PART_BYTES]; /* part i at i * KT_PATH_PART_BYTES */
};

/* A thread's counters, written at its exit and by the snapshot iterator. */
struct kt_thread_record {
	__u32 pid;
	__u32 tid;
	__u32 ppid;
	__u32 exited;
	__s32 exit_code;
	__u32 _pad;
	char comm[16];
	__u64 utime_ns;    /* tick-sampled, as the kernel keeps them */
	__u64 stime_ns;
	__u64 runtime_ns;  /* exact on-CPU time (sum_exec_runtime) */
	__u64 voluntary_switches;
	__u64 involuntary_switches;
	__u64 start_ns;    /* task start, boot-based: tells a reused tid apart */
	__u64 yields;      /* sched_yield calls since tracked */
	__u64 syscalls;    /* syscalls entered since tracked */
};

#endif
