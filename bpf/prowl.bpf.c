// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* prowl.bpf.c: the sample stage in the kernel. A perf_event program that records
 * pid, tid, CPU, comm, cgroup and both stacks of the interrupted task into a ring buffer. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "prowl.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by user space between open and load. */
const volatile __u32 filter_mode = PROWL_FILTER_ALL;
/* Writable at run time (a configuration reload may change it). */
volatile bool keep_idle = false;
const volatile bool follow_children = false;
const volatile bool want_kernel = true;
const volatile bool want_user = true;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, PROWL_RINGBUF_SZ);
} events SEC(".maps");

/* tgids to sample when filter_mode == PROWL_FILTER_PIDS. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} pid_filter SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PROWL_CNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);

	if (v)
		*v += 1;
}

SEC("perf_event")
int prowl_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct task_struct *task;
	struct prowl_sample *e;
	long n;

	if (tid == 0 && !keep_idle) {
		count(PROWL_CNT_IDLE);
		return 0;
	}
	if (filter_mode == PROWL_FILTER_PIDS && !bpf_map_lookup_elem(&pid_filter, &tgid)) {
		count(PROWL_CNT_FILTERED);
		return 0;
	}

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PROWL_CNT_LOST);
		return 0;
	}
	task = (struct task_struct *)bpf_get_current_task();
	e->time_ns = bpf_ktime_get_ns();
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->pid = tgid;
	e->tid = tid;
	e->cpu = bpf_get_smp_processor_id();
	e->flags = 0;
	e->_pad = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	BPF_CORE_READ_STR_INTO(&e->pcomm, task, group_leader, comm);

	/* The kernel stack is empty when the CPU was in user mode. */
	e->kstack_len = 0;
	if (want_kernel) {
		n = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
		if (n < 0)
			count(PROWL_CNT_KSTACK_ERR);
		else
			e->kstack_len = n / sizeof(__u64);
		if (e->kstack_len)
			e->flags |= PROWL_SAMPLE_KERNEL_MODE;
		if (e->kstack_len >= PROWL_MAX_STACK)
			e->flags |= PROWL_SAMPLE_KSTACK_TRUNC;
	}

	e->ustack_len = 0;
	/* Kernel threads have no user stack; their mm is NULL. */
	if (want_user && BPF_CORE_READ(task, mm)) {
		n = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
		if (n < 0)
			count(PROWL_CNT_USTACK_ERR);
		else
			e->ustack_len = n / sizeof(__u64);
		if (e->ustack_len >= PROWL_MAX_STACK)
			e->flags |= PROWL_SAMPLE_USTACK_TRUNC;
	}

	count(PROWL_CNT_SAMPLES);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* With follow_children, a process forked by a followed one is followed too. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(prowl_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid, ctgid;
	__u8 one = 1;

	if (!follow_children)
		return 0;
	ptgid = BPF_CORE_READ(parent, tgid);
	if (!bpf_map_lookup_elem(&pid_filter, &ptgid))
		return 0;
	ctgid = BPF_CORE_READ(child, tgid);
	bpf_map_update_elem(&pid_filter, &ctgid, &one, BPF_ANY);
	return 0;
}

