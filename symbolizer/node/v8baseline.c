/* v8baseline.c: the bytecode that a pc of V8's baseline (Sparkplug) code runs: the code's
 * bytecode offset table, one machine code length a bytecode, walked beside the bytecodes. */
#include "v8baseline.h"

#include <errno.h>

#include "v8heap.h"

int v8_bc_sizes_sane(const uint8_t *sizes, uint32_t count)
{
	if (count <= V8_BC_PREFIXES || count > 256)
		return 0;
	for (uint32_t row = 0; row < 3; row++)
		for (uint32_t b = 0; b < count; b++) {
			uint8_t n = sizes[row * count + b];

			if (!n || n > V8_BC_SIZE_MAX || (b < V8_BC_PREFIXES && n != 1))
				return 0;
		}
	return 1;
}

/* An unsigned VLQ (V8's VLQDecodeUnsigned) of 32 bits at most. */
static int uvlq(const uint8_t *t, size_t len, size_t *pos, uint32_t *ret)
{
	uint64_t v;

	if (v8_uvlq(t, len, pos, &v) < 0 || v > UINT32_MAX)
		return -1;
	*ret = (uint32_t)v;
	return 0;
}

/* The length of the bytecode at bc[at], its prefix included; 0 when garbled. */
static uint32_t bc_length(const uint8_t *bc, size_t blen, size_t at, const uint8_t *sizes, uint32_t count)
{
	uint32_t row = 0, pre = 0, b;

	if (at >= blen)
		return 0;
	b = bc[at];
	if (b < V8_BC_PREFIXES) {
		row = b & 1 ? 2 : 1;
		pre = 1;
		if (at + 1 >= blen || (b = bc[at + 1]) < V8_BC_PREFIXES)
			return 0;
	}
	if (b >= count)
		return 0;
	return pre + sizes[row * count + b];
}

int v8_baseline_offset(const uint8_t *tab, size_t tlen, const uint8_t *bc, size_t blen, const uint8_t *sizes,
		       uint32_t count, uint32_t pc_off, int32_t *ret)
{
	size_t pos = 0, at = 0;
	uint64_t end;
	int32_t cur = -1;
	uint32_t d;

	if (uvlq(tab, tlen, &pos, &d) < 0)
		return -EBADMSG;
	/* Each step reads at least one byte of tab and one bytecode: bounded by both. */
	for (end = d; pc_off >= end;) {
		uint32_t n = bc_length(bc, blen, at, sizes, count);

		if (!n || at > INT32_MAX || uvlq(tab, tlen, &pos, &d) < 0)
			return -EBADMSG; /* past the last bytecode, or garbled */
		cur = (int32_t)at;
		at += n;
		end += d;
	}
	*ret = cur;
	return 0;
}
