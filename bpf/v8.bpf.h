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

/* The instance type of the objects of map (a tagged pointer), or -1. A stack's
 * functions, their SharedFunctionInfos and BytecodeArrays share a few maps: each
 * map's type is read once per sample (st->v8_tc, emptied when a sample starts). */
static __always_inline int v8_map_type(struct uw_state *st, const struct prowl_v8_proc *vp, __u64 map)
{
	__u16 type = 0;
	__u32 slot;

	if ((map & vp->heap_tag_mask) != vp->heap_tag)
		return -1;
	for (int i = 0; i < V8_TYPE_CACHE; i++)
		if (st->v8_tc_map[i] == map)
			return st->v8_tc_type[i];
	if (bpf_probe_read_user(&type, 2, (const void *)(map - vp->heap_tag + vp->o_map_type)) < 0)
		return -1;
	slot = st->v8_tc_next++ & (V8_TYPE_CACHE - 1);
	st->v8_tc_map[slot] = map;
	st->v8_tc_type[slot] = type;
	return type;
}

/* Reads the first n bytes (8..V8_HEAD) of the heap object at tagged pointer obj into
 * head (2 * V8_HEAD bytes), in one read: its map and the fields the walk wants. Returns its instance
 * type, or -1. */
static __always_inline int v8_head(struct uw_state *st, const struct prowl_v8_proc *vp, __u64 obj, __u64 *head,
				   __u32 n)
{
	if ((obj & vp->heap_tag_mask) != vp->heap_tag || obj < 4096 || n < 8 || n > V8_HEAD)
		return -1;
	/* A mask the verifier follows whatever the compiler made of the test above:
	 * head has room for twice V8_HEAD. */
	asm volatile("%[v] &= %[m]" : [v] "+r"(n) : [m] "i"(2 * V8_HEAD - 1));
	if (bpf_probe_read_user(head, n, (const void *)(obj - vp->heap_tag)) < 0)
		return -1;
	return v8_map_type(st, vp, head[(vp->o_map >> 3) & (V8_HEAD / 8 - 1)]);
}

/* The word at field offset off (a multiple of 8 below V8_HEAD) of a head v8_head read. */
static __always_inline __u64 v8_word(const __u64 *head, __u16 off)
{
	return head[(off >> 3) & (V8_HEAD / 8 - 1)];
}

/* How much of an object's head holds its map and the fields at offsets a and b. */
static __always_inline __u32 v8_span(const struct prowl_v8_proc *vp, __u16 a, __u16 b)
{
	__u32 n = vp->o_map > a ? vp->o_map : a;

	return (n > b ? n : b) + 8;
}

/* The SharedFunctionInfo of JSFunction fn (0: not one) and its check (the low 32 bits of
 * its name and script words xored). A function met before in this sample (recursion) is
 * not read again; else one read of the function's head gives its map and its
 * SharedFunctionInfo, one of the latter's its map, name and script. */
static __always_inline __u64 v8_fn_sfi(struct uw_state *st, const struct prowl_v8_proc *vp, __u64 fn, __u64 *head,
				       __u32 *check)
{
	__u64 sfi = 0;

	for (int i = 0; i < V8_FN_CACHE; i++)
		if (st->v8_fc_fn[i] == fn) {
			sfi = st->v8_fc_sfi[i];
			*check = st->v8_fc_check[i];
		}
	if (!sfi && v8_head(st, vp, fn, head, v8_span(vp, vp->o_fn_shared, vp->o_fn_shared)) == vp->t_js_function) {
		__u64 shared = v8_word(head, vp->o_fn_shared);

		if (v8_head(st, vp, shared, head, v8_span(vp, vp->o_sfi_name, vp->o_sfi_script)) == vp->t_sfi) {
			__u32 slot = st->v8_fc_next++ & (V8_FN_CACHE - 1);

			sfi = shared;
			*check = (__u32)(v8_word(head, vp->o_sfi_name) ^ v8_word(head, vp->o_sfi_script));
			st->v8_fc_fn[slot] = fn;
			st->v8_fc_sfi[slot] = sfi;
			st->v8_fc_check[slot] = *check;
		}
	}
	return sfi;
}

/* Whether pc is in V8's own code (its builtins, their copy, or the V8 binary's text), not
 * in the code it generated. */
static __always_inline bool v8_own_code(const struct prowl_v8_proc *vp, __u64 pc)
{
	return (pc >= vp->builtins_low && pc < vp->builtins_high) || (pc >= vp->copy_low && pc < vp->copy_high) ||
	       (pc >= vp->text_low && pc < vp->text_high);
}

/* A builtin V8 entered with a direct call from the first frame, that has pushed nothing yet
 * (the baseline builtins: arithmetic, compares, calls): the word at sp is a return address
 * right after a `call rel32` to a builtin at most V8_BUILTIN_SPAN below pc (in the
 * builtins' symbols, their copy, or the V8 binary's text where their symbols are
 * stripped: Node 18's libnode.so). The builtin stays a native frame; the caller's pc is
 * that return address, its frame still bp's.
 * Returns 1 when the frame was taken so, 0 to walk it as a framed one. */
#define V8_BUILTIN_SPAN (64u << 10)
static __always_inline int v8_builtin_frameless(struct uw_state *st, const struct prowl_v8_proc *vp)
{
	__u8 *c = (__u8 *)st->v8_head; /* the call instruction's 5 bytes: not on the BPF stack */
	__u64 ra, target;
	__s32 rel;

	if (stack_read(st, st->sp, &ra) || bpf_probe_read_user(c, 5, (const void *)(ra - 5)) < 0 || c[0] != 0xe8)
		return 0;
	__builtin_memcpy(&rel, &c[1], sizeof(rel));
	target = ra + (__s64)rel;
	if (target > st->pc || st->pc - target > V8_BUILTIN_SPAN || !v8_own_code(vp, target))
		return 0;
	st->pc = ra;
	st->sp += 8;
	st->exact = 0;
	st->v8_lb = 1;
	return 1;
}

/* A frame of JIT code whose frame is not built yet (the places V8's own sampler knows):
 * the first frame at `push %rbp`, at `mov %rsp,%rbp` after it, or in baseline (Sparkplug)
 * code at one of the three instructions before the call to its out-of-line prologue
 * (mov $imm32,%ebx; movabs $imm64,%r12; call); or the frame after a frameless builtin
 * (v8_builtin_frameless), that prologue being the builtin. The function is the one V8
 * called, in rdi (its JSFunction register), recorded as PROWL_V8_ENTRY (user space names
 * it only when the code at pc is its own); the caller's pc is the return address on the
 * stack. Returns 1 when the frame was taken so, 0 to walk it as a framed one. */
static __always_inline int v8_frameless(struct uw_state *st, const struct prowl_v8_proc *vp, bool after_builtin)
{
	__u8 *b = (__u8 *)st->v8_head; /* 40 bytes, b[20] the one at pc: not on the BPF stack */
	__u64 ret_at = st->sp, ret, sfi;
	__u32 j = st->jn, check = 0;

	if (bpf_probe_read_user(b, 40, (const void *)(st->pc - 20)) < 0)
		return 0;
	if (after_builtin) {
		if (!(b[0] == 0xbb && b[5] == 0x49 && b[6] == 0xbc && b[15] == 0xe8))
			return 0;
	} else if (b[20] == 0x48 && b[21] == 0x89 && b[22] == 0xe5) {
		ret_at += 8; /* rbp pushed: the return address is above it */
	} else if (b[20] != 0x55 && !(b[20] == 0xbb && b[25] == 0x49 && b[26] == 0xbc && b[35] == 0xe8) &&
		   !(b[15] == 0xbb && b[20] == 0x49 && b[21] == 0xbc && b[30] == 0xe8) &&
		   !(b[5] == 0xbb && b[10] == 0x49 && b[11] == 0xbc && b[20] == 0xe8)) {
		return 0;
	}
	if (stack_read(st, ret_at, &ret))
		return 0;
	sfi = j < PROWL_MAX_JAVA ? v8_fn_sfi(st, vp, st->rdi, st->v8_head, &check) : 0;
	if (sfi) {
		st->jframes[jframe_slot(j)] = (struct prowl_jframe){
			.ptr = sfi, .off = PROWL_JF_BCI_NONE, .check = check, .idx = (__u8)(st->n - 1),
			.kind = PROWL_V8_ENTRY,
		};
		st->jn = j + 1;
	}
	st->pc = ret;
	st->sp = ret_at + 8;
	st->exact = 0;
	return 1;
}

/* The frame at st->bp, of code at st->pc: a JavaScript function's frame is recorded
 * (its context slot holds a context, not a frame type marker, and its function slot
 * a JSFunction); every V8 frame then steps to its caller by frame pointer. */
static __always_inline void v8_step(struct uw_state *st, const struct prowl_v8_proc *vp)
{
	__u64 bp = st->bp, marker = 0, fn = 0, ba = 0, off = 0;
	__u64 *head = st->v8_head;
	__u32 j = st->jn, bco = PROWL_JF_BCI_NONE, check = 0;
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
	    (fn & vp->heap_tag_mask) == vp->heap_tag) {
		__u64 sfi = v8_fn_sfi(st, vp, fn, head, &check);

		if (sfi) {
			/* Ignition's frames hold their BytecodeArray and the offset (a small
			 * integer) in fixed slots, and run in V8's builtins (the interpreter's
			 * handlers). Sparkplug's hold their feedback vector in the latter; code
			 * compiled on the stack (OSR) keeps the interpreter's frame, the offset
			 * of its loop left in it, but runs in JIT code: both are named by pc
			 * (symbolizer/node/v8inline.c). */
			if (v8_own_code(vp, st->pc - !st->exact) &&
			    !stack_read(st, bp + vp->fp_bytecode_offset, &off) && (off & vp->smi_tag_mask) == vp->smi_tag &&
			    (off >> 32) < PROWL_JF_BCI_NONE && !stack_read(st, bp + vp->fp_bytecode_array, &ba) &&
			    ba && (ba == st->v8_last_ba ||
			     v8_head(st, vp, ba, head, v8_span(vp, 0, 0)) == vp->t_bytecode_array)) {
				st->v8_last_ba = ba;
				bco = (__u32)(off >> 32);
				kind = PROWL_V8_INTERP;
			}
			st->jframes[jframe_slot(j)] = (struct prowl_jframe){
				.ptr = sfi, .off = bco, .check = check, .idx = (__u8)(st->n - 1), .kind = kind,
			};
			st->jn = j + 1;
		}
	}
	fp_step(st, PROWL_UR_V8);
}

#endif /* PROWL_V8_BPF_H */
