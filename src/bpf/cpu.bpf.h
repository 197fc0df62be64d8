/* SPDX-License-Identifier: GPL-2.0 */
/*
 * On-CPU samples of tracked threads, from a CPU clock perf event on every
 * CPU: the user stack (copied, unwound in user space like the others) and
 * the kernel stack (walked here, into a stack map) of what was running.
 *
 * A user-mode sample whose instruction is next to a PAUSE (F3 90), the
 * spin-wait hint every spin loop worth the name executes, counts as
 * spinning: CPU burned waiting, not working.
 */
#ifndef KT_CPU_BPF_H
#define KT_CPU_BPF_H

#define KT_KSTACK_DEPTH 64

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, KT_KSTACK_DEPTH * sizeof(__u64));
} kt_kstacks SEC(".maps");

/* The x86-64 registers as a perf event program's context has them (UAPI). */
struct kt_perf_event_ctx {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

/* Whether the code around `ip` has a PAUSE: a spin-wait loop. */
static __always_inline bool pause_near(__u64 ip)
{
	__u8 code[16];

	if (bpf_probe_read_user(code, sizeof(code), (void *)(ip - 8)) != 0)
		return false;
	for (int i = 0; i < 15; i++)
		if (code[i] == 0xf3 && code[i + 1] == 0x90)
			return true;
	return false;
}

SEC("perf_event")
int kt_cpu_sample(struct kt_perf_event_ctx *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct kt_task *t = bpf_task_storage_get(&kt_tasks, task, 0, 0);
	struct kt_stack_sample smp = { .weight = 1, .flags = KT_SAMPLE_CPU, .kstack_id = -1 };
	__u64 ip = ctx->ip;

	if (!t)
		return 0;
	smp.nr = t->enter_ns ? t->nr : KT_NOT_IN_SYSCALL;
	if (ip >> 47) {
		/* In the kernel: its stack here, the user registers saved at entry. */
		smp.flags |= KT_SAMPLE_IN_KERNEL;
		smp.kstack_id = bpf_get_stackid(ctx, &kt_kstacks, 0);
		set_user_regs(&smp, (struct pt_regs *)bpf_task_pt_regs(task));
	} else {
		smp.ip = ip;
		smp.sp = ctx->sp;
		smp.bp = ctx->bp;
		if (pause_near(ip))
			smp.flags |= KT_SAMPLE_SPIN;
	}
	sample_stack(&smp);
	return 0;
}

#endif
