/* v8inline.c: finds the compiled code object holding a pc (its InstructionStream header below
 * the pc, checked both ways): optimized code's inlined functions from its DeoptimizationData,
 * baseline code's bytecode (v8baseline.c). */
#include "v8inline.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "v8baseline.h"

#define WORD        8
#define CODE_ALIGN  32   /* instruction starts are aligned at least this much (x86-64: 64) */
#define SCAN_CHUNK  4096 /* bytes read per step of the search */
#define SCAN_TRIES  256  /* candidate headers checked by reading the process, per search */
#define INLPOS_SIZE 16   /* InliningPosition: SourcePosition, int function id, padding */

/* V8 10 keeps the code object in code space with its instructions
 * (vp->t_instruction_stream == vp->t_code: the header is the Code): its instruction
 * size, then its flags, follow the position table by 16 and 24 bytes. V8 11 and 12
 * keep a Code beside the InstructionStream, whose fields v8proc.c placed
 * (vp->o_code_istream...). A V8 laid out otherwise fails the checks of code_at() and
 * keeps naming the outer function only. */
#define CODE_FIELDS_MAX  48u /* bytes from Code's InstructionStream to its size's end */
#define V10_SIZE(vp)     ((vp)->o_code_spt + 16u)
#define V10_FLAGS(vp)    ((vp)->o_code_spt + 24u)

static bool in_code_space(const struct prowl_v8_proc *vp)
{
	return vp->t_instruction_stream == vp->t_code;
}

struct code_info {
	uint64_t code, start;
	uint32_t size, kind;
};

/* The small integer at field off of obj, checked to lie in [0, max]. */
static int smi_field(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t obj, uint32_t off, int64_t max,
		     int64_t *ret)
{
	uint64_t w;

	if (v8_field(m, vp, obj, off, &w) < 0 || (w & vp->smi_tag_mask) != vp->smi_tag)
		return -EBADMSG;
	*ret = (int64_t)w >> 32;
	return *ret >= 0 && *ret <= max ? 0 : -EBADMSG;
}

/* Whether the instruction start s (its header's map word mapw and the Code word
 * codew already read) is a code object holding pc: the header's map is an
 * InstructionStream's, its Code points back to it and starts at s. 1: it is and
 * holds pc; 0: no code object there; -ENOENT: one that ends before pc. */
static int code_at(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t s, uint64_t pc, uint64_t mapw,
		   uint64_t codew, uint64_t *hint, struct code_info *ci)
{
	uint64_t istream = s - vp->o_is_start + vp->heap_tag, got, start;
	uint32_t base = vp->o_code_istream, len = vp->o_code_size + 4u - base;
	uint8_t w[CODE_FIELDS_MAX];

	if (!*hint && v8_obj_type(m, vp, istream) != vp->t_instruction_stream)
		return 0;
	if (in_code_space(vp)) { /* V8 10: the header is the Code */
		if (v8_read(m, istream - vp->heap_tag + V10_SIZE(vp), &ci->size, 4) < 0 ||
		    v8_read(m, istream - vp->heap_tag + V10_FLAGS(vp), &ci->kind, 4) < 0)
			return 0;
		*hint = mapw;
		ci->code = istream;
		ci->start = s;
		ci->kind &= vp->code_kind_mask;
		return pc - s < ci->size ? 1 : -ENOENT;
	}
	if (!base || vp->o_code_size < base || len > sizeof(w) || vp->o_code_start < base ||
	    vp->o_code_start + 8u - base > len || vp->o_code_flags < base || vp->o_code_flags + 4u - base > len)
		return 0;
	if (v8_obj_type(m, vp, codew) != vp->t_code || v8_read(m, codew - vp->heap_tag + base, w, len) < 0)
		return 0;
	memcpy(&got, w, 8);
	memcpy(&start, w + (vp->o_code_start - base), 8);
	if (got != istream || start != s)
		return 0;
	*hint = mapw;
	ci->code = codew;
	ci->start = s;
	memcpy(&ci->kind, w + (vp->o_code_flags - base), 4);
	memcpy(&ci->size, w + (vp->o_code_size - base), 4);
	ci->kind &= vp->code_kind_mask;
	return pc - s < ci->size ? 1 : -ENOENT;
}

/* The code object holding pc: the nearest header below pc that checks out. */
static int find_code(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t pc, uint64_t *hint,
		     struct code_info *ci)
{
	uint64_t buf[SCAN_CHUNK / WORD], lo = 0, s = pc & ~(uint64_t)(CODE_ALIGN - 1);
	uint32_t hdr = vp->o_is_start;
	unsigned int tries = 0;

	if (hdr < 2 * WORD || hdr % WORD || hdr >= SCAN_CHUNK / 2)
		return -ENOENT;
	for (uint64_t scanned = 0; scanned < V8_CODE_SCAN && s > SCAN_CHUNK; s -= CODE_ALIGN, scanned += CODE_ALIGN) {
		uint64_t mapw, codew;
		int r;

		if (s - hdr < lo || !lo) { /* the window [s - SCAN_CHUNK, s) holds this header */
			lo = s - SCAN_CHUNK;
			if (v8_read(m, lo, buf, sizeof(buf)) < 0)
				return -ENOENT;
		}
		mapw = buf[(s - hdr - lo) / WORD];
		codew = buf[(s - hdr + WORD - lo) / WORD]; /* the InstructionStream's second word */
		if ((!in_code_space(vp) && !v8_is_heap(vp, codew)) || (*hint ? mapw != *hint : !v8_is_heap(vp, mapw)))
			continue;
		if (!*hint && ++tries > SCAN_TRIES)
			return -ENOENT;
		r = code_at(m, vp, s, pc, mapw, codew, hint, ci);
		if (r)
			return r < 0 ? r : 0;
	}
	return -ENOENT;
}

int v8_inline_chain(const uint8_t *tab, size_t len, uint64_t p, int32_t *fid, int32_t *pos, size_t cap)
{
	size_t n = 0, steps = 0, ids = len / INLPOS_SIZE;
	uint32_t id;

	if (!cap)
		return -EBADMSG;
	while ((id = v8_pos_inlining(p)) != 0) {
		uint64_t caller;
		int32_t f;

		if (id > ids || ++steps > ids)
			return -EBADMSG; /* past the table, or a cycle */
		memcpy(&caller, tab + (size_t)(id - 1) * INLPOS_SIZE, 8);
		memcpy(&f, tab + (size_t)(id - 1) * INLPOS_SIZE + 8, 4);
		if (f < 0)
			return -EBADMSG;
		if (n + 1 < cap) { /* the outermost keeps the last place */
			fid[n] = f;
			pos[n++] = v8_pos_offset(p);
		}
		p = caller;
	}
	fid[n] = -1;
	pos[n++] = v8_pos_offset(p);
	return (int)n;
}

/* A malloc'ed copy of the bytes of ByteArray (or V8 12's TrustedByteArray) arr (at
 * most max), checked. */
static int byte_array(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t arr, int64_t max,
		      uint8_t **ret, size_t *ret_len)
{
	int t = v8_obj_type(m, vp, arr);
	int64_t len;

	*ret = NULL;
	if ((t != vp->t_byte_array && (!vp->t_trusted_byte_array || t != vp->t_trusted_byte_array)) ||
	    smi_field(m, vp, arr, vp->o_fa_length, max, &len) < 0)
		return -EBADMSG;
	*ret_len = (size_t)len;
	if (!len)
		return 0;
	if (!(*ret = malloc((size_t)len)))
		return -ENOMEM;
	if (v8_read(m, arr - vp->heap_tag + vp->o_fa_data, *ret, (size_t)len) < 0) {
		free(*ret);
		*ret = NULL;
		return -EFAULT;
	}
	return 0;
}

/* Element i of FixedArray (or WeakFixedArray) arr of length len; a weak reference made strong. */
static int element(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t arr, int64_t len, int64_t i,
		   uint64_t *ret)
{
	if (i < 0 || i >= len || v8_field(m, vp, arr, vp->o_fa_data + (uint32_t)(i * WORD), ret) < 0)
		return -EBADMSG;
	if ((*ret & 3) == 3) /* weak: the tag with bit 1 set */
		*ret &= ~(uint64_t)2;
	return 0;
}

/* Baseline (Sparkplug) code ci of sfi at pc: the line of the bytecode it runs there. Its
 * deoptimization data slot holds the BytecodeArray, its position table slot the bytecode
 * offset table; V8's bytecode sizes are read from the process (vp->bc_sizes). */
static int baseline_frame(const struct v8_mem *m, const struct prowl_v8_proc *vp, const struct code_info *ci,
			  uint64_t pc, uint64_t sfi, struct v8_inl_frame *out, size_t *ret_n)
{
	uint8_t sizes[3 * 256], *tab = NULL, *bc = NULL;
	uint64_t own, ba, w;
	size_t tlen = 0;
	int32_t bco, pos = -1;
	int64_t blen;
	int r;

	if (!vp->bc_sizes || vp->bc_count > 256 || !vp->o_sfi_data || vp->o_bytecode_data <= vp->heap_tag)
		return -ENOENT; /* a V8 whose sizes or fields prowl did not find: the first line */
	if (v8_field(m, vp, sfi, vp->o_sfi_data, &own) < 0 || own != ci->code)
		return -ENOENT; /* not sfi's baseline code: not the frame BPF saw */
	if (v8_field(m, vp, ci->code, vp->o_code_deopt, &ba) < 0 || v8_obj_type(m, vp, ba) != vp->t_bytecode_array ||
	    smi_field(m, vp, ba, vp->o_fa_length, V8_POSTAB_MAX, &blen) < 0 ||
	    v8_read(m, vp->bc_sizes, sizes, 3u * vp->bc_count) < 0 || !v8_bc_sizes_sane(sizes, vp->bc_count) ||
	    v8_field(m, vp, ci->code, vp->o_code_spt, &w) < 0)
		return -EBADMSG;
	if ((r = byte_array(m, vp, w, V8_POSTAB_MAX, &tab, &tlen)) < 0)
		return r == -ENOMEM ? r : -EBADMSG;
	r = -ENOMEM;
	if (blen && !(bc = malloc((size_t)blen)))
		goto out;
	r = -EBADMSG;
	if ((blen && v8_read(m, ba - vp->heap_tag + vp->o_bytecode_data, bc, (size_t)blen) < 0) ||
	    v8_baseline_offset(tab, tlen, bc, (size_t)blen, sizes, vp->bc_count, (uint32_t)(pc - ci->start), &bco) < 0)
		goto out;
	/* In the prologue: the function's entry (its first line). */
	if (bco >= 0 && (r = v8_bytecode_array_position(m, vp, ba, (uint32_t)bco, &pos)) < 0 && r == -ENOMEM)
		goto out;
	out[0] = (struct v8_inl_frame){ sfi, pos };
	*ret_n = 1;
	r = 0;
out:
	free(tab);
	free(bc);
	return r;
}

static int code_frames(const struct v8_mem *m, const struct prowl_v8_proc *vp, const struct code_info *ci,
		       uint64_t pc, uint64_t sfi, struct v8_inl_frame *out, size_t cap, size_t *ret_n)
{
	uint64_t dd, own, lits, w;
	int64_t ddlen, ninl, nlits;
	uint8_t *spt = NULL, *ipos = NULL;
	size_t sptlen = 0, iplen = 0;
	int32_t fid[V8_INLINE_MAX], pos[V8_INLINE_MAX];
	int64_t raw;
	int n, r;

	if (ci->kind == vp->code_kind_baseline)
		return baseline_frame(m, vp, ci, pc, sfi, out, ret_n);
	if (ci->kind < vp->code_kind_baseline)
		return -ENOENT; /* not a JavaScript function's */
	if (v8_field(m, vp, ci->code, vp->o_code_deopt, &dd) < 0 ||
	    (v8_obj_type(m, vp, dd) != vp->t_fixed_array &&
	     (!vp->t_trusted_fixed_array || v8_obj_type(m, vp, dd) != vp->t_trusted_fixed_array)) ||
	    smi_field(m, vp, dd, vp->o_fa_length, 1 << 20, &ddlen) < 0 || element(m, vp, dd, ddlen, vp->dd_sfi, &own) < 0)
		return -EBADMSG;
	if (own != sfi)
		return -ENOENT; /* the code of another function: not the frame BPF saw */
	if (v8_field(m, vp, ci->code, vp->o_code_spt, &w) < 0)
		return -EBADMSG;
	if ((r = byte_array(m, vp, w, V8_POSTAB_MAX, &spt, &sptlen)) < 0)
		return r == -ENOMEM ? r : -EBADMSG;
	raw = v8_postab_raw(spt, sptlen, (uint32_t)(pc - ci->start));
	free(spt);
	if (raw < 0)
		raw = 0; /* no position yet: the function's entry */
	if (!v8_pos_inlining((uint64_t)raw)) {
		out[0] = (struct v8_inl_frame){ sfi, v8_pos_offset((uint64_t)raw) };
		*ret_n = 1;
		return 0;
	}
	if (element(m, vp, dd, ddlen, vp->dd_inlined_count, &w) < 0 || (w & vp->smi_tag_mask) != vp->smi_tag ||
	    (ninl = (int64_t)w >> 32) < 0 || ninl > V8_INLINE_IDS || element(m, vp, dd, ddlen, vp->dd_literals, &lits) < 0 ||
	    smi_field(m, vp, lits, vp->o_fa_length, 1 << 20, &nlits) < 0 ||
	    element(m, vp, dd, ddlen, vp->dd_inlining_positions, &w) < 0)
		return -EBADMSG;
	if ((r = byte_array(m, vp, w, (int64_t)V8_INLINE_IDS * INLPOS_SIZE, &ipos, &iplen)) < 0)
		return r == -ENOMEM ? r : -EBADMSG;
	n = v8_inline_chain(ipos, iplen, (uint64_t)raw, fid, pos, cap < V8_INLINE_MAX ? cap : V8_INLINE_MAX);
	free(ipos);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		uint64_t f = sfi;

		if (fid[i] >= 0 && (fid[i] >= ninl || element(m, vp, lits, nlits, fid[i], &f) < 0 ||
				    v8_obj_type(m, vp, f) != vp->t_sfi))
			return -EBADMSG;
		out[i] = (struct v8_inl_frame){ f, pos[i] };
	}
	*ret_n = (size_t)n;
	return 0;
}

int v8_inline_frames(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t pc, uint64_t sfi,
		     uint64_t *hint, struct v8_inl_frame *out, size_t cap, size_t *ret_n)
{
	struct code_info ci;
	int r;

	*ret_n = 0;
	if (!vp->t_instruction_stream || !cap || (pc >= vp->builtins_low && pc < vp->builtins_high) ||
	    (pc >= vp->copy_low && pc < vp->copy_high) || (pc >= vp->text_low && pc < vp->text_high))
		return -ENOENT; /* not read for this V8, or V8's own code */
	r = find_code(m, vp, pc, hint, &ci);
	if (r < 0)
		return r;
	return code_frames(m, vp, &ci, pc, sfi, out, cap, ret_n);
}
