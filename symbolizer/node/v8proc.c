/* v8proc.c: decides which object is a V8 prowl can walk (one warning for one it cannot) and
 * writes each node process's v8_procs entry through the sampler's maps_io.h calls. */
#include "v8proc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct v8_file *v8_file_detect(Elf *elf, const char *path)
{
	struct v8_meta m;
	struct v8_file *vf;
	char why[160];
	int r = v8_meta_read(elf, &m);

	if (r < 0) {
		if (m.is_v8)
			log_warn("node: %s: %s: its JavaScript frames are not unwound (native frames, and perf-map "
				 "names where /tmp/perf-PID.map exists)", path, v8_meta_why(&m, r, why, sizeof(why)));
		return NULL;
	}
	if (!m.found)
		return NULL;
	vf = calloc(1, sizeof(*vf));
	if (!vf)
		return NULL;
	vf->meta = m;
	log_debug("node: %s: %" PRIu32 " v8dbg_ constants, builtins at %#" PRIx64 "-%#" PRIx64, path, m.nsyms,
		  m.builtins_lo, m.builtins_hi);
	return vf;
}

/* What reading optimized code's inlined functions (v8inline.c) needs, only when every
 * constant is there: V8 11's and 12's Code beside its InstructionStream, or V8 10's Code in code
 * space (t_instruction_stream = t_code), whose position table and deoptimization data
 * precede its instruction size (by 16 and 24 bytes) and whose DeoptimizationData
 * indexes are V8's of old (metadata only from V8 11). */
static void v8_proc_fill_code(const struct v8_meta *m, struct prowl_v8_proc *ret)
{
	const int32_t *v = m->v;

	if (!m->has[V8_T_CODE] || !m->has[V8_CODE_KIND_MASK] || !m->has[V8_CODE_KIND_BASELINE] ||
	    !m->has[V8_O_FA_LENGTH] || !m->has[V8_O_FA_DATA] || !m->has[V8_T_BYTE_ARRAY] || !m->has[V8_T_FIXED_ARRAY])
		return;
	if (m->has[V8_T_INSTRUCTION_STREAM] && m->has[V8_O_IS_START] && m->has[V8_DD_INLINED_COUNT] &&
	    m->has[V8_DD_LITERALS] && m->has[V8_DD_SFI] && m->has[V8_DD_INLINING_POSITIONS]) {
		/* V8 11 exports the deoptimization data and the position table, not what
		 * follows them: the InstructionStream, the instruction start, the flags
		 * and the size, as V8 11.1 to 11.4 lay them out. */
		if (m->has[V8_O_CODE_DEOPT] && m->has[V8_O_CODE_SPT]) {
			ret->t_instruction_stream = (__u16)v[V8_T_INSTRUCTION_STREAM];
			ret->o_code_istream = (__u16)(v[V8_O_CODE_SPT] + 8);
			ret->o_code_start = (__u16)(v[V8_O_CODE_SPT] + 16);
			ret->o_code_flags = (__u16)(v[V8_O_CODE_SPT] + 24);
			ret->o_code_size = (__u16)(v[V8_O_CODE_SPT] + 32);
			return;
		}
		/* V8 12 the other way round: its Code holds the deoptimization data (or
		 * the interpreter data) and the position table in the two words before
		 * its wrapper, and keeps both in its trusted space (other array types). */
		if (m->has[V8_O_CODE_WRAPPER] && v[V8_O_CODE_WRAPPER] >= 24 && m->has[V8_O_CODE_ISTREAM] &&
		    m->has[V8_O_CODE_START] && m->has[V8_O_CODE_FLAGS] && m->has[V8_O_CODE_SIZE] &&
		    m->has[V8_T_TRUSTED_FIXED_ARRAY] && m->has[V8_T_TRUSTED_BYTE_ARRAY]) {
			ret->t_instruction_stream = (__u16)v[V8_T_INSTRUCTION_STREAM];
			ret->o_code_deopt = (__u16)(v[V8_O_CODE_WRAPPER] - 16);
			ret->o_code_spt = (__u16)(v[V8_O_CODE_WRAPPER] - 8);
			ret->o_code_istream = (__u16)v[V8_O_CODE_ISTREAM];
			ret->o_code_start = (__u16)v[V8_O_CODE_START];
			ret->o_code_flags = (__u16)v[V8_O_CODE_FLAGS];
			ret->o_code_size = (__u16)v[V8_O_CODE_SIZE];
			ret->t_trusted_fixed_array = (__u16)v[V8_T_TRUSTED_FIXED_ARRAY];
			ret->t_trusted_byte_array = (__u16)v[V8_T_TRUSTED_BYTE_ARRAY];
			return;
		}
	}
	if (!m->has[V8_T_INSTRUCTION_STREAM] && m->has[V8_O_CODE_START] && m->has[V8_O_CODE_SIZE] &&
	    m->has[V8_O_CODE_FLAGS] && v[V8_O_CODE_SIZE] >= 24 && v[V8_O_CODE_FLAGS] == v[V8_O_CODE_SIZE] + 8) {
		ret->t_instruction_stream = (__u16)v[V8_T_CODE];
		ret->o_is_start = (__u16)v[V8_O_CODE_START];
		ret->o_code_spt = (__u16)(v[V8_O_CODE_SIZE] - 16);
		ret->o_code_deopt = (__u16)(v[V8_O_CODE_SIZE] - 24);
		ret->dd_inlined_count = 1;
		ret->dd_literals = 2;
		ret->dd_sfi = 6;
		ret->dd_inlining_positions = 7;
	}
}

void v8_proc_fill(const struct v8_meta *m, uint64_t bias, uint32_t gen, struct prowl_v8_proc *ret)
{
	const int32_t *v = m->v;

#define U16(i) ((__u16)(m->has[V8_##i] ? v[V8_##i] : 0))
#define U8(i)  ((__u8)v[V8_##i])
	*ret = (struct prowl_v8_proc){
		.builtins_low = m->builtins_hi ? m->builtins_lo + bias : 0,
		.builtins_high = m->builtins_hi ? m->builtins_hi + bias : 0,
		.gen = gen,
		.fp_context = (__s16)v[V8_FP_CONTEXT], .fp_function = (__s16)v[V8_FP_FUNCTION],
		.fp_bytecode_array = (__s16)v[V8_FP_BYTECODE_ARRAY], .fp_bytecode_offset = (__s16)v[V8_FP_BYTECODE_OFFSET],
		.o_map = U16(O_MAP), .o_map_type = U16(O_MAP_TYPE), .o_fn_shared = U16(O_FN_SHARED),
		.o_sfi_name = U16(O_SFI_NAME), .o_sfi_script = U16(O_SFI_SCRIPT),
		.t_js_function = U16(T_JS_FUNCTION), .t_bytecode_array = U16(T_BYTECODE_ARRAY), .t_sfi = U16(T_SFI),
		.smi_tag = U8(SMI_TAG), .smi_tag_mask = U8(SMI_TAG_MASK), .heap_tag = U8(HEAP_TAG),
		.heap_tag_mask = U8(HEAP_TAG_MASK),
		.t_script = U16(T_SCRIPT), .t_scope_info = U16(T_SCOPE_INFO), .first_nonstring = U16(FIRST_NONSTRING),
		.o_sfi_data = U16(O_SFI_DATA), .o_script_name = U16(O_SCRIPT_NAME), .o_script_source = U16(O_SCRIPT_SOURCE),
		.o_script_line_ends = U16(O_SCRIPT_LINE_ENDS), .o_str_length = U16(O_STR_LENGTH),
		.o_seq1_chars = U16(O_SEQ1_CHARS), .o_seq2_chars = U16(O_SEQ2_CHARS), .o_cons_first = U16(O_CONS_FIRST),
		.o_cons_second = U16(O_CONS_SECOND), .o_thin_actual = U16(O_THIN_ACTUAL), .o_fa_length = U16(O_FA_LENGTH),
		.o_fa_data = U16(O_FA_DATA), .o_bytecode_data = U16(O_BYTECODE_DATA), .t_byte_array = U16(T_BYTE_ARRAY),
		.t_fixed_array = U16(T_FIXED_ARRAY), .si_first_vars = U8(SI_FIRST_VARS),
		.si_ncontext_locals = U8(SI_NCONTEXT_LOCALS),
		.str_repr_mask = U8(STR_REPR_MASK), .str_encoding_mask = U8(STR_ENCODING_MASK), .str_seq = U8(STR_SEQ),
		.str_cons = U8(STR_CONS), .str_thin = (__u8)(m->has[V8_STR_THIN] ? v[V8_STR_THIN] : 0xff),
		.str_one_byte = U8(STR_ONE_BYTE), .str_two_byte = U8(STR_TWO_BYTE),
		.str_internalized = (__u8)(m->has[V8_T_INTERNALIZED] && v[V8_T_INTERNALIZED] < 0xff ?
					   v[V8_T_INTERNALIZED] : 0xff),
		.str_not_string_mask = (__u32)v[V8_STR_NOT_STRING_MASK],
		.t_code = U16(T_CODE), .o_is_start = U16(O_IS_START), .o_code_deopt = U16(O_CODE_DEOPT),
		.o_code_spt = U16(O_CODE_SPT), .dd_inlined_count = U8(DD_INLINED_COUNT), .dd_literals = U8(DD_LITERALS),
		.dd_sfi = U8(DD_SFI), .dd_inlining_positions = U8(DD_INLINING_POSITIONS),
		.code_kind_mask = U8(CODE_KIND_MASK), .code_kind_baseline = U8(CODE_KIND_BASELINE),
	};
	/* V8 12 exports no function_data: it is still the field after the map, before the
	 * name (word 1; a V8 laid out otherwise fails the type checks of v8heap.c). */
	if (!m->has[V8_O_SFI_DATA] && m->has[V8_O_SFI_NAME] && v[V8_O_SFI_NAME] == 16)
		ret->o_sfi_data = 8;
	/* V8 12's BytecodeArray: length, wrapper, then the source position table. */
	if (m->has[V8_O_BA_WRAPPER] && v[V8_O_BA_WRAPPER] >= 16)
		ret->o_ba_spt = (__u16)(v[V8_O_BA_WRAPPER] + 8);
	if (m->bc_sizes && m->bc_count) {
		ret->bc_sizes = m->bc_sizes + bias;
		ret->bc_count = (__u16)m->bc_count;
	}
	v8_proc_fill_code(m, ret);
#undef U16
#undef U8
}

int v8_proc_register(const struct maps_io *io, uint32_t pid, const struct v8_file *vf, uint64_t bias, uint32_t gen,
		     uint64_t text_low, uint64_t text_high, uint64_t copy_bias, bool same_process)
{
	struct prowl_v8_proc vp, old;

	v8_proc_fill(&vf->meta, bias, gen, &vp);
	vp.text_low = text_low;
	vp.text_high = text_high;
	if (copy_bias && copy_bias != bias && vf->meta.builtins_hi) {
		vp.copy_low = vf->meta.builtins_lo + copy_bias;
		vp.copy_high = vf->meta.builtins_hi + copy_bias;
	}
	/* Its mappings changed, not its V8: the registration stays, and with its
	 * generation what was named and read of its scripts (v8name.c). The struct has no
	 * padding (prowl.h), so equal bytes are equal fields. */
	if (same_process && io->v8_proc_get && io->v8_proc_get(io->ctx, pid, &old) == 0) {
		vp.gen = old.gen;
		if (!memcmp(&vp, &old, sizeof(vp)))
			return 0;
		vp.gen = gen;
	}
	log_debug("node: pid %" PRIu32 " registered (builtins at %#" PRIx64 ")", pid, (uint64_t)vp.builtins_low);
	return io->v8_proc_set(io->ctx, pid, &vp);
}
