/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few kernel types kerntax's BPF programs touch, declared by hand instead of
 * a 3 MB generated vmlinux.h. Every struct is marked preserve_access_index, so
 * field offsets are relocated against the running kernel's BTF at load time
 * (CO-RE): only the fields named here must exist, not their order or offsets.
 * Names follow the kernel so CO-RE can match them; BPF-side types of kerntax
 * itself carry a kt_ prefix so they never collide with these.
 */
#ifndef KT_VMLINUX_MIN_H
#define KT_VMLINUX_MIN_H

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef int pid_t;
typedef _Bool bool;
#define true 1
#define false 0

enum bpf_map_type {
	BPF_MAP_TYPE_UNSPEC = 0,
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_STACK_TRACE = 7,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
	BPF_F_NO_PREALLOC = 1U << 0,
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1ULL << 0,
	BPF_RB_AVAIL_DATA = 0, /* bpf_ringbuf_query */
	BPF_RB_NO_WAKEUP = 1ULL << 0, /* bpf_ringbuf_submit */
	BPF_RB_FORCE_WAKEUP = 1ULL << 1,
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip;
	unsigned long flags;
	unsigned long sp;
};

struct sched_entity {
	u64 exec_start;
	u64 sum_exec_runtime;
};

/* x86-64: the user thread pointer (FS base), where glibc's TLS starts. */
struct thread_struct {
	unsigned long fsbase;
};

struct task_struct {
	unsigned int __state; /* 5.14+ (before: long state, compat.bpf.h) */
	void *stack;
	unsigned int flags;
	struct mm_struct *mm;
	struct signal_struct *signal;
	struct sched_entity se;
	int exit_code;
	pid_t pid;
	pid_t tgid;
	struct task_struct *real_parent;
	struct task_struct *group_leader;
	u64 utime;
	u64 stime;
	unsigned long nvcsw;
	unsigned long nivcsw;
	u64 start_time;
	char comm[16];
	struct thread_struct thread;
	/* Read only when --perfetto streams scheduling records (trace.bpf.h). */
	int prio;
	int exit_state;
	int wake_cpu;
};

struct super_block {
	u32 s_dev;
};

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
};

struct qstr {
	const unsigned char *name;
};

struct dentry {
	struct dentry *d_parent;
	struct qstr d_name;
};

struct vfsmount {
	struct dentry *mnt_root;
};

/* The mount a vfsmount is embedded in (fs/mount.h). */
struct mount {
	struct mount *mnt_parent;
	struct dentry *mnt_mountpoint;
	struct vfsmount mnt;
};

struct path {
	struct vfsmount *mnt;
	struct dentry *dentry;
};

struct file {
	struct inode *f_inode;
	struct path f_path;
};

struct vm_area_struct {
	unsigned long vm_start;
	unsigned long vm_end;
	unsigned long vm_flags;
	unsigned long vm_pgoff;
	struct file *vm_file;
};

struct mm_struct {
	unsigned long start_code;
	unsigned long end_code;
	unsigned long start_brk;
	unsigned long brk;
	unsigned long saved_auxv[2];
};

typedef struct {
	int counter;
} atomic_t;

struct signal_struct {
	atomic_t live;
};

struct linux_binprm {
	const char *filename;
};

struct bpf_iter_meta {
	struct seq_file *seq;
	u64 session_id;
	u64 seq_num;
};

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
};

#pragma clang attribute pop

struct bpf_dynptr {
	u64 __opaque[2];
} __attribute__((aligned(8)));

/* Open-coded VMA iterator (kfuncs, Linux 6.7+). */
struct bpf_iter_task_vma {
	u64 __opaque[1];
};

struct bpf_iter_num {
	u64 __opaque[1];
};

struct seq_file;
struct bpf_map;

#endif
