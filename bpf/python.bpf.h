/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* python.bpf.h: the CPython frame walk of the sample stage. Finds the sampled thread's
 * PyThreadState and records its frames (code object, instruction) leaf first: 3.11+'s
 * interpreter frames, or 3.6-3.10's frame objects, each its own evaluation. */
#ifndef PROWL_PYTHON_BPF_H
#define PROWL_PYTHON_BPF_H

/* CPython processes, written by user space (symbolizer/python/pyproc.c, through the
 * sampler: agent/sample/maps_io.c): tgid -> where to look. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct prowl_py_proc);
} py_procs SEC(".maps");

/* tid -> its PyThreadState, found once by the thread-list walk and checked on
 * every use (same process, and the state's native thread id is still the tid's). */
struct py_tstate_val {
	__u64 ts;
	__u32 tgid;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct py_tstate_val);
} py_tstate SEC(".maps");

#define PY_FL_CACHE 4 /* slots of the per-sample co_firstlineno cache (a power of two) */

struct py_state {
	__u32 n;
	__u8 reason;       /* enum prowl_pyreason */
	__u8 is_python;    /* the process is a known CPython one */
	__u8 _pad[2];
	__u32 gen;         /* prowl_py_proc.gen */
	__u8 frame[136];   /* the frame being looked at (PY_OFF + 8 bytes) */
	/* co_firstlineno of this sample's code objects so far, by address (0 = empty):
	 * recursion repeats a code object, which is read once. */
	__u64 fl_code[PY_FL_CACHE];
	__s32 fl_first[PY_FL_CACHE];
	struct prowl_pyframe frames[PROWL_MAX_PY];
};

/* Slot 0: perf_event programs; 1: the off-CPU tracepoints (which a CPU-clock
 * sample may interrupt). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct py_state);
} py_scratch SEC(".maps");

#define PY_OFF(o) ((o) & 0x7f) /* an offset into the frame buffer, bounded for the verifier */

/* A frame slot index the verifier can bound on every kernel: the mask is applied
 * in the register right before use, where the compiler cannot drop it (it knows
 * the index is below PROWL_MAX_PY) nor reload an unmasked copy. */
static __always_inline __u32 py_slot(__u32 i)
{
	__u64 v = i;

	asm volatile("%[v] &= %[m]" : [v] "+r"(v) : [m] "i"(PROWL_MAX_PY - 1));
	return (__u32)v;
}
_Static_assert(PROWL_PY_FRAME_READ <= 128, "PY_OFF must cover the frame read");

/* The bytes of a frame this version reads, bounded for the verifier the same way. */
static __always_inline __u32 py_frame_read(const struct prowl_py_proc *pp)
{
	__u64 v = pp->fr_read;

	asm volatile("%[v] &= %[m]" : [v] "+r"(v) : [m] "i"(PROWL_PY_FRAME_READ));
	return (__u32)v;
}

static __always_inline __u64 py_read_ptr(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr) < 0)
		return 0;
	return v;
}

/* The current thread's id as it sees it: gettid() in its own pid namespace (a
 * container's), which is what CPython stores as native_thread_id; tid (the
 * host's) when it is in the host's namespace. */
static __always_inline __u32 py_ns_tid(__u32 tid)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct pid *tp = BPF_CORE_READ(task, thread_pid);
	unsigned int level;
	int nr = 0;

	if (!tp)
		return tid;
	level = BPF_CORE_READ(tp, level);
	if (!level)
		return tid;
	if (bpf_probe_read_kernel(&nr, sizeof(nr),
				  (const void *)((__u64)tp + bpf_core_field_offset(struct pid, numbers) +
						 (__u64)(level & 0x1f) * bpf_core_type_size(struct upid) +
						 bpf_core_field_offset(struct upid, nr))) < 0 || nr <= 0)
		return tid;
	return (__u32)nr;
}

/* What the thread state of the current thread holds to name it: its native id
 * in its own namespace (3.11+), or its pthread_self() (3.6-3.10's thread_id),
 * which is its fs base on x86_64; on arm64 glibc's lies below the thread pointer
 * by its struct pthread, whose size user space read from the process's libc
 * (tp_pthread_off; 0 when it has none: its threads then match none). */
static __always_inline __u64 py_thread_key(const struct prowl_py_proc *pp, __u32 tid)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
#if defined(__TARGET_ARCH_x86)
	__u64 fsbase = BPF_CORE_READ(task, thread.fsbase);
#else
	__u64 fsbase = BPF_CORE_READ(task, thread.uw.tp_value) - pp->tp_pthread_off;
#endif
	__u64 pthread = -(__u64)((pp->flags / PROWL_PYP_PTHREAD) & 1);

	/* Both, then one chosen by arithmetic: a branch would double the verifier's paths. */
	return (fsbase & pthread) | ((__u64)py_ns_tid(tid) & ~pthread);
}

/* The id that thread state ts holds (as py_thread_key() gives it), or -1. */
static __always_inline __u64 py_ts_key(const struct prowl_py_proc *pp, __u64 ts)
{
	__u64 v = 0;

	/* 4 or 8 bytes, by arithmetic: a branch here would double the verifier's paths. */
	if (bpf_probe_read_user(&v, 4 + 4 * ((pp->flags / PROWL_PYP_PTHREAD) & 1), (const void *)(ts + pp->ts_native_tid)) < 0)
		return (__u64)-1;
	return v;
}

/* The sampled thread's PyThreadState, or 0. tid: the host's id (the cache's
 * key); key: what the thread state holds (py_thread_key()). */
static __always_inline __u64 py_thread_state(const struct prowl_py_proc *pp, __u32 tgid, __u32 tid, __u64 key,
					       __u8 *reason)
{
	struct py_tstate_val *cached = bpf_map_lookup_elem(&py_tstate, &tid), nv = {};
	__u64 ts, interp, got;

	if (cached && cached->ts && cached->tgid == tgid) {
		ts = cached->ts;
		if (py_ts_key(pp, ts) == key)
			return ts;
		bpf_map_delete_elem(&py_tstate, &tid);
	}
	interp = py_read_ptr(pp->runtime + pp->rt_interp_head);
	if (!interp) {
		*reason = PROWL_PY_NO_THREAD; /* not initialised yet, or finalised */
		return 0;
	}
	ts = py_read_ptr(interp + pp->is_threads_head);
	for (int i = 0; i < PROWL_PY_THREADS; i++) {
		if (!ts)
			break;
		got = py_ts_key(pp, ts);
		if (got == (__u64)-1) {
			*reason = PROWL_PY_READ;
			return 0;
		}
		if (got == key) {
			nv.ts = ts;
			nv.tgid = tgid;
			bpf_map_update_elem(&py_tstate, &tid, &nv, BPF_ANY);
			return ts;
		}
		ts = py_read_ptr(ts + pp->ts_next);
	}
	*reason = PROWL_PY_NO_THREAD;
	return 0;
}

/* Fills the per-CPU py_state of the current task; NULL when the process is not
 * a known CPython one. */
static __always_inline struct py_state *py_walk(__u32 tgid, __u32 tid, __u32 slot)
{
	struct prowl_py_proc *pp = bpf_map_lookup_elem(&py_procs, &tgid);
	struct py_state *ps;
	__u32 n, entry_all, shift, fl_slot;
	__u64 ts, fp, objframe, low_mask, base_mask;
	int i;

	if (!pp)
		return NULL;
	ps = bpf_map_lookup_elem(&py_scratch, &slot);
	if (!ps)
		return NULL;
	ps->n = 0;
	ps->reason = PROWL_PY_OK;
	ps->is_python = 1;
	ps->gen = pp->gen;
	for (i = 0; i < PY_FL_CACHE; i++)
		ps->fl_code[i] = 0;
	/* One formula for both kinds of frame, so that the loop has no branch on the
	 * version (each would double the verifier's states): lasti = (raw - base) >> shift
	 * where raw is the frame's instruction field. 3.11+: raw is the instruction
	 * pointer, base the code's first instruction, shift 1 (2-byte code units). 3.6-3.10:
	 * raw is the 32-bit f_lasti (-1 comes out above 2^31: no instruction), base 0,
	 * shift 1 where it counts bytes (3.6-3.9), 0 on 3.10; and every frame is an entry. */
	objframe = pp->flags & PROWL_PYP_FRAMEOBJ;
	low_mask = ~0ull >> (objframe * 32);
	base_mask = objframe - 1;
	shift = 1 - (__u32)(objframe & ~((__u64)pp->flags / PROWL_PYP_LASTI_BYTES));
	entry_all = (__u32)objframe << 31;
	ts = py_thread_state(pp, tgid, tid, py_thread_key(pp, tid), &ps->reason);
	if (!ts)
		return ps;
	fp = py_read_ptr(ts + pp->ts_frame);
	if (fp && pp->cf_current_frame != PROWL_PY_NONE)
		fp = py_read_ptr(fp + pp->cf_current_frame);
	/* The count lives in the map value, not in a register: the verifier then
	 * sees one state per iteration instead of one per count (n would be a
	 * known constant on every path otherwise). */
	for (i = 0; i < PROWL_MAX_PY + 8; i++) {
		struct prowl_pyframe f;
		__u64 code, instr, base;
		__u8 owner;

		if (!fp)
			break;
		n = ps->n;
		if (bpf_probe_read_user(ps->frame, py_frame_read(pp), (const void *)fp) < 0) {
			ps->reason = PROWL_PY_READ;
			break;
		}
		/* 3.14's f_executable is a _PyStackRef: its low bits are tags. */
		code = *(__u64 *)&ps->frame[PY_OFF(pp->fr_code)] & ~7ull;
		fp = *(__u64 *)&ps->frame[PY_OFF(pp->fr_previous)];
		if (pp->fr_owner != PROWL_PY_NONE) {
			owner = ps->frame[PY_OFF(pp->fr_owner)];
			/* 3: the entry shim (FRAME_OWNED_BY_CSTACK on 3.12, 3.13; _INTERPRETER on
			 * 3.14); 4: 3.14's FRAME_OWNED_BY_CSTACK. */
			if (owner == 3 || owner == 4) {
				if (n > 0)
					ps->frames[py_slot(n - 1)].lasti |= PROWL_PYF_ENTRY;
				continue;
			}
		}
		if (n >= PROWL_MAX_PY) {
			ps->reason = PROWL_PY_DEPTH;
			break;
		}
		f.code = code;
		f.lasti = PROWL_PYF_LASTI_NONE;
		instr = *(__u64 *)&ps->frame[PY_OFF(pp->fr_instr)] & low_mask;
		base = (code + pp->co_code) & base_mask;
		if (instr >= base && instr - base < (1ull << 31))
			f.lasti = (__u32)((instr - base) >> (shift & 1));
		f.lasti |= entry_all;
		if (pp->fr_is_entry != PROWL_PY_NONE && ps->frame[PY_OFF(pp->fr_is_entry)])
			f.lasti |= PROWL_PYF_ENTRY;
		fl_slot = (__u32)((code >> 4) ^ (code >> 8)) & (PY_FL_CACHE - 1);
		if (code && ps->fl_code[fl_slot] == code) {
			f.firstlineno = ps->fl_first[fl_slot];
		} else {
			f.firstlineno = 0;
			bpf_probe_read_user(&f.firstlineno, sizeof(f.firstlineno),
					    (const void *)(code + pp->co_firstlineno));
			ps->fl_code[fl_slot] = code;
			ps->fl_first[fl_slot] = f.firstlineno;
		}
		ps->frames[py_slot(n)] = f;
		ps->n = n + 1;
	}
	if (fp && i >= PROWL_MAX_PY + 8 && ps->reason == PROWL_PY_OK)
		ps->reason = PROWL_PY_DEPTH;
	return ps;
}

#endif /* PROWL_PYTHON_BPF_H */
