// SPDX-License-Identifier: GPL-2.0
/*
 * The floor of kerntax's cost: the very hooks syscalls.bpf.c attaches, each
 * with a program that returns at once. What these cost a workload is what
 * any tool on these hooks pays before doing anything (the kernel's entry
 * into BPF for every syscall, switch and wake-up on the machine); kerntax's
 * own cost is measured against it. Loaded by bench/floor.rs, never by
 * kerntax.
 */
#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf/sys_enter")
int kt_floor_sys_enter(void *ctx) { return 0; }

SEC("tp_btf/sys_exit")
int kt_floor_sys_exit(void *ctx) { return 0; }

SEC("tp_btf/sched_switch")
int kt_floor_switch(void *ctx) { return 0; }

SEC("tp_btf/sched_waking")
int kt_floor_waking(void *ctx) { return 0; }

SEC("tp_btf/sched_process_fork")
int kt_floor_fork(void *ctx) { return 0; }

SEC("tp_btf/sched_process_exec")
int kt_floor_exec(void *ctx) { return 0; }

SEC("tp_btf/sched_process_exit")
int kt_floor_exit(void *ctx) { return 0; }

SEC("tp_btf/hrtimer_expire_entry")
int kt_floor_hrtimer_entry(void *ctx) { return 0; }

SEC("tp_btf/hrtimer_expire_exit")
int kt_floor_hrtimer_exit(void *ctx) { return 0; }

SEC("tp_btf/timer_expire_entry")
int kt_floor_timer_entry(void *ctx) { return 0; }

SEC("tp_btf/timer_expire_exit")
int kt_floor_timer_exit(void *ctx) { return 0; }

SEC("perf_event")
int kt_floor_cpu_sample(void *ctx) { return 0; }

/*
 * What each primitive of an exact syscall hook costs on this machine, one
 * program per primitive on sys_enter (bench/floor.rs --cost NAME; bench/costs
 * runs them all): the price list kerntax's own hooks are measured against.
 * Each does its primitive for every syscall on the machine, as kerntax's
 * first step does.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} kt_cost_tasks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, __u64);
} kt_cost_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} kt_cost_tgids SEC(".maps");

/* A task-storage lookup that finds nothing: every task not profiled. */
SEC("tp_btf/sys_enter")
int kt_cost_storage_miss(void *ctx)
{
	return bpf_task_storage_get(&kt_cost_tasks, bpf_get_current_task_btf(), 0, 0) != 0;
}

/* A task-storage lookup that finds the task's value (created at its first call). */
SEC("tp_btf/sys_enter")
int kt_cost_storage_hit(void *ctx)
{
	__u64 *v = bpf_task_storage_get(&kt_cost_tasks, bpf_get_current_task_btf(), 0,
					 BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (v)
		*v += 1;
	return 0;
}

/* One clock read. */
SEC("tp_btf/sys_enter")
int kt_cost_clock(void *ctx)
{
	return bpf_ktime_get_ns() == 0;
}

/* One per-CPU array lookup and a plain add. */
SEC("tp_btf/sys_enter")
int kt_cost_percpu_add(void *ctx)
{
	__u32 key = 1;
	__u64 *v = bpf_map_lookup_elem(&kt_cost_counts, &key);

	if (v)
		*v += 1;
	return 0;
}

/* One per-CPU array lookup and an atomic add (exact under preemption). */
SEC("tp_btf/sys_enter")
int kt_cost_percpu_atomic(void *ctx)
{
	__u32 key = 1;
	__u64 *v = bpf_map_lookup_elem(&kt_cost_counts, &key);

	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}

/* The current tgid looked up in a hash map (a "tracked process?" test). */
SEC("tp_btf/sys_enter")
int kt_cost_tgid_hash(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	return bpf_map_lookup_elem(&kt_cost_tgids, &tgid) != 0;
}

char kt_cost_comm[16];

/* The current task's name by the helper ... */
SEC("tp_btf/sys_enter")
int kt_cost_comm_helper(void *ctx)
{
	return bpf_get_current_comm(kt_cost_comm, sizeof(kt_cost_comm));
}

/* ... and by two loads from the task (what sched.bpf.h does). */
SEC("tp_btf/sys_enter")
int kt_cost_comm_load(void *ctx)
{
	struct task_struct *cur = bpf_get_current_task_btf();

	__builtin_memcpy(kt_cost_comm, cur->comm, sizeof(kt_cost_comm));
	return 0;
}
