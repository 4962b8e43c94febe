/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* v8.bpf.h: the V8 frame step of the DWARF unwinder: a pc in V8's builtins or JIT code is a
 * frame with a frame pointer; a JavaScript one is recorded (SharedFunctionInfo, bytecode offset). */
#ifndef PROWL_V8_BPF_H
#define PROWL_V8_BPF_H

/* Included by unwind.bpf.h, inside its x86_64 part. */

/* Node processes, written by user space (symbolizer/node/v8proc.c, through the
 * sampler: agent/sample/maps_io.c): tgid -> the builtins' range and the offsets. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct prowl_v8_proc);
} v8_procs SEC(".maps");

/* A V8 frame pointer this far above sp is not one. */
#define V8_FRAME_MAX_SPAN (1u << 20)

/* The instance type of the heap object at tagged pointer obj, or -1. */
static __always_inline int v8_type(const struct prowl_v8_proc *vp, __u64 obj)
{
	__u64 map = 0;
	__u16 type = 0;

	if ((obj & vp->heap_tag_mask) != vp->heap_tag || obj < 4096)
		return -1;
	if (bpf_probe_read_user(&map, 8, (const void *)(obj - vp->heap_tag + vp->o_map)) < 0 ||
	    (map & vp->heap_tag_mask) != vp->heap_tag ||
	    bpf_probe_read_user(&type, 2, (const void *)(map - vp->heap_tag + vp->o_map_type)) < 0)
		return -1;
	return type;
}

static __always_inline __u64 v8_field(const struct prowl_v8_proc *vp, __u64 obj, __u16 off)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, 8, (const void *)(obj - vp->heap_tag + off));
	return v;
}

/* The frame at st->bp, of code at st->pc: a JavaScript function's frame is recorded
 * (its context slot holds a context, not a frame type marker, and its function slot
 * a JSFunction); every V8 frame then steps to its caller by frame pointer. */
static __always_inline void v8_step(struct uw_state *st, const struct prowl_v8_proc *vp)
{
	__u64 bp = st->bp, marker = 0, fn = 0, sfi, ba = 0, off = 0, name, script;
	__u32 j = st->jn, bco = PROWL_JF_BCI_NONE;
	__u8 kind = PROWL_V8_JIT;

	if (!st->bp_valid || bp < st->sp || bp - st->sp > V8_FRAME_MAX_SPAN) {
		unwind_stop(st, PROWL_UR_V8);
		return;
	}
	if (stack_read(st, bp + vp->fp_context, &marker) || stack_read(st, bp + vp->fp_function, &fn)) {
		unwind_stop(st, PROWL_UR_READ);
		return;
	}
	/* A typed frame (entry, exit, stub, internal...) has a small integer there. */
	if ((marker & vp->smi_tag_mask) != vp->smi_tag && j < PROWL_MAX_JAVA &&
	    v8_type(vp, fn) == vp->t_js_function) {
		sfi = v8_field(vp, fn, vp->o_fn_shared);
		if (v8_type(vp, sfi) == vp->t_sfi) {
			/* Ignition's and Sparkplug's frames hold their BytecodeArray and the
			 * offset (a small integer) in fixed slots. */
			if (!stack_read(st, bp + vp->fp_bytecode_array, &ba) && v8_type(vp, ba) == vp->t_bytecode_array &&
			    !stack_read(st, bp + vp->fp_bytecode_offset, &off) &&
			    (off & vp->smi_tag_mask) == vp->smi_tag && (off >> 32) < PROWL_JF_BCI_NONE) {
				bco = (__u32)(off >> 32);
				kind = PROWL_V8_INTERP;
			}
			name = v8_field(vp, sfi, vp->o_sfi_name);
			script = v8_field(vp, sfi, vp->o_sfi_script);
			st->jframes[jframe_slot(j)] = (struct prowl_jframe){
				.ptr = sfi, .off = bco, .check = (__u32)(name ^ script), .idx = (__u8)(st->n - 1),
				.kind = kind,
			};
			st->jn = j + 1;
		}
	}
	fp_step(st, PROWL_UR_V8);
}

#endif /* PROWL_V8_BPF_H */
