/* SPDX-License-Identifier: GPL-2.0 */
/*
 * On-CPU samples of tracked threads, from a CPU clock perf event on every
 * CPU: the user stack (copied, unwound in user space like the others) and
 * the kernel stack (walked here, into a stack map) of what was running.
 *
 * A user-mode sample whose instruction is next to a PAUSE (F3 90), the
 * spin-wait hint every spin loop worth the name executes, counts as
 * spinning: CPU burned waiting, not working.
 *
 * A spin loop that never pauses (a compare-and-swap retried at once, as a
 * JIT compiles an AtomicBoolean spin lock) has no such mark; a sample just
 * after a LOCK CMPXCHG is flagged, and user space decides from where the
 * flagged samples gather whether threads spin there (analyze/cpu.rs).
 *
 * A busy-wait with plain loads (a flag polled until another thread sets
 * it) has neither: every user-mode sample carries the code around its
 * instruction, and user space decodes the loop it sits in (src/frame/code.rs).
 */
#ifndef KT_CPU_BPF_H
#define KT_CPU_BPF_H

#define KT_KSTACK_DEPTH 64

/*
 * Kernel stacks keyed by the whole stack, each given a number on first
 * sight. A BPF stack-trace map keys by a hash bucket and refuses (or, with
 * REUSE, overwrites) a stack whose bucket is taken: with a few hundred
 * stacks that lost about one exit-path sample in fifty here. A hash map
 * compares whole keys, so distinct stacks never collide.
 */
struct kt_kstack {
	__u64 ips[KT_KSTACK_DEPTH]; /* innermost first, zero after the last */
};

#define KT_KSTACKS 16384

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KT_KSTACKS);
	/* Allocated as stacks arrive (6.1+ allows it in NMI context; user
	 * space preallocates it before): a preallocated 8 MiB of 512-byte
	 * keys cost ~25 ms at every start. */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct kt_kstack);
	__type(value, __s32);
} kt_kstacks SEC(".maps");

/* Per CPU: the scratch stack, and how many stacks this CPU has numbered. */
struct kt_kstack_scratch {
	struct kt_kstack k;
	__u32 numbered;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kt_kstack_scratch);
} kt_kstack_scratch SEC(".maps");

/* Possible CPUs (user space sets it): stack numbers are n * CPUs + cpu. */
const volatile __u32 kt_cfg_ncpus = 1;

/* The number of the kernel stack `ctx` stopped in; < 0 when lost (counted). */
static __always_inline __s32 kstack_id(void *ctx)
{
	__u32 zero = 0, cpu = bpf_get_smp_processor_id();
	struct kt_kstack_scratch *sc = bpf_map_lookup_elem(&kt_kstack_scratch, &zero);
	struct kt_kstack *k;
	__s32 *known, id;

	/* bpf_get_stack zeroes what it does not fill: equal stacks, equal keys. */
	if (!sc || bpf_get_stack(ctx, sc->k.ips, sizeof(sc->k.ips), 0) < 0)
		goto lost;
	k = &sc->k;
	known = bpf_map_lookup_elem(&kt_kstacks, k);
	if (known)
		return *known;
	/* A number no other CPU gives, without an atomic add that returns
	 * the old value (refused before 5.12): this CPU's count of stacks,
	 * interleaved with the other CPUs'. A perf event's program does not
	 * nest on its CPU. */
	if (sc->numbered >= KT_KSTACKS || cpu >= kt_cfg_ncpus)
		goto lost;
	id = sc->numbered * kt_cfg_ncpus + cpu;
	if (bpf_map_update_elem(&kt_kstacks, k, &id, BPF_NOEXIST) == 0) {
		sc->numbered++;
		return id;
	}
	/* Another CPU added it meanwhile, or the map is full. */
	known = bpf_map_lookup_elem(&kt_kstacks, k);
	if (known)
		return *known;
lost:
	count_loss(kernel_stack_lost);
	return -1;
}

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

/*
 * Whether a LOCK CMPXCHG (F0, an optional REX prefix, 0F B0/B1) ends in
 * the 24 bytes before `ip`: the sample was taken at, or just after, a
 * compare-and-swap.
 */
static __always_inline bool cas_before(__u64 ip)
{
	__u8 code[24];

	if (bpf_probe_read_user(code, sizeof(code), (void *)(ip - 24)) != 0)
		return false;
	for (int i = 0; i < 21; i++) {
		if (code[i] != 0xf0)
			continue;
		int j = i + 1;
		if ((code[j] & 0xf0) == 0x40)
			j++;
		if (j + 1 < 24 && code[j] == 0x0f && (code[j + 1] == 0xb1 || code[j + 1] == 0xb0))
			return true;
	}
	return false;
}

SEC("perf_event")
int kt_cpu_sample(struct kt_perf_event_ctx *ctx)
{
	struct kt_task *t = cur_state();
	struct kt_stack_sample smp = { .weight = 1, .flags = KT_SAMPLE_CPU, .kstack_id = -1 };
	__u64 ip = ctx->ip;

	if (!t)
		return 0;
	smp.nr = t->enter_ns ? t->nr : KT_NOT_IN_SYSCALL;
	if (ip >> 47) {
		/* In the kernel: its stack here, the user registers saved at entry. */
		smp.flags |= KT_SAMPLE_IN_KERNEL;
		smp.kstack_id = kstack_id(ctx);
		set_task_user_regs(&smp, cur_task());
	} else {
		smp.ip = ip;
		smp.sp = ctx->sp;
		smp.bp = ctx->bp;
		if (pause_near(ip))
			smp.flags |= KT_SAMPLE_SPIN;
		else if (cas_before(ip))
			smp.flags |= KT_SAMPLE_CAS;
		if (bpf_probe_read_user(smp.extra, sizeof(smp.extra), (void *)(ip - KT_CODE_BEFORE)) == 0)
			smp.flags |= KT_SAMPLE_CODE;
	}
	sample_stack(&smp);
	return 0;
}

#endif
