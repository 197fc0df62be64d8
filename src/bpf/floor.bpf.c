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
