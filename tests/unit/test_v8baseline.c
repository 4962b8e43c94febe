/* test_v8baseline.c: a pc of baseline (Sparkplug) code to its bytecode: the bytecode offset
 * table walked beside bytecodes of known sizes, prefixed (Wide, ExtraWide) ones included, and
 * sizes tables and tables that do not fit together refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "v8baseline.h"

#define COUNT 10

/* Rows for operand scales 1, 2, 4: bytecodes 0-3 are the prefixes (size 1); 5 has one
 * operand (2 bytes, 3, 5 with the scales), 6 two (3, 5, 9), 7 none. */
static uint8_t sizes[3 * COUNT];

static void fill_sizes(void)
{
	for (int row = 0; row < 3; row++)
		for (int b = 0; b < COUNT; b++) {
			int w = 1 << row;

			sizes[row * COUNT + b] = b < V8_BC_PREFIXES ? 1 : b == 5 ? 1 + w : b == 6 ? 1 + 2 * w : 1;
		}
}

static int32_t at(const uint8_t *tab, size_t tlen, const uint8_t *bc, size_t blen, uint32_t pc)
{
	int32_t r = -99;

	assert_int_equal(v8_baseline_offset(tab, tlen, bc, blen, sizes, COUNT, pc, &r), 0);
	return r;
}

static void test_offsets(void **state)
{
	/* 5 x (offset 0, 2 bytes); Wide 6 x x (offset 2, 1 + 5 bytes); 7 (offset 8); ExtraWide
	 * 5 x x x x (offset 9, 1 + 5 bytes) */
	static const uint8_t bc[] = { 5, 1, 0, 6, 1, 2, 3, 4, 7, 1, 5, 9, 9, 9, 9 };
	/* the prologue's 10 bytes of code, then 4, 200 (a two-byte VLQ), 2 and 1 */
	static const uint8_t tab[] = { 10, 4, 0xc8, 0x01, 2, 1 };
	int32_t r;

	(void)state;
	fill_sizes();
	assert_true(v8_bc_sizes_sane(sizes, COUNT));
	assert_int_equal(at(tab, sizeof(tab), bc, sizeof(bc), 0), -1); /* the prologue: the entry */
	assert_int_equal(at(tab, sizeof(tab), bc, sizeof(bc), 9), -1);
	assert_int_equal(at(tab, sizeof(tab), bc, sizeof(bc), 10), 0);
	assert_int_equal(at(tab, sizeof(tab), bc, sizeof(bc), 13), 0);
	assert_int_equal(at(tab, sizeof(tab), bc, sizeof(bc), 14), 2); /* the Wide prefix's offset */
	assert_int_equal(at(tab, sizeof(tab), bc, sizeof(bc), 213), 2);
	assert_int_equal(at(tab, sizeof(tab), bc, sizeof(bc), 214), 8);
	assert_int_equal(at(tab, sizeof(tab), bc, sizeof(bc), 216), 9);
	/* past the last bytecode's code, or a table longer than the bytecodes */
	assert_int_equal(v8_baseline_offset(tab, sizeof(tab), bc, sizeof(bc), sizes, COUNT, 217, &r), -EBADMSG);
	assert_int_equal(v8_baseline_offset(tab, sizeof(tab), bc, 8, sizes, COUNT, 214, &r), -EBADMSG);
}

static void test_forged(void **state)
{
	static const uint8_t tab[] = { 10, 4, 4, 4 };
	static const uint8_t prefix2[] = { 0, 1, 7 }, big[] = { 200, 7 }, cut[] = { 0 };
	static const uint8_t vlq[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x01 }, bc[] = { 7, 7 };
	uint8_t bad[3 * COUNT];
	int32_t r;

	(void)state;
	fill_sizes();
	/* a prefix before a prefix, a bytecode past the count, a prefix at the end */
	assert_int_equal(v8_baseline_offset(tab, sizeof(tab), prefix2, sizeof(prefix2), sizes, COUNT, 12, &r), -EBADMSG);
	assert_int_equal(v8_baseline_offset(tab, sizeof(tab), big, sizeof(big), sizes, COUNT, 12, &r), -EBADMSG);
	assert_int_equal(v8_baseline_offset(tab, sizeof(tab), cut, sizeof(cut), sizes, COUNT, 12, &r), -EBADMSG);
	/* a VLQ above 32 bits, an empty table */
	assert_int_equal(v8_baseline_offset(vlq, sizeof(vlq), bc, sizeof(bc), sizes, COUNT, 0, &r), -EBADMSG);
	assert_int_equal(v8_baseline_offset(tab, 0, bc, sizeof(bc), sizes, COUNT, 0, &r), -EBADMSG);
	/* sizes tables that are not V8's */
	memcpy(bad, sizes, sizeof(bad));
	bad[COUNT + 1] = 2; /* a prefix of size 2 at scale 2 */
	assert_false(v8_bc_sizes_sane(bad, COUNT));
	memcpy(bad, sizes, sizeof(bad));
	bad[2 * COUNT + 7] = 0;
	assert_false(v8_bc_sizes_sane(bad, COUNT));
	memcpy(bad, sizes, sizeof(bad));
	bad[6] = V8_BC_SIZE_MAX + 1;
	assert_false(v8_bc_sizes_sane(bad, COUNT));
	assert_false(v8_bc_sizes_sane(sizes, V8_BC_PREFIXES));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_offsets),
		cmocka_unit_test(test_forged),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
