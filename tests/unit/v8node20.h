/* v8node20.h: Node 20's V8 layout as prowl_v8_proc (the v8dbg_ constants of Debian's node
 * 20, V8 11.3), for the tests and the fuzzer of the heap reader (symbolizer/node/v8heap.c). */
#ifndef PROWL_V8NODE20_H
#define PROWL_V8NODE20_H

#include <linux/types.h>
#include "prowl.h"

static const struct prowl_v8_proc node20_vp = {
	.o_map = 0, .o_map_type = 12, .o_fn_shared = 24, .o_sfi_name = 16, .o_sfi_script = 32,
	.t_js_function = 2066, .t_bytecode_array = 191, .t_sfi = 262,
	.smi_tag = 0, .smi_tag_mask = 1, .heap_tag = 1, .heap_tag_mask = 3,
	.t_script = 167, .t_scope_info = 261, .first_nonstring = 128, .o_sfi_data = 8, .o_script_name = 16,
	.o_script_source = 8, .o_script_line_ends = 56, .o_str_length = 12, .o_seq1_chars = 16, .o_seq2_chars = 16,
	.o_cons_first = 16, .o_cons_second = 24, .o_thin_actual = 16, .o_fa_length = 8, .o_fa_data = 16,
	.o_bytecode_data = 54, .t_byte_array = 190, .t_fixed_array = 175,
	.str_repr_mask = 7, .str_encoding_mask = 8, .str_seq = 0, .str_cons = 1, .str_thin = 5,
	.str_one_byte = 8, .str_two_byte = 0, .si_first_vars = 3, .si_ncontext_locals = 2,
	.str_internalized = 8,
	.str_not_string_mask = 0xffffff80u,
	.t_code = 245, .t_instruction_stream = 252, .o_is_start = 16, .o_code_deopt = 16, .o_code_spt = 24,
	.dd_inlined_count = 1, .dd_literals = 2, .dd_sfi = 6, .dd_inlining_positions = 7, .code_kind_mask = 15,
	.code_kind_baseline = 11, .o_code_istream = 32, .o_code_start = 40, .o_code_flags = 48, .o_code_size = 56,
};

#endif
