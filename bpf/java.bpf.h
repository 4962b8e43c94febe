/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* java.bpf.h: the HotSpot frame step of the DWARF unwinder: a pc in the JVM's code cache is
 * an interpreted, compiled or stub frame; it is recorded (Method* or blob, bci or pc offset). */
#ifndef PROWL_JAVA_BPF_H
#define PROWL_JAVA_BPF_H

/* Included by unwind.bpf.h. Its frame step runs on x86_64 only (arm64: the map is
 * there for user space, but the walk never enters it; docs/decisions.md). */

/* JVM processes, written by user space (symbolizer/java/jvmproc.c, through the
 * sampler: agent/sample/maps_io.c): tgid -> the code cache and the offsets. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct prowl_java_proc);
} java_procs SEC(".maps");

/* Segment map hops to a blob's first segment: HotSpot keeps them few (a hop
 * skips up to 254 segments, and the map is rewritten to shorten chains). */
#define JAVA_SEGMAP_HOPS 16
#define JAVA_SEG_FREE    0xff
/* The interpreter's frame, in slots from its frame pointer (x86_64, JDK 9+):
 * the caller's sp, the Method*, the bytecode pointer. */
#define JAVA_IFRAME_SENDER_SP (-1)
#define JAVA_IFRAME_METHOD    (-3)
#define JAVA_IFRAME_BCP       (-8)
/* An interpreter frame pointer this far above sp is not one. */
#define JAVA_IFRAME_MAX_SPAN  (64u << 10)
/* A compiled frame's size, in words, past which it is garbage. */
#define JAVA_MAX_FRAME_WORDS  (1u << 16)

/* The code blob holding pc, or 0: the heap's segment map leads back from pc's
 * segment to the first segment of its block; the blob follows the block header. */
static __always_inline __u64 java_find_blob(const struct prowl_java_proc *jp, __u64 pc)
{
	const struct prowl_java_heap *h = NULL;
	__u64 seg;
	__u8 tag = JAVA_SEG_FREE;

	for (int i = 0; i < PROWL_JAVA_HEAPS; i++)
		if (pc >= jp->heap[i].low && pc < jp->heap[i].high) {
			h = &jp->heap[i];
			break;
		}
	if (!h)
		return 0;
	seg = (pc - h->low) >> (jp->log2_seg & 31);
	for (int i = 0; i < JAVA_SEGMAP_HOPS; i++) {
		if (bpf_probe_read_user(&tag, 1, (const void *)(h->segmap + seg)) < 0)
			return 0;
		if (tag == 0 || tag == JAVA_SEG_FREE || tag > seg)
			break;
		seg -= tag;
	}
	if (tag != 0)
		return 0;
	return h->low + (seg << (jp->log2_seg & 31)) + jp->heap_block;
}

static __always_inline void java_push(struct uw_state *st, __u64 ptr, __u32 off, __u32 check, __u8 kind,
				      __u32 ident)
{
	__u32 j = st->jn;

	if (j >= PROWL_MAX_JAVA)
		return; /* the native pc stays; the frame is named [jit] */
	st->jframes[jframe_slot(j)] = (struct prowl_jframe){
		.ptr = ptr, .off = off, .check = check, .idx = (__u8)(st->n - 1), .kind = kind, .ident = ident,
	};
	st->jn = j + 1;
}

/* An interpreted frame: Method* and bcp from their slots (the leaf's bcp is in r13),
 * the caller from the frame pointer chain. */
static __always_inline void java_interp(struct uw_state *st, const struct prowl_java_proc *jp)
{
	__u64 bp = st->bp, method, bcp, cm = 0, sender_sp, caller_bp, ra, bci = PROWL_JF_BCI_NONE;
	__u64 cp = 0, holder = 0, ksym = 0, nsym = 0;
	__u16 nidx = 0;

	if (!st->bp_valid || bp < st->sp || bp - st->sp > JAVA_IFRAME_MAX_SPAN) {
		unwind_stop(st, PROWL_UR_JAVA);
		return;
	}
	if (stack_read(st, bp + 8 * JAVA_IFRAME_METHOD, &method) || stack_read(st, bp + 8 * JAVA_IFRAME_BCP, &bcp) ||
	    stack_read(st, bp + 8 * JAVA_IFRAME_SENDER_SP, &sender_sp) || stack_read(st, bp, &caller_bp) ||
	    stack_read(st, bp + FP_RA_OFF, &ra)) {
		unwind_stop(st, PROWL_UR_READ);
		return;
	}
	if (st->jdeopt || (st->exact && st->sp > bp + 8 * JAVA_IFRAME_METHOD)) {
		/* Its Method* slot holds whatever the stack held before: a leaf frame not
		 * built yet (sp above the slot), or a skeletal frame that deoptimization
		 * is filling in. Named by a marker; the frame pointer leads on. */
		java_push(st, 0, PROWL_JF_BCI_NONE, 0, PROWL_JF_BUILDING, 0);
		if (!st->jdeopt) {
			fp_step(st, PROWL_UR_JAVA);
			return;
		}
		method = 0;
	}
	if (st->exact && st->r13)
		bcp = st->r13; /* the interpreter keeps the live bcp in r13 */
	if (method && method == st->jlast_method) {
		cm = st->jlast_cm; /* the same method again (recursion): its reads are done */
	} else if (method) {
		bpf_probe_read_user(&cm, sizeof(cm), (const void *)(method + jp->m_const_method));
		/* The method's names as they are now, for user space to check against later. */
		bpf_probe_read_user(&cp, sizeof(cp), (const void *)(cm + jp->cm_constants));
		bpf_probe_read_user(&nidx, sizeof(nidx), (const void *)(cm + jp->cm_name_index));
		bpf_probe_read_user(&holder, sizeof(holder), (const void *)(cp + jp->cp_holder));
		bpf_probe_read_user(&ksym, sizeof(ksym), (const void *)(holder + jp->k_name));
		bpf_probe_read_user(&nsym, sizeof(nsym), (const void *)(cp + jp->cp_size + 8 * (__u64)nidx));
		st->jlast_method = method;
		st->jlast_cm = cm;
		st->jlast_ident = PROWL_JAVA_IDENT(ksym, nsym);
	}
	if (cm && bcp >= cm + jp->const_method_size && bcp - (cm + jp->const_method_size) < PROWL_JF_BCI_NONE)
		bci = bcp - (cm + jp->const_method_size);
	if (method)
		java_push(st, method, (__u32)bci, (__u32)(cm >> 3), PROWL_JF_INTERP, st->jlast_ident);
	if (sender_sp <= st->sp) {
		unwind_stop(st, PROWL_UR_JAVA);
		return;
	}
	st->sp = sender_sp;
	st->bp = caller_bp;
	st->pc = ra;
	st->exact = 0;
	if (!ra)
		unwind_stop(st, PROWL_UR_NONE);
}

/* A frame of code in the code cache: the interpreter, an nmethod, or a stub. */
static __always_inline void java_step(struct uw_state *st, const struct prowl_java_proc *jp)
{
	__u64 pc = st->pc - !st->exact, blob, code = 0, new_sp, ra, bp;
	__s32 fsize = 0, cid = 0;
	__s32 fcomplete = 0;
	char name[8] = {};
	__u64 name_p = 0;
	__u8 kind;

	if (pc >= jp->interp_low && pc < jp->interp_high) {
		java_interp(st, jp);
		return;
	}
	blob = java_find_blob(jp, pc);
	if (!blob || bpf_probe_read_user(&name_p, 8, (const void *)(blob + jp->cb_name)) < 0 ||
	    bpf_probe_read_user(name, sizeof(name), (const void *)name_p) < 0 ||
	    bpf_probe_read_user(&fsize, 4, (const void *)(blob + jp->cb_frame_size)) < 0 ||
	    bpf_probe_read_user(&fcomplete, jp->flags & PROWL_JAVA_FC_16 ? 2 : 4,
				(const void *)(blob + jp->cb_frame_complete)) < 0) {
		unwind_stop(st, PROWL_UR_JAVA);
		return;
	}
	if (jp->flags & PROWL_JAVA_FC_16)
		fcomplete = (__s16)fcomplete;
	if (jp->flags & PROWL_JAVA_CODE_OFFSET) {
		__s32 co = 0;

		bpf_probe_read_user(&co, 4, (const void *)(blob + jp->cb_code));
		code = blob + co;
	} else {
		bpf_probe_read_user(&code, 8, (const void *)(blob + jp->cb_code));
	}
	if (name[0] == 'n' && name[1] == 'm' && name[2] == 'e' && name[6] == 'd' && name[7] == 0)
		kind = PROWL_JF_COMPILED; /* "nmethod" */
	else if (name[0] == 'n' && name[1] == 'a' && name[6] == ' ' && name[7] == 'n')
		kind = PROWL_JF_NATIVE;   /* "native nmethod" */
	else
		kind = PROWL_JF_STUB;
	/* "DeoptimizationBlob", "UncommonTrapBlob": the interpreted frames above are
	 * built by the blob and filled in by the JVM, not yet whole. */
	if ((name[0] == 'D' && name[1] == 'e' && name[2] == 'o' && name[5] == 'i' && name[7] == 'i') ||
	    (name[0] == 'U' && name[1] == 'n' && name[2] == 'c' && name[5] == 'm' && name[7] == 'n'))
		st->jdeopt = 1;
	if (kind != PROWL_JF_STUB)
		bpf_probe_read_user(&cid, 4, (const void *)(blob + jp->nm_compile_id));
	java_push(st, blob, pc >= code ? (__u32)(pc - code) : 0, (__u32)cid, kind, 0);

	if (kind == PROWL_JF_STUB && fsize <= 0) {
		/* Stubs without a frame size (the call stub, StubRoutines) keep rbp. */
		fp_step(st, PROWL_UR_JAVA);
		return;
	}
	if (fsize <= 0 || (__u32)fsize > JAVA_MAX_FRAME_WORDS) {
		unwind_stop(st, PROWL_UR_JAVA);
		return;
	}
	if (st->exact && pc < code + (fcomplete > 0 ? fcomplete : 0)) {
		/* The prologue has not built the frame: the return address is on top. */
		new_sp = st->sp + 8;
		if (stack_read(st, st->sp, &ra)) {
			unwind_stop(st, PROWL_UR_READ);
			return;
		}
		bp = st->bp;
	} else {
		new_sp = st->sp + (__u64)fsize * 8;
		if (stack_read(st, new_sp - 8, &ra) || stack_read(st, new_sp - 16, &bp)) {
			unwind_stop(st, PROWL_UR_READ);
			return;
		}
	}
	st->sp = new_sp;
	st->bp = bp;
	st->bp_valid = 1;
	st->pc = ra;
	st->exact = 0;
	if (!ra)
		unwind_stop(st, PROWL_UR_NONE);
}

#endif /* PROWL_JAVA_BPF_H */
