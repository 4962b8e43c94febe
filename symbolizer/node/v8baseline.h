/* v8baseline.h: the bytecode that a pc of V8's baseline (Sparkplug) code runs, from the code's
 * bytecode offset table walked beside the function's bytecodes. Pure: no process is read here. */
#ifndef PROWL_V8BASELINE_H
#define PROWL_V8BASELINE_H

#include <stddef.h>
#include <stdint.h>

/* Bytecodes 0-3 (Wide, ExtraWide, DebugBreakWide, DebugBreakExtraWide) are prefixes that
 * scale the next bytecode's operands by 2 (even) or 4 (odd), in V8 8 to 12. */
#define V8_BC_PREFIXES 4
#define V8_BC_SIZE_MAX 32 /* a bytecode's size at any scale: 1 + 5 operands of 4 bytes, with room */

/* Whether sizes[3 * count] reads as V8's Bytecodes::kBytecodeSizes: three rows (operand
 * scales 1, 2, 4), the prefixes of size 1 in each, every size in 1..V8_BC_SIZE_MAX. */
int v8_bc_sizes_sane(const uint8_t *sizes, uint32_t count);

/* The bytecode offset run at pc offset pc_off of baseline code whose bytecode offset table
 * (unsigned VLQs: the prologue's machine code length, then each bytecode's in order) is
 * tab[0..tlen), for the bytecodes bc[0..blen) with sizes (v8_bc_sizes_sane). *ret is -1 in
 * the prologue (the function's entry). Returns 0, or -EBADMSG when the table, the
 * bytecodes or the pc do not fit together. */
int v8_baseline_offset(const uint8_t *tab, size_t tlen, const uint8_t *bc, size_t blen, const uint8_t *sizes,
		       uint32_t count, uint32_t pc_off, int32_t *ret);

#endif
