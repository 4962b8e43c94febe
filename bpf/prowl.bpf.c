// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* prowl.bpf.c: the sample stage in the kernel. perf_event programs that record pid, tid,
 * CPU, comm, cgroup and both stacks into a ring buffer; user space loads the one its kernel runs. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "prowl.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by user space between open and load. */
const volatile __u32 filter_mode = PROWL_FILTER_ALL;
/* Wake the reader once this much is waiting (user space sets a share of the ring). */
const volatile __u64 ringbuf_wakeup_bytes = PROWL_RINGBUF_SZ / PROWL_RINGBUF_WAKE_DIV;
/* Writable at run time (a configuration reload may change it). */
volatile bool keep_idle = false;
/* prowl's own tgid, whose samples are dropped; 0 keeps them (--include-self).
 * Writable at run time, as a reload may change it. */
volatile __u32 self_tgid = 0;
/* Set by user space once it drops a process (pid_drop): until then no program
 * looks pid_drop up (the off-CPU program runs at every context switch). */
volatile bool drop_on = false;
const volatile bool follow_children = false;
/* Writable at run time: time every run into cost_hist. */
volatile bool time_samples = false;

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

/* tgids relabeling excludes (agent): their samples stop here. exec and exit
 * remove a tgid, so a new program or a reused pid is looked at again. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROWL_DROP_MAX);
	__type(key, __u32);
	__type(value, __u8);
} pid_drop SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PROWL_CNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PROWL_COST_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} cost_hist SEC(".maps");

static __always_inline void count_add(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);

	if (v)
		*v += n;
}

static __always_inline void count(__u32 idx)
{
	count_add(idx, 1);
}

#include "unwind.bpf.h"
#include "python.bpf.h"
#include "offcpu.bpf.h"

/* Writable at run time: walk CPython frames of the processes in py_procs. */
volatile bool python_on = true;

/* Bounds a frame count for the verifier before it sizes a copy. */
#define USTACK_LEN_MASK 0x7f
_Static_assert(PROWL_MAX_STACK <= USTACK_LEN_MASK, "USTACK_LEN_MASK must cover PROWL_MAX_STACK");

/* Which user-stack unwinder a sampling program carries (one is loaded). */
enum unwinder {
	UNW_FP,           /* frame pointers (bpf_get_stack) */
	UNW_DWARF_LOOP,   /* DWARF CFI, frames stepped by bpf_loop */
	UNW_DWARF_BOUNDED /* DWARF CFI, bounded loops chained by tail calls */
};

/* Writes the sample of the current task: ust holds its DWARF-unwound user stack,
 * or is NULL for a frame-pointer walk (marked with fp_reason when not 0); ps its
 * Python frames, or NULL. A sample without Python frames is shorter in the ring. */
static __always_inline void emit(struct bpf_perf_event_data *ctx, struct task_struct *task, __u64 id, bool has_mm,
				 struct uw_state *ust, __u8 fp_reason, __u64 t0, struct py_state *ps,
				 struct offcpu_pending *pend)
{
	__u64 off_ns = pend ? pend->off_ns : 0;
	struct prowl_sample *e;
	__u64 pn = 0;
	long n;

	if (ps) {
		pn = ps->n;
		if (pn > PROWL_MAX_PY)
			pn = PROWL_MAX_PY;
	}
#if defined(__TARGET_ARCH_x86)
	if (!pn && ust && ust->jn)
		pn = ust->jn > PROWL_MAX_JAVA ? PROWL_MAX_JAVA : ust->jn;
#endif
	if (pn)
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	else
		e = bpf_ringbuf_reserve(&events, PROWL_SAMPLE_NOPY_SIZE, 0);
	if (!e) {
		if (off_ns) {
			count(PROWL_CNT_OFFCPU_LOST);
			count_add(PROWL_CNT_OFFCPU_LOST_NS, off_ns);
		} else {
			count(PROWL_CNT_LOST);
		}
		goto out;
	}
	e->time_ns = bpf_ktime_get_ns();
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->cpu = bpf_get_smp_processor_id();
	e->flags = off_ns ? PROWL_SAMPLE_OFFCPU : 0; /* before the frames: PROWL_SAMPLE_JAVA is set with them */
	e->off_ns = off_ns;
	e->pyreason = ps ? ps->reason : 0;
	e->pygen = ps ? ps->gen : 0;
	e->_pad = 0;
	e->pystack_len = 0;
	if (pn && ps && ps->n) {
		/* Only the frames there are (all 128 slots were 2 KiB a sample): the
		 * size is masked in the register right before the call (py_slot()),
		 * which every kernel's verifier follows; 128 take the constant size. */
		if (pn >= PROWL_MAX_PY)
			bpf_probe_read_kernel(e->pystack, sizeof(e->pystack), ps->frames);
		else
			bpf_probe_read_kernel(e->pystack, py_slot(pn) * sizeof(e->pystack[0]), ps->frames);
		e->pystack_len = pn;
		count(PROWL_CNT_PY_SAMPLES);
	}
#if defined(__TARGET_ARCH_x86)
	else if (pn && ust) {
		bpf_probe_read_kernel(e->jstack, sizeof(e->jstack), ust->jframes);
		e->pystack_len = pn;
		e->pygen = ust->v8 ? ust->vp.gen : ust->jp.gen;
		e->flags |= ust->v8 ? PROWL_SAMPLE_V8 : PROWL_SAMPLE_JAVA;
	}
#endif
	if (ps && ps->reason)
		count(PROWL_CNT_PY_TRUNC);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	/* A reserved record is not zeroed, and a _str read stops at the NUL: the
	 * bytes after it would be another sample's, and user space compares all 16. */
	__builtin_memset(e->pcomm, 0, sizeof(e->pcomm));
	BPF_CORE_READ_STR_INTO(&e->pcomm, task, group_leader, comm);

	/* The kernel stack is empty when the CPU was in user mode; an off-CPU
	 * sample's was read when the task was switched back in. */
	e->kstack_len = 0;
	if (pend) {
		bpf_probe_read_kernel(e->kstack, sizeof(e->kstack), pend->kstack);
		e->kstack_len = pend->klen > PROWL_MAX_STACK ? PROWL_MAX_STACK : pend->klen;
	} else if (!in_user_mode(ctx)) {
		/* (Caught in user mode, a task has no kernel stack, and bpf_get_stack would
		 * zero its whole buffer, 1 KiB, to say so.) */
		n = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
		if (n < 0)
			count(PROWL_CNT_KSTACK_ERR);
		else
			e->kstack_len = n / sizeof(__u64);
	}
	if (e->kstack_len)
		e->flags |= PROWL_SAMPLE_KERNEL_MODE;
	if (e->kstack_len >= PROWL_MAX_STACK)
		e->flags |= PROWL_SAMPLE_KSTACK_TRUNC;

	e->ustack_len = 0;
	e->ureason = 0;
	/* Kernel threads have no user stack; their mm is NULL. */
	if (has_mm) {
		if (ust) { /* DWARF-unwound (never on other architectures) */
			__u32 un = ust->n;

			if (un > PROWL_MAX_STACK)
				un = PROWL_MAX_STACK;
			if (un)
				bpf_probe_read_kernel(e->ustack, (un & USTACK_LEN_MASK) * sizeof(__u64), ust->frames);
			e->ustack_len = un;
			e->ureason = ust->reason;
			if (ust->reason == PROWL_UR_DEPTH)
				e->flags |= PROWL_SAMPLE_USTACK_TRUNC;
			if (ust->reason && ust->reason < PROWL_UR__MAX)
				count(PROWL_CNT_UNWIND_TRUNC_OF(ust->reason));
			goto user_done;
		}
		n = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
		if (n < 0)
			count(PROWL_CNT_USTACK_ERR);
		else
			e->ustack_len = n / sizeof(__u64);
		e->flags |= PROWL_SAMPLE_USTACK_FP;
		if (e->ustack_len >= PROWL_MAX_STACK)
			e->flags |= PROWL_SAMPLE_USTACK_TRUNC;
		if (fp_reason && fp_reason < PROWL_UR__MAX) {
			/* Unwound with frame pointers in DWARF mode: marked as such. */
			e->ureason = fp_reason;
			count(PROWL_CNT_UNWIND_TRUNC_OF(fp_reason));
		}
	}
user_done:

	count(off_ns ? PROWL_CNT_OFFCPU_SAMPLES : PROWL_CNT_SAMPLES);
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
}

/* Whether samples of thread tid of process tgid are kept: not idle (unless
 * --idle), not prowl, inside -p/-- COMMAND, not excluded by relabeling. An
 * on-CPU sample counts why it was left out (counted); a context switch does not. */
static __always_inline bool wanted(__u32 tgid, __u32 tid, bool counted)
{
	__u32 why = PROWL_CNT__MAX;

	if (tid == 0 && !keep_idle)
		why = PROWL_CNT_IDLE;
	else if (self_tgid && tgid == self_tgid)
		why = PROWL_CNT_FILTERED;
	else if (filter_mode == PROWL_FILTER_PIDS && !bpf_map_lookup_elem(&pid_filter, &tgid))
		why = PROWL_CNT_FILTERED;
	else if (drop_on && bpf_map_lookup_elem(&pid_drop, &tgid))
		why = PROWL_CNT_DROPPED;
	if (why == PROWL_CNT__MAX)
		return true;
	if (counted)
		count(why);
	return false;
}

/* Which program takes a sample, hence the prog array that chains the bounded
 * unwinder's runs (one per program type and attach point). */
enum chain {
	CH_PERF, /* perf_event: an on-CPU sample */
	CH_RAW,  /* raw tracepoints: an off-CPU sample */
	CH_BTF,  /* tp_btf/sched_switch: an off-CPU sample */
};
/* The per-CPU scratch slot (unwind_scratch, py_scratch) of a chain: a CPU-clock
 * sample may interrupt an off-CPU program, which must not share its state. */
#define SCRATCH_SLOT(ch) ((ch) == CH_PERF ? 0 : 1)
#define UNWIND_CHAIN(ch) \
	((ch) == CH_RAW ? (void *)&offcpu_chain_raw : (ch) == CH_BTF ? (void *)&offcpu_chain_btf : (void *)&unwind_chain)

/* Takes the stacks of the current task (id) and writes its sample: on-CPU
 * (CH_PERF), or the off-CPU one pending for it. unw and ch are constants in each
 * program, so each carries one unwinder and one chain only. */
static __always_inline int take(void *pctx, enum unwinder unw, __u64 id, enum chain ch)
{
	struct bpf_perf_event_data *ctx = pctx;
	bool off = ch != CH_PERF;
	__u32 tgid = id >> 32, tid = (__u32)id, slot = SCRATCH_SLOT(ch);
	struct offcpu_pending *pend = NULL;
	__u64 t0 = time_samples ? bpf_ktime_get_ns() : 0;
	struct uw_state *ust = NULL;
	struct py_state *ps = NULL;
	__u8 fp_reason = PROWL_UR_NONE;
	struct task_struct *task;
	bool has_mm;

	if (off) {
		pend = offcpu_pending_get(tid);
		if (!pend) /* taken meanwhile (the other off-CPU program preempted this one) */
			return 0;
	}
	task = (struct task_struct *)bpf_get_current_task();
	has_mm = BPF_CORE_READ(task, mm) != NULL;
	/* Python frames first, from one place whatever the native unwinding does
	 * next: the verifier checks the walk once, not once per way a native
	 * unwind can end (it was 400,000 of the bounded build's first program's
	 * 401,000 instructions). The thread is stopped: the order reads the same. */
	if (python_on && has_mm)
		ps = py_walk(tgid, tid, slot);
#if defined(PROWL_BPF_DWARF)
	/* DWARF unwinding runs before the reservation: the ring buffer is not held
	 * across the walk, and the frames are copied in afterwards. */
	if (unw != UNW_FP && has_mm)
		ust = dwarf_begin(off ? NULL : ctx, tgid, &fp_reason, unw == UNW_DWARF_LOOP ? UW_LOOP : UW_BOUNDED, slot);
	if (ust && unw == UNW_DWARF_LOOP) {
		bpf_loop(PROWL_MAX_STACK + 1, unwind_frame_cb, &slot, 0);
	} else if (ust && unw == UNW_DWARF_BOUNDED && !ust->done) {
		/* Every frame is stepped in prowl_unwind_step: this program stays small,
		 * and the verifier checks the stepping code once, not twice. */
		ust->t0 = t0;
		ust->py = ps != NULL; /* the last run finds them in py_scratch */
		bpf_tail_call(ctx, UNWIND_CHAIN(ch), 0);
		unwind_stop(ust, PROWL_UR_DEPTH); /* no next run: the chain ends here */
	}
	if (ust)
		dwarf_end(ust, tgid);
#endif
	emit(ctx, task, id, has_mm, ust, fp_reason, t0, ps, pend);
	if (off)
		offcpu_pending_done(tid);
	return 0;
}

/* One on-CPU sample of the current task. */
static __always_inline int sample(struct bpf_perf_event_data *ctx, enum unwinder unw)
{
	__u64 id = bpf_get_current_pid_tgid();

	if (!wanted(id >> 32, (__u32)id, true))
		return 0;
	return take(ctx, unw, id, CH_PERF);
}

/* User stacks by frame pointers: every kernel with BTF and a ring buffer (5.8+). */
SEC("perf_event")
int prowl_sample_fp(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, UNW_FP);
}

/* DWARF unwinding with bpf_loop, bpf_task_pt_regs and bpf_get_current_task_btf (5.17+). */
SEC("perf_event")
int prowl_sample_dwarf(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, UNW_DWARF_LOOP);
}

/* DWARF unwinding with bounded loops and no newer helper (5.8+): the setup here,
 * the frames in prowl_unwind_step. */
SEC("perf_event")
int prowl_sample_dwarf_bounded(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, UNW_DWARF_BOUNDED);
}

/* One run of the bounded build: UW_CHUNK frames; the last run writes the sample. */
static __always_inline int unwind_step_run(void *ctx, enum chain ch)
{
#if defined(PROWL_BPF_DWARF)
	bool off = ch != CH_PERF;
	__u64 id = bpf_get_current_pid_tgid();
	struct offcpu_pending *pend = NULL;
	__u32 slot = SCRATCH_SLOT(ch);
	struct uw_state *st;

	st = bpf_map_lookup_elem(&unwind_scratch, &slot);
	if (!st)
		return 0;
	dwarf_chunk(st);
	if (!st->done) {
		bpf_tail_call(ctx, UNWIND_CHAIN(ch), 0);
		unwind_stop(st, PROWL_UR_DEPTH);
	}
	dwarf_end(st, id >> 32);
	if (off && !(pend = offcpu_pending_get((__u32)id)))
		return 0; /* taken meanwhile */
	emit(ctx, (struct task_struct *)bpf_get_current_task(), id, true, st, PROWL_UR_NONE, st->t0,
	     st->py ? bpf_map_lookup_elem(&py_scratch, &slot) : NULL, pend);
	if (off)
		offcpu_pending_done((__u32)id);
#endif
	return 0;
}

/* The bounded build's next run, reached by tail call from the program above or
 * from itself. */
SEC("perf_event")
int prowl_unwind_step(struct bpf_perf_event_data *ctx)
{
	return unwind_step_run(ctx, CH_PERF);
}

#define PROWL_OFFCPU_PROGRAMS
#include "offcpu.bpf.h"

/* The tracepoints come twice: tp_btf (5.5+) and raw_tp, for kernels whose
 * tracing programs cannot attach by BTF; both read their arguments the same way
 * (BPF_PROG, BPF_CORE_READ), so one body serves both. */

/* With follow_children, a process forked by a followed one is followed too. */
static __always_inline int on_fork(struct task_struct *parent, struct task_struct *child)
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

/* exec replaced the process's mappings. */
static __always_inline int on_exec(struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);

	bpf_map_delete_elem(&pid_drop, &tgid);
	proc_gone(p, PROWL_UEV_EXEC);
	return 0;
}

/* The last thread of a process exited. */
static __always_inline int on_exit(struct task_struct *p)
{
	__u32 tgid;

	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0;
	tgid = BPF_CORE_READ(p, tgid);
	bpf_map_delete_elem(&pid_drop, &tgid);
	proc_gone(p, PROWL_UEV_EXIT);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(prowl_fork, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(prowl_fork_raw, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(prowl_exec, struct task_struct *p)
{
	return on_exec(p);
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(prowl_exec_raw, struct task_struct *p)
{
	return on_exec(p);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(prowl_exit, struct task_struct *p)
{
	return on_exit(p);
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(prowl_exit_raw, struct task_struct *p)
{
	return on_exit(p);
}
