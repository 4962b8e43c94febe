/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* offcpu_floor.bpf.c: the floor of off-CPU profiling's cost (tests/bench/offcpu.sh): the two
 * hooks prowl's off-CPU programs attach to, doing nothing. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("tp_btf/sched_switch")
int BPF_PROG(floor_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return 0;
}

SEC("raw_tp/sys_exit")
int floor_sysexit(void *ctx)
{
	return 0;
}
