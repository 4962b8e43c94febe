/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* offcpu.bpf.h: off-CPU samples from sched_switch: a wait of d is kept with p = min(1, d / T)
 * and weighs d / p; its stacks are taken in the task's own context, with the on-CPU unwinders. */

/* Included twice by prowl.bpf.c: first the maps and helpers (before emit() and
 * take()), then, with PROWL_OFFCPU_PROGRAMS, the programs (after them).
 *
 * The life of a wait (kernels without kprobes or fentry have nothing else):
 * 1. sched_switch, prev leaves the CPU: offcpu_start[tid] (or its offcpu_task
 *    entry) = when its CPU time stopped (its switch in + the CPU time billed
 *    since: offcpu_out()).
 * 2. sched_switch, next comes back (prev's context): d = now - start; kept with
 *    p = min(1, d / T); a kept one becomes offcpu_pending[tid] = { d / p, the
 *    kernel stack next still sleeps on (bpf_get_task_stack) }.
 * 3. The task's own context, the first of: its syscall returning (sys_exit), or
 *    its next switch out: its user stack (DWARF, Python, Java: take()) is where it
 *    waited, and the sample is written with the kernel stack of step 2. */

#ifndef PROWL_OFFCPU_PROGRAMS
#ifndef PROWL_OFFCPU_MAPS_H
#define PROWL_OFFCPU_MAPS_H

/* T in ns (user space sets it before load; <= PROWL_OFFCPU_T_MAX). */
const volatile __u64 offcpu_threshold_ns = PROWL_OFFCPU_T_DEFAULT;

/* tid -> when it left the CPU (bpf_ktime_get_ns), or, while it runs, its switch
 * in - its CPU time then (se.sum_exec_runtime). Bounded: a switch that finds
 * it full is counted (PROWL_CNT_OFFCPU_FULL) and that wait is not seen. User
 * space sizes it (PROWL_OFFCPU_TASKS by default). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROWL_OFFCPU_TASKS);
	__type(key, __u32);
	__type(value, __u64);
} offcpu_start SEC(".maps");

/* The same entries in task-local storage, where a tp_btf program has it (5.12+,
 * which has task_struct.bpf_storage): no hash of the tid at every switch, and
 * an entry goes with its task. offcpu_task_on: user space found the map type,
 * allocated from bpf_mem_alloc (agent/sample/offcpu.c: never kmalloc under the run
 * queue's lock); else it makes this map a one-slot array, and offcpu_start is used. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} offcpu_task SEC(".maps");

const volatile bool offcpu_task_on = false;

struct offcpu_pending {
	__u64 off_ns; /* the weight d / p */
	__u32 klen;   /* frames in kstack */
	__u32 _pad;
	__u64 kstack[PROWL_MAX_STACK];
};

/* tid -> its kept wait, until its own context writes the sample. Entries live
 * for microseconds; allocated on use where the kernel's BPF allocates from
 * bpf_mem_alloc, else preallocated and fewer (offcpu.c). A full map is counted
 * like offcpu_start. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct offcpu_pending);
} offcpu_pending SEC(".maps");

/* Where a pending entry is built (too large for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct offcpu_pending);
} offcpu_scratch SEC(".maps");

/* Entries in offcpu_pending (approximately: a hint that spares every syscall
 * exit a hash lookup while there are none). */
__u64 offcpu_npending = 0;

static __always_inline struct offcpu_pending *offcpu_pending_get(__u32 tid)
{
	return bpf_map_lookup_elem(&offcpu_pending, &tid);
}

static __always_inline void offcpu_pending_done(__u32 tid)
{
	if (bpf_map_delete_elem(&offcpu_pending, &tid) == 0)
		__sync_fetch_and_add(&offcpu_npending, -1);
}

#endif /* PROWL_OFFCPU_MAPS_H */
#else /* PROWL_OFFCPU_PROGRAMS */

/* PF_KTHREAD (include/linux/sched.h): kernel threads wait for work, not for
 * someone; they are left out like the idle task unless --idle. */
#define OFFCPU_PF_KTHREAD 0x00200000

/* A field of a task: a plain load where it is a BTF pointer (tp_btf: no helper
 * call, this runs at every context switch), bpf_probe_read_kernel otherwise. */
#define OFFCPU_READ(ch, t, field) ((ch) == CH_BTF ? (t)->field : BPF_CORE_READ(t, field))

/* Whether a chain's program keeps the entries in offcpu_task: a constant, so the
 * other map's code is left out (a load-time constant on 5.10, which lacks the helpers). */
#define OFFCPU_TS(ch) \
	((ch) == CH_BTF && offcpu_task_on && bpf_core_field_exists(struct task_struct, bpf_storage))

/* The entry of task t (thread tid) in offcpu_task or offcpu_start: its lookup, its
 * creation with value v (0, or -1 when the map is full) and its removal. */
static __always_inline __u64 *offcpu_entry(enum chain ch, struct task_struct *t, __u32 tid)
{
	if (OFFCPU_TS(ch))
		return bpf_task_storage_get(&offcpu_task, t, NULL, 0);
	return bpf_map_lookup_elem(&offcpu_start, &tid);
}

static __always_inline int offcpu_entry_new(enum chain ch, struct task_struct *t, __u32 tid, __u64 v)
{
	if (OFFCPU_TS(ch))
		return bpf_task_storage_get(&offcpu_task, t, &v, BPF_LOCAL_STORAGE_GET_F_CREATE) ? 0 : -1;
	return bpf_map_update_elem(&offcpu_start, &tid, &v, BPF_ANY);
}

static __always_inline void offcpu_entry_del(enum chain ch, struct task_struct *t, __u32 tid)
{
	if (OFFCPU_TS(ch))
		bpf_task_storage_delete(&offcpu_task, t);
	else
		bpf_map_delete_elem(&offcpu_start, &tid);
}

/* Whether a task's waits are never recorded: the idle task and kernel threads
 * (unless --idle). Decided from the task alone, before any map work. */
#define OFFCPU_IDLE(ch, t, tid) (!keep_idle && (!(tid) || (OFFCPU_READ(ch, t, flags) & OFFCPU_PF_KTHREAD)))

/* next is back on the CPU after a wait: keep it with p = min(1, d / T). Its
 * kernel stack is read here (it still sleeps on it) where next is a BTF pointer
 * (tp_btf); a raw tracepoint cannot pass it to bpf_get_task_stack (btf false). */
static __always_inline void offcpu_back(struct task_struct *next, enum chain ch, __u64 entry)
{
	__u32 tid = OFFCPU_READ(ch, next, pid);
	__u64 T = offcpu_threshold_ns;
	struct offcpu_pending *pe;
	__u64 *startp, d;
	__u32 zero = 0;

	if (OFFCPU_IDLE(ch, next, tid)) /* never has an entry */
		return;
	startp = offcpu_entry(ch, next, tid);
	if (!startp)
		return;
	d = entry - *startp;
	/* While it runs, the entry holds entry - its CPU time so far: at its next
	 * switch out, adding the CPU time then gives when this run's billing ended. */
	*startp = entry - OFFCPU_READ(ch, next, se.sum_exec_runtime);
	if ((__s64)d <= 0)
		return;
	if (d < T) {
		/* Kept when u < d / T for u uniform in [0, 1): u = r / 2^32. The
		 * products stay below 2^62 (T <= 2^30 ns). A kept short wait
		 * weighs d / (d / T) = T. Most short waits end here. */
		if ((__u64)bpf_get_prandom_u32() * T >= d << 32) {
			count(PROWL_CNT_OFFCPU_SKIPPED);
			return;
		}
		d = T;
	}
	pe = bpf_map_lookup_elem(&offcpu_scratch, &zero);
	if (!pe)
		return;
	pe->off_ns = d;
	pe->klen = 0;
	if (ch == CH_BTF) {
		long n = bpf_get_task_stack(next, pe->kstack, sizeof(pe->kstack), 0);

		if (n < 0)
			count(PROWL_CNT_KSTACK_ERR);
		else
			pe->klen = n / sizeof(__u64);
	}
	if (bpf_map_update_elem(&offcpu_pending, &tid, pe, BPF_NOEXIST) == 0) {
		__sync_fetch_and_add(&offcpu_npending, 1);
		return;
	}
	/* Still pending from its last wait (no syscall exit or switch since): the
	 * two add up under the older one's stack. Else the map is full. */
	pe = bpf_map_lookup_elem(&offcpu_pending, &tid);
	if (pe) {
		__sync_fetch_and_add(&pe->off_ns, d);
		return;
	}
	count(PROWL_CNT_OFFCPU_FULL);
	count_add(PROWL_CNT_OFFCPU_LOST_NS, d);
}

/* prev leaves the CPU: its wait starts where the kernel stopped billing it CPU
 * time, not at this switch: its switch in + the CPU time billed since
 * (schedstat, se.sum_exec_runtime, updated before this tracepoint). The two
 * differ: a wakeup that preempts (the idle task above all) skips the next clock
 * update (rq_clock_skip_update), so the woken task is billed from its wakeup,
 * microseconds before its switch in (an idle CPU's exit, tick restart); and this
 * program's own run here is billed to next, not prev. Timed by the switches
 * alone, each wait overlapped the task's CPU time by that much: off-CPU + CPU
 * exceeded the wall time by ~5 us a wait on an idle machine. Now the waits and
 * the CPU time add up to the wall time. Unseen switch in (a task running at the
 * start): now. */
static __always_inline void offcpu_out(struct task_struct *prev, enum chain ch, __u32 tgid, __u32 tid, __u64 entry,
				       bool dwarf)
{
	__u64 *runp;

	if (!tid && !keep_idle) /* the idle task: it never exits */
		return;
	if (OFFCPU_READ(ch, prev, exit_state)) { /* exiting: it starts no wait */
		/* Its entry goes, even a kernel thread's left from an --idle run
		 * before a reload (its tid may be reused), and task-local storage
		 * too: an exiting task may still come back before its last switch,
		 * and its entry, left in its running form (switch in - CPU time),
		 * would make its whole CPU time a wait (a ping-pong's estimate came
		 * out 60-90 % high). */
		offcpu_entry_del(ch, prev, tid);
		return;
	}
	if (OFFCPU_IDLE(ch, prev, tid))
		return;
	if (filter_mode == PROWL_FILTER_PIDS && !bpf_map_lookup_elem(&pid_filter, &tgid))
		return; /* never has an entry: a -p filter only grows */
	if ((self_tgid && tgid == self_tgid) || (drop_on && bpf_map_lookup_elem(&pid_drop, &tgid))) {
		/* Left out since a reload or a relabeling: its entry goes too. */
		offcpu_entry_del(ch, prev, tid);
		return;
	}
	runp = offcpu_entry(ch, prev, tid);
	if (runp) {
		*runp += OFFCPU_READ(ch, prev, se.sum_exec_runtime);
		return;
	}
	if (offcpu_entry_new(ch, prev, tid, entry)) {
		count(PROWL_CNT_OFFCPU_FULL);
		return;
	}
#if defined(PROWL_BPF_DWARF)
	/* A thread's first wait: its stack is walked only when the wait ends, and a
	 * process the unwinder does not know yet is walked by frame pointers then. A
	 * program that starts by sleeping (a server waiting for work) would wait first and be
	 * loaded after: ask for it now. */
	if (dwarf && !bpf_map_lookup_elem(&unwind_procs, &tgid))
		unwind_request(PROWL_UEV_UNKNOWN_PID, tgid, 0);
#endif
}

/* One context switch, in prev's context: next's wait ends, prev's starts, and
 * last (a tail call does not come back) prev's pending sample is written, in
 * its own context. next's wait ends as the program starts; prev's began where its
 * CPU time (schedstat) stopped, so a thread's waits and its CPU time add up to
 * its wall time, whatever the kernel bills to whom around the switch. */
static __always_inline int offcpu_switch(void *ctx, enum unwinder unw, enum chain ch, struct task_struct *prev,
					 struct task_struct *next)
{
	__u64 entry = bpf_ktime_get_ns();
	__u32 tid = OFFCPU_READ(ch, prev, pid), tgid = OFFCPU_READ(ch, prev, tgid);

	offcpu_back(next, ch, entry);
	offcpu_out(prev, ch, tgid, tid, entry, unw != UNW_FP);
	if (offcpu_npending && offcpu_pending_get(tid))
		take(ctx, unw, (__u64)tgid << 32 | tid, ch);
	return 0;
}

/* A syscall returns: the task's own context, its user registers those of the
 * syscall it waited in. */
static __always_inline int offcpu_sysexit(void *ctx, enum unwinder unw)
{
	__u64 id;

	if (!offcpu_npending)
		return 0;
	id = bpf_get_current_pid_tgid();
	if (!offcpu_pending_get((__u32)id))
		return 0;
	return take(ctx, unw, id, CH_RAW);
}

/* sched_switch as tp_btf (5.5+), or a raw tracepoint where tracing programs
 * cannot attach by BTF (off-CPU kernel stacks are then left empty); one per
 * unwinder, like the perf_event programs. */
#define OFFCPU_SWITCH(name, sec, unw, ch)                                                                 \
	SEC(sec)                                                                                           \
	int BPF_PROG(name, bool preempt, struct task_struct *prev, struct task_struct *next)              \
	{                                                                                                  \
		return offcpu_switch(ctx, unw, ch, prev, next);                                            \
	}
OFFCPU_SWITCH(prowl_offcpu_switch_fp, "tp_btf/sched_switch", UNW_FP, CH_BTF)
OFFCPU_SWITCH(prowl_offcpu_switch_dwarf, "tp_btf/sched_switch", UNW_DWARF_LOOP, CH_BTF)
OFFCPU_SWITCH(prowl_offcpu_switch_bounded, "tp_btf/sched_switch", UNW_DWARF_BOUNDED, CH_BTF)
OFFCPU_SWITCH(prowl_offcpu_switch_fp_raw, "raw_tp/sched_switch", UNW_FP, CH_RAW)
OFFCPU_SWITCH(prowl_offcpu_switch_dwarf_raw, "raw_tp/sched_switch", UNW_DWARF_LOOP, CH_RAW)
OFFCPU_SWITCH(prowl_offcpu_switch_bounded_raw, "raw_tp/sched_switch", UNW_DWARF_BOUNDED, CH_RAW)

/* sys_exit needs no BTF pointer: a raw tracepoint on every kernel. */
SEC("raw_tp/sys_exit")
int prowl_offcpu_sysexit_fp(void *ctx)
{
	return offcpu_sysexit(ctx, UNW_FP);
}

SEC("raw_tp/sys_exit")
int prowl_offcpu_sysexit_dwarf(void *ctx)
{
	return offcpu_sysexit(ctx, UNW_DWARF_LOOP);
}

SEC("raw_tp/sys_exit")
int prowl_offcpu_sysexit_bounded(void *ctx)
{
	return offcpu_sysexit(ctx, UNW_DWARF_BOUNDED);
}

/* prowl_unwind_step of the off-CPU programs: for the raw tracepoints, and for
 * tp_btf/sched_switch (a tp_btf program tail-calls programs of its own hook). */
SEC("raw_tp/sys_exit")
int prowl_offcpu_step_raw(void *ctx)
{
	return unwind_step_run(ctx, CH_RAW);
}

SEC("tp_btf/sched_switch")
int prowl_offcpu_step_btf(void *ctx)
{
	return unwind_step_run(ctx, CH_BTF);
}

#endif /* PROWL_OFFCPU_PROGRAMS */
