/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* unwind.bpf.h: the DWARF CFI user-stack unwinder of the BPF sampler (x86_64, arm64), in
 * two builds: frames stepped by bpf_loop (5.17+) or by a bounded loop (5.8+). */
#ifndef PROWL_UNWIND_BPF_H
#define PROWL_UNWIND_BPF_H

/* Included by prowl.bpf.c only, after its maps and count(). */

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
#define STACK_WIN 4096
/* jframes' slots: a power of two, at least PROWL_MAX_JAVA (jframe_slot() masks by it). */
#define JFRAME_SLOTS 128
_Static_assert((JFRAME_SLOTS & (JFRAME_SLOTS - 1)) == 0 && JFRAME_SLOTS >= PROWL_MAX_JAVA,
	       "jframe_slot() masks an index by JFRAME_SLOTS - 1");
#define UW_ROW_CACHE 8 /* slots of the per-sample row cache (a power of two) */
#define V8_TYPE_CACHE 4 /* slots of the per-sample cache of V8 maps' types (a power of two) */
#define V8_FN_CACHE 4   /* ... of JSFunctions' SharedFunctionInfos (a power of two) */
#define V8_HEAD 64      /* the most of a V8 object's head one read takes (bytes, 8 words) */

struct uw_state {
	__u64 pc, sp, bp;
	__u64 lr;         /* arm64: the link register x30, when lr_valid */
	__u8 lr_valid;    /* arm64: lr is the frame's own (the first frame, after a signal) */
	__u32 n;          /* frames recorded */
	__u32 map_first, map_count;
	__u32 cur_map;    /* index of the mapping of the previous frame */
	__u8 bp_valid;
	__u8 exact;       /* pc is not a return address (first frame, after a signal) */
	__u8 done;
	__u8 reason;      /* enum prowl_ureason */
	__u8 sticky;      /* a reason that does not stop the walk (PROWL_UR_NO_TABLE) */
	__u8 want_refresh;
	__u8 runs;        /* bounded build: program runs so far */
	__u8 py;          /* bounded build: take() read Python frames into py_scratch */
	__u64 t0;         /* bounded build: the sample's start (cost timing), carried across tail calls */
	__u64 win_base;   /* user address of win[0], 0 = empty */
	/* The rows of this sample's pcs so far, by pc (0 = empty): a deep stack returns
	 * to the same few pcs again and again (CPython before 3.11 recurses through three
	 * C functions per Python call), and each repeat skips both searches. */
	__u64 rc_pc[UW_ROW_CACHE];
	__u64 rc_row[UW_ROW_CACHE];
	__u64 frames[PROWL_MAX_STACK];
	__u8 win[STACK_WIN];
	/* The Java walk (java.bpf.h): the process's entry when it is a JVM. */
	__u64 r13;        /* the interrupted r13: the interpreter's bytecode pointer */
	__u64 rdi;        /* the interrupted rdi: V8's JSFunction register at a call */
	__u32 jn;         /* Java frames recorded */
	__u8 java;        /* jp holds a ready JVM's entry */
	__u8 jdeopt;      /* a deoptimization blob was passed: interpreted frames may be skeletal */
	__u8 _jpad[2];
	__u64 jlast_method, jlast_cm; /* the last interpreted frame's Method*, ConstMethod* and ident: */
	__u32 jlast_ident, _jpad2;    /* recursion repeats them (read once per sample) */
	struct prowl_java_proc jp;
	/* Slots past PROWL_MAX_JAVA are never filled: they let jframe_slot() bound an
	 * index by a mask alone, which every verifier follows (5.10's and 6.1's do not
	 * carry the j < PROWL_MAX_JAVA test across a spill). */
	struct prowl_jframe jframes[JFRAME_SLOTS];
	/* The V8 walk (v8.bpf.h): the process's entry when it runs V8; its frames go in
	 * jframes (a process is not both a JVM and a node). */
	__u8 v8;          /* vp holds the entry */
	__u8 v8_tc_next;  /* the next slot of v8_tc_* to fill */
	__u8 v8_fc_next;  /* ... of v8_fc_* */
	__u8 v8_lb;       /* the first frame was a frameless builtin (v8_builtin_frameless) */
	__u8 _vpad[4];
	struct prowl_v8_proc vp;
	/* What this sample has read of V8's heap (v8.bpf.h): maps' instance types;
	 * JSFunctions' SharedFunctionInfos and checks; the last BytecodeArray found one.
	 * And where an object's head is read. */
	__u64 v8_tc_map[V8_TYPE_CACHE];
	__u16 v8_tc_type[V8_TYPE_CACHE];
	__u64 v8_fc_fn[V8_FN_CACHE], v8_fc_sfi[V8_FN_CACHE];
	__u32 v8_fc_check[V8_FN_CACHE];
	__u64 v8_last_ba;
	__u64 v8_head[2 * V8_HEAD / 8];
};

/* Writable at run time: walk Java frames of the processes in java_procs. */
volatile bool java_on = true;
/* Writable at run time: walk JavaScript frames of the processes in v8_procs. */
volatile bool v8_on = true;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2); /* slots as py_scratch's: perf_event, off-CPU tracepoints */
	__type(key, __u32);
	__type(value, struct uw_state);
} unwind_scratch SEC(".maps");

/* The bounded build's next run: user space puts prowl_unwind_step in slot 0. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} unwind_chain SEC(".maps");

/* The same for the off-CPU programs: a prog array chains programs of one type
 * (and, for tp_btf, one attach point): user space puts prowl_offcpu_step_raw
 * (raw tracepoints) and prowl_offcpu_step_btf (tp_btf/sched_switch) in slot 0. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} offcpu_chain_raw SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} offcpu_chain_btf SEC(".maps");

#if defined(__TARGET_ARCH_x86) || defined(__TARGET_ARCH_arm64)
#define PROWL_BPF_DWARF 1 /* the architectures the DWARF unwinder knows */

#define MAX_MAP_SEARCH 16  /* 65536 mappings per process */
#define MAX_ROW_SEARCH 25  /* 32M rows per table (user space keeps tables smaller) */
/* The bounded build steps UW_CHUNK frames per program run and chains runs by
 * tail calls: the verifier checks every step of a bounded loop (the step program:
 * 339,415 instructions at 4 on 6.18), so 128 steps in one program would pass its
 * limit of one million (5.10's passed it at 8 steps, off-CPU's step program, when
 * the CPython walk was still in it). At 4, 32 runs of prowl_unwind_step (32 tail
 * calls, the most every kernel allows) cover PROWL_MAX_STACK; each load verifies
 * less than at 6, which on 5.10 under emulation was most of its start. */
#define UW_CHUNK 4
#define UW_MAX_RUNS ((PROWL_MAX_STACK + UW_CHUNK) / UW_CHUNK)
#define UW_MAX_TAIL_CALLS 32 /* MAX_TAIL_CALL_CNT on 5.8-5.18 (a first call + 32 chained there) */
_Static_assert(UW_MAX_RUNS <= UW_MAX_TAIL_CALLS, "the bounded chain needs more tail calls than kernels allow");
_Static_assert(UW_MAX_RUNS * UW_CHUNK >= PROWL_MAX_STACK, "the bounded chain stops short of PROWL_MAX_STACK");
#define SLOT 8             /* bytes per stack slot; row offsets count slots */

/* A frame-pointer frame: [bp] = the caller's bp, [bp + FP_RA_OFF] = the return address;
 * the caller's sp is bp + FP_FRAME_SIZE (on arm64, at least that: the frame record
 * {x29, x30} may lie below the frame's locals). */
#define FP_RA_OFF     8
#define FP_FRAME_SIZE 16

#if defined(__TARGET_ARCH_x86)
/* The lowest kernel address: user pointers are below it (x86_64, 4- and 5-level paging). */
#define KERNEL_MIN_ADDR 0xffff800000000000ull
/* The return address sits right below the CFA (x86_64 call pushes it there). */
#define CFA_RA_OFF    8
#define PLT_ENTRY_SIZE 16 /* x86_64 PLT entries, which ld's CFA expression indexes */

/* A signal frame (rt_sigreturn): rsp points at a struct ucontext, whose
 * uc_mcontext holds the interrupted registers. User ABI, so fixed offsets. */
#define UC_FP __builtin_offsetof(struct ucontext, uc_mcontext.bp)
#define UC_SP __builtin_offsetof(struct ucontext, uc_mcontext.sp)
#define UC_PC __builtin_offsetof(struct ucontext, uc_mcontext.ip)
_Static_assert(UC_FP == 120 && UC_SP == 160 && UC_PC == 168, "x86_64 ucontext layout");

/* Without bpf_task_pt_regs (before 5.15), the user registers of a task that
 * entered the kernel are found where the kernel saves them: a struct pt_regs at
 * the top of the task's stack (task_pt_regs()). x86_64 kernel stacks are
 * THREAD_SIZE = 16 KiB (4 pages; KASAN builds double it, and are caught by the
 * user-mode check on the registers read). */
#define X86_64_THREAD_SIZE (16u << 10)
#define RPL_MASK 3 /* the privilege level in the low bits of cs */
#define USER_RPL 3 /* ... which is 3 in user mode */

/* Only the fields read here; CO-RE finds them in the running kernel's pt_regs. */
struct pt_regs___prowl {
	unsigned long r13, bp, di, ip, cs, sp;
} __attribute__((preserve_access_index));
#define ret_addr(ra) (ra)

#else /* arm64 */
/* User pointers are below 2^52 (the largest user address space, 52-bit VAs);
 * kernel addresses have the top bits set. */
#define KERNEL_MIN_ADDR (1ull << 52)
/* Pointer authentication signs return addresses in their unused top bits; user
 * code lives below 2^48 unless it asks for more, so the rest is the signature. */
#define PAC_STRIP_MASK ((1ull << 48) - 1)
#define ret_addr(ra) ((ra) & PAC_STRIP_MASK)
/* A signal frame: sp at the trampoline points at a struct rt_sigframe, whose
 * uc_mcontext holds the interrupted registers. User ABI, so fixed offsets. */
#define UC_FP __builtin_offsetof(struct rt_sigframe, uc.uc_mcontext.regs[29])
#define UC_LR __builtin_offsetof(struct rt_sigframe, uc.uc_mcontext.regs[30])
#define UC_SP __builtin_offsetof(struct rt_sigframe, uc.uc_mcontext.sp)
#define UC_PC __builtin_offsetof(struct rt_sigframe, uc.uc_mcontext.pc)
_Static_assert(UC_FP == 544 && UC_LR == 552 && UC_SP == 560 && UC_PC == 568, "arm64 rt_sigframe layout");
/* task_pt_regs() before bpf_task_pt_regs: the top of the task's stack, 16 KiB
 * with 4 KiB pages (Debian's arm64 kernels). */
#define ARM64_THREAD_SIZE (16u << 10)
#define PSR_MODE_MASK 0xfu /* pstate's exception level and stack pointer bits */
#define PSR_MODE_EL0t 0u   /* ... all zero in user mode */

struct pt_regs___prowl {
	unsigned long regs[31];
	unsigned long sp, pc, pstate;
} __attribute__((preserve_access_index));
#endif

/* Whether an on-CPU sample caught its task in user mode (its pc is a user address). */
static __always_inline bool in_user_mode(const struct bpf_perf_event_data *ctx)
{
#if defined(__TARGET_ARCH_x86)
	return ctx->regs.ip < KERNEL_MIN_ADDR;
#else
	return ctx->regs.pc < KERNEL_MIN_ADDR;
#endif
}

static __always_inline void unwind_stop(struct uw_state *st, __u8 reason)
{
	st->reason = reason;
	st->done = 1;
}

static __always_inline long stack_read(struct uw_state *st, __u64 addr, __u64 *ret);
static __always_inline void fp_step(struct uw_state *st, __u8 fail_reason);
/* An index of jframes (Java's and V8's frames) the verifier sees bounded. */
static __always_inline __u32 jframe_slot(__u32 i)
{
	__u64 v = i;

	asm volatile("%[v] &= %[m]" : [v] "+r"(v) : [m] "i"(JFRAME_SLOTS - 1));
	return (__u32)v;
}

#include "java.bpf.h"
#include "v8.bpf.h"

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

	if (addr & (SLOT - 1))
		return bpf_probe_read_user(ret, sizeof(*ret), (void *)addr);
	if (!st->win_base || addr < st->win_base || off > STACK_WIN - SLOT) {
		base = addr & ~(__u64)(STACK_WIN - 1);
		if (bpf_probe_read_user(st->win, STACK_WIN, (void *)base)) {
			st->win_base = 0;
			return -1;
		}
		st->win_base = base;
		off = addr - base;
	}
	*ret = *(__u64 *)(st->win + (off & (STACK_WIN - SLOT)));
	return 0;
}

/* One frame with frame pointers. */
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
	if (stack_read(st, st->bp, &fr[0]) || stack_read(st, st->bp + FP_RA_OFF, &fr[1])) {
		unwind_stop(st, PROWL_UR_READ);
		return;
	}
	st->sp = st->bp + FP_FRAME_SIZE;
	st->bp = fr[0];
	st->pc = ret_addr(fr[1]);
	st->exact = 0;
	st->lr_valid = 0;
	if (st->pc == 0)
		unwind_stop(st, PROWL_UR_NONE);
}

/* Records the current frame and steps to its caller. Returns 1 when the walk
 * is over (st->done), 0 to go on. */
static __always_inline long unwind_step(struct uw_state *st)
{
	struct prowl_unwind_row *found, *row, rowb;
	struct prowl_unwind_map *m;
	__u64 lookup, cfa, ra, rowv;
	__s64 rbp_off;
	__u32 slot;
	__u8 rbp_rule, ra_rule;
	__u32 n;

	if (st->done)
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
#if defined(__TARGET_ARCH_x86)
	if (st->java && lookup >= st->jp.cc_low && lookup < st->jp.cc_high) {
		java_step(st, &st->jp);
		return st->done != 0;
	}
	if (st->v8 && ((lookup >= st->vp.builtins_low && lookup < st->vp.builtins_high) ||
		       (lookup >= st->vp.copy_low && lookup < st->vp.copy_high))) {
		if (n == 0 && st->exact && v8_builtin_frameless(st, &st->vp))
			return 0;
		v8_step(st, &st->vp); /* V8's builtins: no CFI, a frame pointer always */
		return st->done != 0;
	}
#endif
	slot = (__u32)(lookup ^ (lookup >> 4) ^ (lookup >> 12)) & (UW_ROW_CACHE - 1);
	if (lookup && st->rc_pc[slot] == lookup) {
		rowv = st->rc_row[slot];
	} else {
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
#if defined(__TARGET_ARCH_x86)
			if (st->v8 && m->kind == PROWL_MAP_FP) { /* code no file backs: V8's JIT code */
				if (((n == 0 && st->exact) || (n == 1 && st->v8_lb)) &&
				    v8_frameless(st, &st->vp, n == 1))
					return 0;
				v8_step(st, &st->vp);
				return st->done != 0;
			}
#endif
			fp_step(st, m->kind == PROWL_MAP_NO_TABLE ? PROWL_UR_NO_TABLE : PROWL_UR_BAD_CFI);
			return st->done != 0;
		}
		found = find_row(m->row_first, m->row_count, (__u32)(lookup - m->bias));
#if defined(__TARGET_ARCH_x86)
		if ((!found || PROWL_ROW_CFA(found) == PROWL_CFA_NONE) && st->v8 && lookup >= st->vp.text_low &&
		    lookup < st->vp.text_high) {
			if (n == 0 && st->exact && v8_builtin_frameless(st, &st->vp))
				return 0;
			v8_step(st, &st->vp); /* the V8 binary's code without CFI: its builtins */
			return st->done != 0;
		}
#endif
		if (!found) {
			unwind_stop(st, PROWL_UR_NO_FDE);
			return 1;
		}
		/* A copy, not the map's pointer: both ways then reach the code below as
		 * one scalar, and the verifier checks it once. */
		__builtin_memcpy(&rowv, found, sizeof(rowv));
		st->rc_pc[slot] = lookup;
		st->rc_row[slot] = rowv;
	}
	__builtin_memcpy(&rowb, &rowv, sizeof(rowb));
	row = &rowb;
	rbp_rule = PROWL_ROW_RBP(row);
	ra_rule = PROWL_ROW_RA(row);
	rbp_off = (__s64)row->rbp_off * SLOT;
	switch (PROWL_ROW_CFA(row)) {
	case PROWL_CFA_RSP:
		cfa = st->sp + (__u64)row->cfa_off * SLOT;
		break;
	case PROWL_CFA_RBP:
		if (!st->bp_valid) {
			unwind_stop(st, PROWL_UR_BAD_CFI);
			return 1;
		}
		cfa = st->bp + (__u64)row->cfa_off * SLOT;
		break;
#if defined(__TARGET_ARCH_x86)
	case PROWL_CFA_PLT:
		/* ld's PLT expression: one more slot once the entry's push ran. */
		cfa = st->sp + (__u64)row->cfa_off * SLOT +
		      ((st->pc & (PLT_ENTRY_SIZE - 1)) >= (__u64)row->rbp_off ? SLOT : 0);
		break;
#endif
	case PROWL_CFA_END:
		unwind_stop(st, PROWL_UR_NONE);
		return 1;
	case PROWL_CFA_SIGNAL: {
		__u64 fp, sp, pc;

		/* The trampoline's own pc was reached by the handler's return, but
		 * it is the first instruction of __restore_rt, not after a call:
		 * +1 so the symbolizer's -1 lands on it, not before it. */
		if (n > 0)
			st->frames[n] = st->pc + 1;
		if (stack_read(st, st->sp + UC_FP, &fp) || stack_read(st, st->sp + UC_SP, &sp) ||
		    stack_read(st, st->sp + UC_PC, &pc)) {
			unwind_stop(st, PROWL_UR_READ);
			return 1;
		}
#if defined(__TARGET_ARCH_arm64)
		if (stack_read(st, st->sp + UC_LR, &st->lr)) {
			unwind_stop(st, PROWL_UR_READ);
			return 1;
		}
		st->lr_valid = 1;
#endif
		st->bp = fp;
		st->bp_valid = 1;
		st->sp = sp;
		st->pc = pc;
		st->exact = 1;
		if (st->pc == 0)
			unwind_stop(st, PROWL_UR_NONE);
		return st->done != 0;
	}
	case PROWL_CFA_NONE:
		unwind_stop(st, PROWL_UR_NO_FDE);
		return 1;
	default:
		unwind_stop(st, PROWL_UR_BAD_CFI);
		return 1;
	}
#if defined(__TARGET_ARCH_x86)
	/* The CFA lies above the frame; anything else is a corrupt frame or a loop.
	 * The return address is where call pushed it (no other rule on x86_64). */
	if (cfa <= st->sp || ra_rule != PROWL_RA_CFA) {
		unwind_stop(st, PROWL_UR_BAD_CFI);
		return 1;
	}
	if (stack_read(st, cfa - CFA_RA_OFF, &ra)) {
		unwind_stop(st, PROWL_UR_READ);
		return 1;
	}
#else
	/* The CFA lies above the frame, or is sp itself in a leaf whose return
	 * address is still in x30; that register is known only in the first frame
	 * and after a signal: elsewhere such a rule is a corrupt frame or a loop. */
	if (cfa < st->sp || (cfa == st->sp && ra_rule != PROWL_RA_LR) || (ra_rule == PROWL_RA_LR && !st->lr_valid)) {
		unwind_stop(st, PROWL_UR_BAD_CFI);
		return 1;
	}
	if (ra_rule == PROWL_RA_LR) {
		ra = st->lr;
	} else if (stack_read(st, cfa + rbp_off + (ra_rule == PROWL_RA_CFA ? SLOT : 0), &ra)) {
		unwind_stop(st, PROWL_UR_READ);
		return 1;
	}
	ra = ret_addr(ra);
	st->lr_valid = 0;
#endif
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
	return st->done != 0;
}

/* bpf_loop's callback: two frames per call, which halves the calls and lookups of a
 * deep stack (CPython 3.6-3.10: three native frames per Python call); ctx points to
 * the scratch slot. */
static long unwind_frame_cb(__u32 i, void *ctx)
{
	struct uw_state *st = bpf_map_lookup_elem(&unwind_scratch, ctx);

	if (!st || unwind_step(st))
		return 1;
	return unwind_step(st);
}

static __always_inline void unwind_request(__u32 type, __u32 pid, __u64 pc)
{
	__u64 now = bpf_ktime_get_ns(), *last = bpf_map_lookup_elem(&unwind_req_time, &pid);
	struct prowl_unwind_event *ev;

	/* User space may push *last into the future to make a process ask less
	 * often (its mappings did not change): hence the signed difference. */
	if (last && (__s64)(now - *last) < (__s64)PROWL_UNWIND_REQ_NS)
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

/* The user registers of the current task, which the sample caught in the kernel.
 * Returns 0, or -1 when what was read does not look like user mode. */
static __always_inline int user_regs_compat(struct uw_state *st)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct pt_regs___prowl *regs;
	void *stack;

	stack = BPF_CORE_READ(task, stack);
	if (!stack)
		return -1;
#if defined(__TARGET_ARCH_x86)
	unsigned long cs;

	regs = (struct pt_regs___prowl *)(stack + X86_64_THREAD_SIZE - bpf_core_type_size(struct pt_regs));
	st->pc = BPF_CORE_READ(regs, ip);
	st->sp = BPF_CORE_READ(regs, sp);
	st->bp = BPF_CORE_READ(regs, bp);
	st->r13 = BPF_CORE_READ(regs, r13);
	st->rdi = BPF_CORE_READ(regs, di);
	cs = BPF_CORE_READ(regs, cs);
	if ((cs & RPL_MASK) != USER_RPL)
		return -1;
#else
	unsigned long pstate;

	regs = (struct pt_regs___prowl *)(stack + ARM64_THREAD_SIZE - bpf_core_type_size(struct pt_regs));
	st->pc = BPF_CORE_READ(regs, pc);
	st->sp = BPF_CORE_READ(regs, sp);
	st->bp = BPF_CORE_READ(regs, regs[29]);
	st->lr = BPF_CORE_READ(regs, regs[30]);
	pstate = BPF_CORE_READ(regs, pstate);
	if ((pstate & PSR_MODE_MASK) != PSR_MODE_EL0t)
		return -1;
#endif
	if (st->pc >= KERNEL_MIN_ADDR || st->sp >= KERNEL_MIN_ADDR || !st->sp)
		return -1;
	return 0;
}

/* Which build of the unwinder a perf_event program carries. */
enum uw_build {
	UW_LOOP,    /* bpf_loop, bpf_task_pt_regs, bpf_get_current_task_btf: 5.17+ */
	UW_BOUNDED, /* bounded loops chained by tail calls, registers found by hand: 5.8+ */
};

/* Starts unwinding the current task's user stack in the per-CPU scratch state;
 * ctx is the interrupted registers, or NULL for a task known to be in the kernel
 * (an off-CPU sample, taken in a tracepoint). Returns it, or NULL when the process is unknown (a request was sent;
 * *fp_reason = PROWL_UR_NEW_PROC), must use frame pointers (32-bit code;
 * *fp_reason = 0), or its registers were not found (*fp_reason = PROWL_UR_NO_REGS). */
static __always_inline struct uw_state *dwarf_begin(struct bpf_perf_event_data *ctx, __u32 tgid,
						    __u8 *fp_reason, enum uw_build build, __u32 slot)
{
	struct prowl_unwind_proc *proc = bpf_map_lookup_elem(&unwind_procs, &tgid);
	struct uw_state *st;

	*fp_reason = PROWL_UR_NEW_PROC;
	if (!proc) {
		unwind_request(PROWL_UEV_UNKNOWN_PID, tgid, 0);
		return NULL;
	}
	*fp_reason = PROWL_UR_NONE;
	if (proc->map_first == PROWL_PROC_FP)
		return NULL;
	st = bpf_map_lookup_elem(&unwind_scratch, &slot);
	if (!st)
		return NULL;
#if defined(__TARGET_ARCH_x86)
	if (ctx && in_user_mode(ctx)) {
		st->pc = ctx->regs.ip;
		st->sp = ctx->regs.sp;
		st->bp = ctx->regs.bp;
		st->r13 = ctx->regs.r13;
		st->rdi = ctx->regs.di;
	} else if (build == UW_LOOP) {
		/* In the kernel: the user registers are saved at the top of the task's stack. */
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());

		st->pc = BPF_CORE_READ(regs, ip);
		st->sp = BPF_CORE_READ(regs, sp);
		st->bp = BPF_CORE_READ(regs, bp);
		st->r13 = BPF_CORE_READ(regs, r13);
		st->rdi = BPF_CORE_READ(regs, di);
	} else if (user_regs_compat(st)) {
#else
	if (ctx && in_user_mode(ctx)) {
		st->pc = ctx->regs.pc;
		st->sp = ctx->regs.sp;
		st->bp = ctx->regs.regs[29];
		st->lr = ctx->regs.regs[30];
	} else if (build == UW_LOOP) {
		struct pt_regs___prowl *regs = (struct pt_regs___prowl *)bpf_task_pt_regs(bpf_get_current_task_btf());

		st->pc = BPF_CORE_READ(regs, pc);
		st->sp = BPF_CORE_READ(regs, sp);
		st->bp = BPF_CORE_READ(regs, regs[29]);
		st->lr = BPF_CORE_READ(regs, regs[30]);
	} else if (user_regs_compat(st)) {
#endif
		*fp_reason = PROWL_UR_NO_REGS;
		return NULL;
	}
	st->n = 0;
	st->map_first = proc->map_first;
	st->map_count = proc->map_count;
	st->cur_map = proc->map_first;
	st->bp_valid = 1;
	st->lr_valid = 1;
	st->exact = 1;
	st->done = 0;
	st->reason = 0;
	st->sticky = 0;
	st->want_refresh = 0;
	st->runs = 0;
	st->py = 0;
	st->win_base = 0;
	for (int i = 0; i < UW_ROW_CACHE; i++)
		st->rc_pc[i] = 0;
	st->jn = 0;
	st->jdeopt = 0;
	st->jlast_method = 0;
	st->java = 0;
#if defined(__TARGET_ARCH_x86) /* the HotSpot frame step knows x86_64's frames only */
	if (java_on) {
		struct prowl_java_proc *jp = bpf_map_lookup_elem(&java_procs, &tgid);

		if (jp && (jp->flags & PROWL_JAVA_READY)) {
			st->jp = *jp;
			st->java = 1;
		} else if (jp) {
			st->want_refresh = 1; /* its code cache was not set up yet: ask again */
		}
	}
	st->v8 = 0;
	if (v8_on && !st->java) {
		struct prowl_v8_proc *vp = bpf_map_lookup_elem(&v8_procs, &tgid);

		if (vp) {
			st->vp = *vp;
			st->v8 = 1;
			/* The walk's caches (read only when st->v8): empty for this sample. */
			for (int i = 0; i < V8_TYPE_CACHE; i++)
				st->v8_tc_map[i] = 0;
			for (int i = 0; i < V8_FN_CACHE; i++)
				st->v8_fc_fn[i] = 0;
			st->v8_last_ba = 0;
			st->v8_lb = 0;
		}
	}
#endif
	if (st->pc == 0 || st->pc >= KERNEL_MIN_ADDR)
		st->done = 1; /* nothing to unwind (no user context) */
	return st;
}

/* The bounded build's share of one program run: UW_CHUNK frames. */
static __always_inline void dwarf_chunk(struct uw_state *st)
{
#pragma clang loop unroll(disable)
	for (int i = 0; i < UW_CHUNK; i++)
		if (unwind_step(st))
			break;
	st->runs++;
	/* The chain ends here: whatever is left is deeper than it reaches. */
	if (!st->done && st->runs >= UW_MAX_RUNS)
		unwind_stop(st, PROWL_UR_DEPTH);
}

/* After the last frame: the final reason, and a refresh request for a pc in no
 * known mapping. */
static __always_inline void dwarf_end(struct uw_state *st, __u32 tgid)
{
	if (!st->reason)
		st->reason = st->sticky;
	if (st->want_refresh)
		unwind_request(PROWL_UEV_UNKNOWN_PC, tgid, st->pc);
}

#else
/* Other architectures: no kernel address bound is known here; the kernel stack is
 * always asked for. */
static __always_inline bool in_user_mode(const struct bpf_perf_event_data *ctx)
{
	return false;
}
#endif /* PROWL_BPF_DWARF */

/* exec replaced or exit ended a process the unwinder knows: drop its entry and
 * tell user space. */
static __always_inline void proc_gone(struct task_struct *p, __u32 type)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct prowl_unwind_event *ev;

	if (type == PROWL_UEV_EXEC) /* the next sample asks again, right away */
		bpf_map_delete_elem(&unwind_req_time, &tgid);
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

#endif /* PROWL_UNWIND_BPF_H */
