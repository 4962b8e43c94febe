/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* prowl.h: the structs and constants shared by the BPF sampler and user space.
 * Everything that crosses the BPF/user boundary is defined here and only here. */
#ifndef PROWL_H
#define PROWL_H

#define PROWL_MAX_STACK   127  /* frames kept per kernel or user stack */
#define PROWL_COMM_LEN    16
#define PROWL_RINGBUF_SZ  (16u << 20)

/* Values of prowl_cfg.filter_mode. */
enum prowl_filter {
	PROWL_FILTER_ALL = 0,  /* every task on the host */
	PROWL_FILTER_PIDS = 1, /* only tgids present in the pid_filter map */
};

/* Indices of the per-CPU counters map. */
enum prowl_counter {
	PROWL_CNT_SAMPLES = 0, /* BPF program runs that produced an event */
	PROWL_CNT_LOST,        /* events the ring buffer could not take */
	PROWL_CNT_IDLE,        /* idle samples dropped (no --idle) */
	PROWL_CNT_FILTERED,    /* samples of processes outside the filter */
	PROWL_CNT_KSTACK_ERR,  /* bpf_get_stack failed for the kernel stack */
	PROWL_CNT_USTACK_ERR,  /* bpf_get_stack failed for the user stack */
	PROWL_CNT__MAX,
};

/* Bits in prowl_sample.flags. */
#define PROWL_SAMPLE_KERNEL_MODE (1u << 0) /* the CPU was in kernel mode */
#define PROWL_SAMPLE_USTACK_TRUNC (1u << 1) /* user stack hit PROWL_MAX_STACK */
#define PROWL_SAMPLE_KSTACK_TRUNC (1u << 2) /* kernel stack hit PROWL_MAX_STACK */

/* One sample, as written to the ring buffer. Stacks are leaf first. */
struct prowl_sample {
	__u64 time_ns;    /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) */
	__u64 cgroup_id;
	__u32 pid;        /* tgid */
	__u32 tid;
	__u32 cpu;
	__u32 flags;
	__u16 kstack_len; /* number of valid entries in kstack */
	__u16 ustack_len; /* number of valid entries in ustack */
	__u32 _pad;
	char comm[PROWL_COMM_LEN];  /* thread name */
	char pcomm[PROWL_COMM_LEN]; /* process (group leader) name */
	__u64 kstack[PROWL_MAX_STACK];
	__u64 ustack[PROWL_MAX_STACK];
};

#endif /* PROWL_H */
