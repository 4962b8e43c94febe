/* test_v8inline.c: an optimized frame split into its inlined functions: Node 20's own source
 * position and inlining tables (hot() inlining a() and b(), both inlining mix()), and a code object
 * laid out as V8 11.3's (and V8 10's) in a memory image, found from a pc; forged ones fail cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "v8inline.h"
#include "v8forge.h"
#include "v8node20.h"

#define BASE 0x10000ull
V8FORGE_IMAGE(8192, BASE)

#define ADDR(i) (BASE + 8 * (uint64_t)(i))

/* Node 20 (V8 11.3), captured from a live process: the source position table and the
 * inlining positions of TurboFan's code for hot(n) { return a(n) + b(n); }. */
static const uint8_t spt[] = {
	0x03, 0xd4, 0x07, 0x4f, 0xf4, 0xfb, 0xff, 0xff, 0x2f, 0x55, 0x47, 0x6b, 0x48, 0x13, 0xf0, 0xfd, 0xff, 0xff,
	0x0f, 0x1b, 0x14, 0x13, 0x14, 0x5b, 0xff, 0xfd, 0xff, 0xff, 0x0f, 0x19, 0x5f, 0x27, 0xef, 0xfc, 0xff, 0xff,
	0x1f, 0x37, 0x47, 0x75, 0x48, 0x13, 0xa8, 0xfb, 0xff, 0xff, 0x0f, 0x1b, 0x14, 0x13, 0x14, 0x4f, 0xb7, 0xfb,
	0xff, 0xff, 0x0f, 0x19, 0x5f, 0x17, 0xab, 0xfd, 0xff, 0xff, 0x0f, 0x07, 0x1c, 0x43, 0x63, 0x5d, 0xac, 0xfb,
	0xff, 0xff, 0x2f, 0x59, 0xe0, 0xfe, 0xff, 0xff, 0x0f, 0x79, 0xdf, 0xfe, 0xff, 0xff, 0x0f, 0x73, 0xb7, 0xfd,
	0xff, 0xff, 0x1f, 0x69, 0x98, 0xfc, 0xff, 0xff, 0x0f, 0x6f, 0x97, 0xfc, 0xff, 0xff, 0x0f,
};
static const uint8_t ipos[] = {
	0x12, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x89, 0x34, 0x00, 0x00,
	0xa4, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x89, 0x34, 0x00, 0x00,
	0x04, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x89, 0x34, 0x00, 0x00,
	0x00, 0x01, 0x00, 0x80, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x89, 0x34, 0x00, 0x00,
};

/* Literal ids of that code: b, mix, a. */
enum { LIT_B, LIT_MIX, LIT_A };

static void test_tables(void **state)
{
	int32_t fid[V8_INLINE_MAX], pos[V8_INLINE_MAX];
	int64_t raw;

	(void)state;
	/* Code offset 0: hot's entry, not inlined. */
	raw = v8_postab_raw(spt, sizeof(spt), 0);
	assert_int_equal(v8_pos_inlining((uint64_t)raw), 0);
	assert_int_equal(v8_pos_offset((uint64_t)raw), 244);
	/* 150: mix (at 45) inlined into a (its call at 127) inlined into hot (at 257). */
	raw = v8_postab_raw(spt, sizeof(spt), 150);
	assert_int_equal(v8_pos_inlining((uint64_t)raw), 4);
	assert_int_equal(v8_inline_chain(ipos, sizeof(ipos), (uint64_t)raw, fid, pos, V8_INLINE_MAX), 3);
	assert_int_equal(fid[0], LIT_MIX);
	assert_int_equal(pos[0], 45);
	assert_int_equal(fid[1], LIT_A);
	assert_int_equal(pos[1], 127);
	assert_int_equal(fid[2], -1);
	assert_int_equal(pos[2], 257);
	/* 245: b (at 195) inlined into hot at 264. */
	raw = v8_postab_raw(spt, sizeof(spt), 245);
	assert_int_equal(v8_inline_chain(ipos, sizeof(ipos), (uint64_t)raw, fid, pos, V8_INLINE_MAX), 2);
	assert_int_equal(fid[0], LIT_B);
	assert_int_equal(pos[0], 195);
	assert_int_equal(pos[1], 264);
	/* Room for two: the innermost and the outermost. */
	raw = v8_postab_raw(spt, sizeof(spt), 150);
	assert_int_equal(v8_inline_chain(ipos, sizeof(ipos), (uint64_t)raw, fid, pos, 2), 2);
	assert_int_equal(fid[0], LIT_MIX);
	assert_int_equal(fid[1], -1);
	/* A table cut short, and one whose inlining points at itself. */
	assert_int_equal(v8_inline_chain(ipos, 40, (uint64_t)raw, fid, pos, V8_INLINE_MAX), -EBADMSG);
	{
		uint8_t loop[16] = { 0 };
		uint64_t self = (uint64_t)1 << 31; /* inlining id 1, at its own position */

		memcpy(loop, &self, 8);
		assert_int_equal(v8_inline_chain(loop, sizeof(loop), self, fid, pos, V8_INLINE_MAX), -EBADMSG);
	}
	assert_int_equal(v8_postab_raw(spt, 0, 10), -1);
	assert_int_equal(v8_postab_raw((const uint8_t *)"\x03\xff\xff", 3, 10), -1);
}

enum { M_IS = 2, M_CODE = 4, M_FA = 6, M_BYTES = 8, M_SFI = 10, M_WEAK = 12 };
enum { CODE = 300, DD = 400, SPT = 500, LITS = 600, IPOS = 700, SFI_HOT = 800, SFI_A = 810, SFI_B = 820,
       SFI_MIX = 830, ISTREAM = 1022 /* its instructions at word 1024: 64-byte aligned */ };
#define START ADDR(ISTREAM + 2)

static void bytes(int i, const uint8_t *b, size_t n)
{
	img[i] = TAG(M_BYTES);
	img[i + 1] = SMI((int64_t)n);
	memcpy(&img[i + 2], b, n);
}

/* hot()'s code in the image: InstructionStream, Code, DeoptimizationData, tables. */
static int setup(void **state)
{
	uint32_t flags = 13, size = 900; /* TURBOFAN */

	(void)state;
	memset(img, 0, sizeof(img));
	v8forge_map(&forge, M_IS, 252);
	v8forge_map(&forge, M_CODE, 245);
	v8forge_map(&forge, M_FA, 175);
	v8forge_map(&forge, M_BYTES, 190);
	v8forge_map(&forge, M_SFI, 262);
	v8forge_map(&forge, M_WEAK, 240);
	/* Instructions, and words below the code that look like tagged pointers. */
	for (int i = ISTREAM - 600; i < ISTREAM + 2 + 900 / 8; i++)
		img[i] = 0x0000100000000001ull + 0x100 * (uint64_t)i;
	img[ISTREAM] = TAG(M_IS);
	img[ISTREAM + 1] = TAG(CODE);
	img[CODE] = TAG(M_CODE);
	img[CODE + 2] = TAG(DD);
	img[CODE + 3] = TAG(SPT);
	img[CODE + 4] = TAG(ISTREAM);
	img[CODE + 5] = START;
	memcpy(&img[CODE + 6], &flags, 4);
	memcpy(&img[CODE + 7], &size, 4);
	img[DD] = TAG(M_FA);
	img[DD + 1] = SMI(10);
	img[DD + 2 + 1] = SMI(3);
	img[DD + 2 + 2] = TAG(LITS);
	img[DD + 2 + 6] = TAG(SFI_HOT);
	img[DD + 2 + 7] = TAG(IPOS);
	img[LITS] = TAG(M_WEAK);
	img[LITS + 1] = SMI(4);
	img[LITS + 2 + LIT_B] = TAG(SFI_B);
	img[LITS + 2 + LIT_MIX] = TAG(SFI_MIX) | 2; /* a weak reference */
	img[LITS + 2 + LIT_A] = TAG(SFI_A);
	img[LITS + 2 + 3] = TAG(SFI_A);             /* a literal past the inlined functions */
	for (int i = SFI_HOT; i <= SFI_MIX; i += 10)
		img[i] = TAG(M_SFI);
	bytes(SPT, spt, sizeof(spt));
	bytes(IPOS, ipos, sizeof(ipos));
	return 0;
}

static int frames(uint64_t pc, uint64_t sfi, uint64_t *hint, struct v8_inl_frame *out, size_t *n)
{
	return v8_inline_frames(&mem, &node20_vp, pc, sfi, hint, out, V8_INLINE_MAX, n);
}

static void test_code_from_pc(void **state)
{
	struct v8_inl_frame f[V8_INLINE_MAX];
	uint64_t hint = 0;
	size_t n;

	(void)state;
	assert_int_equal(frames(START + 150, TAG(SFI_HOT), &hint, f, &n), 0);
	assert_int_equal(n, 3);
	assert_true(f[0].sfi == TAG(SFI_MIX) && f[0].pos == 45);
	assert_true(f[1].sfi == TAG(SFI_A) && f[1].pos == 127);
	assert_true(f[2].sfi == TAG(SFI_HOT) && f[2].pos == 257);
	assert_true(hint == TAG(M_IS)); /* the map is known from now on */
	assert_int_equal(frames(START + 419, TAG(SFI_HOT), &hint, f, &n), 0);
	assert_int_equal(n, 1);
	assert_true(f[0].sfi == TAG(SFI_HOT) && f[0].pos == 262);
	assert_int_equal(frames(START, TAG(SFI_HOT), &hint, f, &n), 0);
	assert_true(n == 1 && f[0].pos == 244);
	/* Past the code's end; another function's frame: no split, the caller names
	 * the frame's own function. */
	assert_int_equal(frames(START + 900, TAG(SFI_HOT), &hint, f, &n), -ENOENT);
	assert_int_equal(frames(START + 150, TAG(SFI_A), &hint, f, &n), -ENOENT);
	assert_int_equal(n, 0);
}

static void test_forged(void **state)
{
	struct v8_inl_frame f[V8_INLINE_MAX];
	uint64_t hint = 0;
	uint32_t kind = 11;
	size_t n;

	(void)state;
	/* The Code does not point back at the header: no code object there. */
	img[CODE + 4] = TAG(ISTREAM + 8);
	assert_int_equal(frames(START + 150, TAG(SFI_HOT), &hint, f, &n), -ENOENT);
	assert_true(hint == 0);
	setup(NULL);
	/* Baseline code (Sparkplug): its "deoptimization data" is bytecode. */
	memcpy(&img[CODE + 6], &kind, 4);
	assert_int_equal(frames(START + 150, TAG(SFI_HOT), &hint, f, &n), -ENOENT);
	setup(NULL);
	/* An inlined function id past the inlined count, a literal that is no function. */
	img[DD + 2 + 1] = SMI(1);
	assert_int_equal(frames(START + 150, TAG(SFI_HOT), &hint, f, &n), -EBADMSG);
	setup(NULL);
	img[SFI_A] = TAG(M_FA);
	assert_int_equal(frames(START + 150, TAG(SFI_HOT), &hint, f, &n), -EBADMSG);
	setup(NULL);
	/* Lengths past the bounds, a table of the wrong type, a pc below the image. */
	img[SPT + 1] = SMI(V8_POSTAB_MAX + 1);
	assert_int_equal(frames(START + 150, TAG(SFI_HOT), &hint, f, &n), -EBADMSG);
	setup(NULL);
	img[IPOS] = TAG(M_FA);
	assert_int_equal(frames(START + 150, TAG(SFI_HOT), &hint, f, &n), -EBADMSG);
	assert_int_equal(frames(0x5000, TAG(SFI_HOT), &hint, f, &n), -ENOENT);
	/* No InstructionStream constants (an older V8): not read. */
	{
		struct prowl_v8_proc vp = node20_vp;

		vp.t_instruction_stream = 0;
		assert_int_equal(v8_inline_frames(&mem, &vp, START + 150, TAG(SFI_HOT), &hint, f, V8_INLINE_MAX, &n),
				 -ENOENT);
	}
}

/* V8 10 (Node 18): the Code is the header of its instructions, in code space. */
static void test_code_space_layout(void **state)
{
	struct prowl_v8_proc vp = node20_vp;
	struct v8_inl_frame f[V8_INLINE_MAX];
	uint64_t hint = 0;
	uint32_t flags = 13, size = 900;
	size_t n;
	int hdr = ISTREAM + 2 - 16; /* 128 bytes of header before the instructions */

	(void)state;
	vp.t_code = vp.t_instruction_stream = 240;
	vp.o_is_start = 128;
	v8forge_map(&forge, M_CODE, 240);
	img[ISTREAM] = img[ISTREAM + 1] = 0;
	img[hdr] = TAG(M_CODE);
	img[hdr + 2] = TAG(DD);
	img[hdr + 3] = TAG(SPT);
	memcpy(&img[hdr + 5], &size, 4);  /* instruction size: 40 */
	memcpy(&img[hdr + 6], &flags, 4); /* flags: 48 */
	assert_int_equal(v8_inline_frames(&mem, &vp, START + 150, TAG(SFI_HOT), &hint, f, V8_INLINE_MAX, &n), 0);
	assert_int_equal(n, 3);
	assert_true(f[0].sfi == TAG(SFI_MIX) && f[1].sfi == TAG(SFI_A) && f[2].sfi == TAG(SFI_HOT) && f[2].pos == 257);
	assert_true(hint == TAG(M_CODE));
	assert_int_equal(v8_inline_frames(&mem, &vp, START + 900, TAG(SFI_HOT), &hint, f, V8_INLINE_MAX, &n), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tables),
		cmocka_unit_test_setup(test_code_from_pc, setup),
		cmocka_unit_test_setup(test_forged, setup),
		cmocka_unit_test_setup(test_code_space_layout, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
