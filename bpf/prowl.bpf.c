// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* prowl.bpf.c: the sample stage in the kernel. A perf_event program that records pid,
 * tid, CPU, comm, cgroup and both stacks (user: DWARF CFI tables or frame pointers) into a ring buffer. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "prowl.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by user space between open and load. */
const volatile __u32 filter_mode = PROWL_FILTER_ALL;
/* Wake the reader once this much is waiting (user space sets 1/8 of the ring). */
const volatile __u64 ringbuf_wakeup_bytes = PROWL_RINGBUF_SZ / 8;
/* Writable at run time (a configuration reload may change it). */
volatile bool keep_idle = false;
const volatile bool follow_children = false;
const volatile bool want_kernel = true;
const volatile bool want_user = true;
/* 1: unwind user stacks with DWARF CFI tables (x86_64); 0: frame pointers (bpf_get_stack). */
const volatile __u32 unwind_dwarf = 0;
/* Writable at run time: time every run into cost_hist. */
volatile bool time_samples = false;
/* Minimum time between two refresh requests for one process. */
const volatile __u64 unwind_req_interval_ns = PROWL_UNWIND_REQ_NS;

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

/* ---- DWARF unwinding state (sizes set by user space before load) ---- */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct prowl_unwind_row);
} unwind_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct prowl_unwind_map);
} unwind_maps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct prowl_unwind_proc);
} unwind_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} unwind_events SEC(".maps");

/* tgid -> time of its last refresh request. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} unwind_req_time SEC(".maps");

/* Stack memory is read through an aligned window: one helper call copies
 * STACK_WIN bytes, and most frames' slots are found in it. A window never
 * crosses a page (it divides the page size), so it reads what single reads
 * would. */
#define STACK_WIN 1024

struct uw_state {
	__u64 pc, sp, bp;
	__u32 n;          /* frames recorded */
	__u32 map_first, map_count;
	__u32 cur_map;    /* index of the mapping of the previous frame */
	__u8 bp_valid;
	__u8 exact;       /* pc is not a return address (first frame, after a signal) */
	__u8 done;
	__u8 reason;      /* enum prowl_ureason */
	__u8 sticky;      /* a reason that does not stop the walk (PROWL_UR_NO_TABLE) */
	__u8 want_refresh;
	__u64 win_base;   /* user address of win[0], 0 = empty */
	__u64 frames[PROWL_MAX_STACK];
	__u8 win[STACK_WIN];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct uw_state);
} unwind_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PROWL_COST_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} cost_hist SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);

	if (v)
		*v += 1;
}

#if defined(__TARGET_ARCH_x86)

#define KERNEL_MIN_ADDR 0xffff800000000000ull
#define MAX_MAP_SEARCH 16  /* 65536 mappings per process */
#define MAX_ROW_SEARCH 25  /* 32M rows per table (user space keeps tables smaller) */

static __always_inline void unwind_stop(struct uw_state *st, __u8 reason)
{
	st->reason = reason;
	st->done = 1;
}

/* The mapping covering addr, trying the previous frame's first. */
static __always_inline struct prowl_unwind_map *find_map(struct uw_state *st, __u64 addr)
{
	struct prowl_unwind_map *m;
	__u32 lo = 0, hi = st->map_count, idx = st->cur_map;

	m = bpf_map_lookup_elem(&unwind_maps, &idx);
	if (m && addr >= m->start && addr < m->end)
		return m;
	for (int i = 0; i < MAX_MAP_SEARCH; i++) {
		__u32 mid;

		if (lo >= hi)
			break;
		mid = (lo + hi) / 2;
		idx = st->map_first + mid;
		m = bpf_map_lookup_elem(&unwind_maps, &idx);
		if (!m)
			return NULL;
		if (addr < m->start) {
			hi = mid;
		} else if (addr >= m->end) {
			lo = mid + 1;
		} else {
			st->cur_map = idx;
			return m;
		}
	}
	return NULL;
}

/* The row covering rel in rows [first, first + count), or NULL. */
static __always_inline struct prowl_unwind_row *find_row(__u32 first, __u32 count, __u32 rel)
{
	struct prowl_unwind_row *r;
	__u32 lo = first, hi = first + count, mid;

	if (!count)
		return NULL;
	for (int i = 0; i < MAX_ROW_SEARCH; i++) {
		if (hi - lo <= 1)
			break;
		mid = lo + (hi - lo) / 2;
		r = bpf_map_lookup_elem(&unwind_rows, &mid);
		if (!r)
			return NULL;
		if (r->pc <= rel)
			lo = mid;
		else
			hi = mid;
	}
	r = bpf_map_lookup_elem(&unwind_rows, &lo);
	if (!r || r->pc > rel)
		return NULL;
	return r;
}

/* Reads the user stack word at addr (through the window). */
static __always_inline long stack_read(struct uw_state *st, __u64 addr, __u64 *ret)
{
	__u64 off = addr - st->win_base, base;

	if (addr & 7)
		return bpf_probe_read_user(ret, sizeof(*ret), (void *)addr);
	if (!st->win_base || addr < st->win_base || off > STACK_WIN - 8) {
		base = addr & ~(__u64)(STACK_WIN - 1);
		if (bpf_probe_read_user(st->win, STACK_WIN, (void *)base)) {
			st->win_base = 0;
			return -1;
		}
		st->win_base = base;
		off = addr - base;
	}
	*ret = *(__u64 *)(st->win + (off & (STACK_WIN - 8)));
	return 0;
}

/* One frame with frame pointers: [bp] = caller's bp, [bp + 8] = return address. */
static __always_inline void fp_step(struct uw_state *st, __u8 fail_reason)
{
	__u64 fr[2];

	if (!st->bp_valid) {
		unwind_stop(st, fail_reason);
		return;
	}
	if (st->bp == 0) { /* the ABI's outermost frame (_start clears rbp) */
		unwind_stop(st, PROWL_UR_NONE);
		return;
	}
	if (st->bp < st->sp) {
		unwind_stop(st, fail_reason);
		return;
	}
	if (stack_read(st, st->bp, &fr[0]) || stack_read(st, st->bp + 8, &fr[1])) {
		unwind_stop(st, PROWL_UR_READ);
		return;
	}
	st->sp = st->bp + 16;
	st->bp = fr[0];
	st->pc = fr[1];
	st->exact = 0;
	if (st->pc == 0)
		unwind_stop(st, PROWL_UR_NONE);
}

static long unwind_frame(__u32 i, void *ctx)
{
	__u32 zero = 0, n;
	struct uw_state *st = bpf_map_lookup_elem(&unwind_scratch, &zero);
	struct prowl_unwind_map *m;
	struct prowl_unwind_row *row;
	__u64 lookup, cfa, ra;
	__s64 rbp_off;
	__u8 rbp_rule;

	if (!st || st->done)
		return 1;
	n = st->n;
	if (n >= PROWL_MAX_STACK) {
		unwind_stop(st, PROWL_UR_DEPTH);
		return 1;
	}
	/* A pc after a signal frame is exact; +1 cancels the -1 the symbolizer
	 * applies to every frame but the leaf. */
	st->frames[n] = st->pc + (n > 0 && st->exact);
	st->n = n + 1;

	lookup = st->pc - !st->exact; /* a return address: look up the call */
	m = find_map(st, lookup);
	if (!m) {
		st->want_refresh = 1;
		unwind_stop(st, PROWL_UR_NO_MAPPING);
		return 1;
	}
	if (m->kind != PROWL_MAP_TABLE) {
		if (m->kind == PROWL_MAP_NO_TABLE)
			st->sticky = PROWL_UR_NO_TABLE;
		count(PROWL_CNT_UNWIND_FP_FRAMES);
		fp_step(st, m->kind == PROWL_MAP_NO_TABLE ? PROWL_UR_NO_TABLE : PROWL_UR_BAD_CFI);
		return st->done ? 1 : 0;
	}
	row = find_row(m->row_first, m->row_count, (__u32)(lookup - m->bias));
	if (!row) {
		unwind_stop(st, PROWL_UR_NO_FDE);
		return 1;
	}
	rbp_rule = PROWL_ROW_RBP(row);
	rbp_off = (__s64)row->rbp_off * 8;
	switch (PROWL_ROW_CFA(row)) {
	case PROWL_CFA_RSP:
		cfa = st->sp + (__u64)row->cfa_off * 8;
		break;
	case PROWL_CFA_RBP:
		if (!st->bp_valid) {
			unwind_stop(st, PROWL_UR_BAD_CFI);
			return 1;
		}
		cfa = st->bp + (__u64)row->cfa_off * 8;
		break;
	case PROWL_CFA_PLT:
		cfa = st->sp + (__u64)row->cfa_off * 8 + ((st->pc & 15) >= (__u64)row->rbp_off ? 8 : 0);
		break;
	case PROWL_CFA_END:
		unwind_stop(st, PROWL_UR_NONE);
		return 1;
	case PROWL_CFA_SIGNAL: {
		/* rt_sigreturn's frame: rsp points at the ucontext; its mcontext
		 * gregs hold rbp at +120, rsp at +160 and rip at +168. */
		__u64 rbp, rsp, rip;

		/* The trampoline's own pc was reached by the handler's return, but
		 * it is the first instruction of __restore_rt, not after a call:
		 * +1 so the symbolizer's -1 lands on it, not before it. */
		if (n > 0)
			st->frames[n] = st->pc + 1;
		if (stack_read(st, st->sp + 120, &rbp) || stack_read(st, st->sp + 160, &rsp) ||
		    stack_read(st, st->sp + 168, &rip)) {
			unwind_stop(st, PROWL_UR_READ);
			return 1;
		}
		st->bp = rbp;
		st->bp_valid = 1;
		st->sp = rsp;
		st->pc = rip;
		st->exact = 1;
		if (st->pc == 0)
			unwind_stop(st, PROWL_UR_NONE);
		return st->done ? 1 : 0;
	}
	case PROWL_CFA_NONE:
		unwind_stop(st, PROWL_UR_NO_FDE);
		return 1;
	default:
		unwind_stop(st, PROWL_UR_BAD_CFI);
		return 1;
	}
	/* The CFA lies above the frame; anything else is a corrupt frame or a loop. */
	if (cfa <= st->sp) {
		unwind_stop(st, PROWL_UR_BAD_CFI);
		return 1;
	}
	if (stack_read(st, cfa - 8, &ra)) {
		unwind_stop(st, PROWL_UR_READ);
		return 1;
	}
	if (rbp_rule == PROWL_RBP_CFA) {
		__u64 bp;

		if (stack_read(st, cfa + rbp_off, &bp)) {
			unwind_stop(st, PROWL_UR_READ);
			return 1;
		}
		st->bp = bp;
		st->bp_valid = 1;
	} else if (rbp_rule == PROWL_RBP_UNKNOWN) {
		st->bp_valid = 0;
	}
	st->sp = cfa;
	st->pc = ra;
	st->exact = 0;
	if (ra == 0)
		unwind_stop(st, PROWL_UR_NONE);
	return st->done ? 1 : 0;
}

static __always_inline void unwind_request(__u32 type, __u32 pid, __u64 pc)
{
	__u64 now = bpf_ktime_get_ns(), *last = bpf_map_lookup_elem(&unwind_req_time, &pid);
	struct prowl_unwind_event *ev;

	/* User space may push *last into the future to make a process ask less
	 * often (its mappings did not change): hence the signed difference. */
	if (last && (__s64)(now - *last) < (__s64)unwind_req_interval_ns)
		return;
	bpf_map_update_elem(&unwind_req_time, &pid, &now, BPF_ANY);
	ev = bpf_ringbuf_reserve(&unwind_events, sizeof(*ev), 0);
	if (!ev) {
		count(PROWL_CNT_UNWIND_REQ_LOST);
		return;
	}
	ev->type = type;
	ev->pid = pid;
	ev->pc = pc;
	bpf_ringbuf_submit(ev, 0);
	count(PROWL_CNT_UNWIND_REQ);
}

/* Unwinds the current task's user stack into the per-CPU scratch state.
 * Returns it, or NULL when the process is unknown (a request was sent;
 * *fp_only = 0) or must use frame pointers (*fp_only = 1, 32-bit code). */
static __always_inline struct uw_state *dwarf_unwind(struct bpf_perf_event_data *ctx, __u32 tgid, int *fp_only)
{
	struct prowl_unwind_proc *proc = bpf_map_lookup_elem(&unwind_procs, &tgid);
	struct uw_state *st;
	__u32 zero = 0;

	if (!proc) {
		unwind_request(PROWL_UEV_UNKNOWN_PID, tgid, 0);
		return NULL;
	}
	if (proc->map_first == PROWL_PROC_FP) {
		*fp_only = 1;
		return NULL;
	}
	st = bpf_map_lookup_elem(&unwind_scratch, &zero);
	if (!st)
		return NULL;
	if (ctx->regs.ip >= KERNEL_MIN_ADDR) {
		/* In the kernel: the user registers are saved at the top of the task's stack. */
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());

		st->pc = BPF_CORE_READ(regs, ip);
		st->sp = BPF_CORE_READ(regs, sp);
		st->bp = BPF_CORE_READ(regs, bp);
	} else {
		st->pc = ctx->regs.ip;
		st->sp = ctx->regs.sp;
		st->bp = ctx->regs.bp;
	}
	st->n = 0;
	st->map_first = proc->map_first;
	st->map_count = proc->map_count;
	st->cur_map = proc->map_first;
	st->bp_valid = 1;
	st->exact = 1;
	st->done = 0;
	st->reason = 0;
	st->sticky = 0;
	st->want_refresh = 0;
	st->win_base = 0;
	if (st->pc == 0 || st->pc >= KERNEL_MIN_ADDR)
		return st; /* nothing to unwind (no user context) */
	bpf_loop(PROWL_MAX_STACK + 1, unwind_frame, NULL, 0);
	if (!st->reason)
		st->reason = st->sticky;
	if (st->want_refresh)
		unwind_request(PROWL_UEV_UNKNOWN_PC, tgid, st->pc);
	return st;
}

#else /* !x86 */

static __always_inline struct uw_state *dwarf_unwind(struct bpf_perf_event_data *ctx, __u32 tgid, int *fp_only)
{
	return NULL;
}

#endif

SEC("perf_event")
int prowl_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	__u64 t0 = time_samples ? bpf_ktime_get_ns() : 0;
	struct uw_state *ust = NULL;
	int fp_only = 0;
	struct task_struct *task;
	struct prowl_sample *e;
	bool has_mm;
	long n;

	if (tid == 0 && !keep_idle) {
		count(PROWL_CNT_IDLE);
		return 0;
	}
	if (filter_mode == PROWL_FILTER_PIDS && !bpf_map_lookup_elem(&pid_filter, &tgid)) {
		count(PROWL_CNT_FILTERED);
		return 0;
	}

	task = (struct task_struct *)bpf_get_current_task();
	has_mm = BPF_CORE_READ(task, mm) != NULL;
	/* DWARF unwinding runs before the reservation: the ring buffer is not held
	 * across the loop, and the frames are copied in afterwards. */
	if (unwind_dwarf && want_user && has_mm)
		ust = dwarf_unwind(ctx, tgid, &fp_only);

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PROWL_CNT_LOST);
		goto out;
	}
	e->time_ns = bpf_ktime_get_ns();
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->pid = tgid;
	e->tid = tid;
	e->cpu = bpf_get_smp_processor_id();
	e->flags = 0;
	e->_pad[0] = e->_pad[1] = e->_pad[2] = 0;
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
	e->ureason = 0;
	/* Kernel threads have no user stack; their mm is NULL. */
	if (want_user && has_mm) {
		if (ust) { /* DWARF-unwound (never on other architectures) */
			__u32 un = ust->n;

			if (un > PROWL_MAX_STACK)
				un = PROWL_MAX_STACK;
			if (un)
				bpf_probe_read_kernel(e->ustack, (un & 0x7f) * sizeof(__u64), ust->frames);
			e->ustack_len = un;
			e->ureason = ust->reason;
			if (ust->reason == PROWL_UR_DEPTH)
				e->flags |= PROWL_SAMPLE_USTACK_TRUNC;
			if (ust->reason && ust->reason < PROWL_UR__MAX)
				count(PROWL_CNT_UNWIND_TRUNC + ust->reason - 1);
			goto user_done;
		}
		n = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
		if (n < 0)
			count(PROWL_CNT_USTACK_ERR);
		else
			e->ustack_len = n / sizeof(__u64);
		if (e->ustack_len >= PROWL_MAX_STACK)
			e->flags |= PROWL_SAMPLE_USTACK_TRUNC;
		if (unwind_dwarf && !fp_only) {
			/* Not known to the unwinder yet: frame pointers, marked as such. */
			e->ureason = PROWL_UR_NEW_PROC;
			count(PROWL_CNT_UNWIND_TRUNC + PROWL_UR_NEW_PROC - 1);
		}
	}
user_done:

	count(PROWL_CNT_SAMPLES);
	/* Waking the reader costs microseconds per sample (an IPI): wake it only
	 * once an eighth of the ring is full; it polls with a timeout anyway. */
	bpf_ringbuf_submit(e, bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= ringbuf_wakeup_bytes
				      ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
out:
	if (t0) {
		__u64 b = (bpf_ktime_get_ns() - t0) / PROWL_COST_BUCKET_NS;
		__u32 k = b >= PROWL_COST_BUCKETS ? PROWL_COST_BUCKETS - 1 : (__u32)b;
		__u64 *v = bpf_map_lookup_elem(&cost_hist, &k);

		if (v)
			*v += 1;
	}
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


static __always_inline void proc_gone(struct task_struct *p, __u32 type)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct prowl_unwind_event *ev;

	/* Only processes the unwinder knows are reported. */
	if (bpf_map_delete_elem(&unwind_procs, &tgid))
		return;
	ev = bpf_ringbuf_reserve(&unwind_events, sizeof(*ev), 0);
	if (!ev) {
		count(PROWL_CNT_UNWIND_REQ_LOST);
		return;
	}
	ev->type = type;
	ev->pid = tgid;
	ev->pc = 0;
	bpf_ringbuf_submit(ev, 0);
}

/* exec replaced the process's mappings: drop them; the next sample asks again,
 * right away. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(prowl_exec, struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);

	bpf_map_delete_elem(&unwind_req_time, &tgid);
	proc_gone(p, PROWL_UEV_EXEC);
	return 0;
}

/* The last thread of a process exited. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(prowl_exit, struct task_struct *p)
{
	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0;
	proc_gone(p, PROWL_UEV_EXIT);
	return 0;
}
