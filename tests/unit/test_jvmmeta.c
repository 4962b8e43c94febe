/* test_jvmmeta.c: HotSpot's serviceability tables as captured from real JVMs (OpenJDK 17,
 * Temurin 25; tests/tools/jvm/jvm_capture) give the offsets prowl needs; garbled ones fail cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "jvmimage.h"
#include "jvmmeta.h"
#include "testutil.h"

/* The captured image file (tests/unit/data), gunzipped. */
static uint8_t *load(const char *name, size_t *len)
{
	char path[256];
	uint8_t *gz = malloc(1 << 20), *out;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "tests/unit/data/%s", name);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_non_null(gz);
	n = fread(gz, 1, 1 << 20, f);
	fclose(f);
	out = gunzip(gz, n, len);
	free(gz);
	return out;
}

static struct jvm_image img; /* large: static */

static int parse_image(const uint8_t *buf, size_t len, struct jvm_meta *m)
{
	struct jvm_mem mem = { jvm_image_read, &img };
	int r = jvm_image_parse(buf, len, &img);

	if (r < 0)
		return r;
	return jvm_meta_read(&mem, &img.elf, img.bias, m, NULL, NULL);
}

#define F(m, id) ((m).field[JVM_F_##id])

/* Figures checked against the JDK's own headers (OpenJDK 17: CodeBlob keeps a vtable
 * and _code_begin; nmethod's method is CompiledMethod's). */
static void test_openjdk17(void **state)
{
	struct jvm_meta m;
	size_t len;
	uint8_t *buf = load("jvm17_meta.img.gz", &len);

	(void)state;
	assert_int_equal(parse_image(buf, len, &m), 0);
	assert_int_equal(m.entries[0], 788);
	assert_int_equal(F(m, CB_NAME), 0x60);
	assert_int_equal(F(m, CB_SIZE), 0xc);
	assert_int_equal(F(m, CB_FRAME_SIZE), 0x1c);
	assert_int_equal(m.width[JVM_F_CB_FRAME_SIZE], 4);
	assert_int_equal(F(m, CB_FRAME_COMPLETE), 0x14);
	assert_int_equal(m.width[JVM_F_CB_FRAME_COMPLETE], 4);
	assert_int_equal(F(m, CB_CODE_BEGIN), 0x20);
	assert_false(jvm_has_field(&m, JVM_F_CB_CODE_OFFSET));
	assert_int_equal(F(m, NM_METHOD_OLD), 0x70);
	assert_int_equal(F(m, NM_COMPILE_ID), 0x130);
	assert_int_equal(F(m, M_CONST_METHOD), 0x8);
	assert_int_equal(F(m, CM_CONSTANTS), 0x8);
	assert_int_equal(F(m, CM_NAME_INDEX), 0x22);
	assert_int_equal(m.width[JVM_F_CM_NAME_INDEX], 2);
	assert_int_equal(F(m, CM_SIG_INDEX), 0x24);
	assert_int_equal(F(m, CM_CODE_SIZE), 0x20);
	assert_int_equal(F(m, CM_FLAGS), 0x1c);
	assert_int_equal(F(m, CP_HOLDER), 0x18);
	assert_int_equal(F(m, CP_SOURCE_FILE), 0x36);
	assert_int_equal(F(m, K_NAME), 0x18);
	assert_int_equal(F(m, SYM_LENGTH), 4);
	assert_int_equal(F(m, SYM_BODY), 6);
	assert_int_equal(F(m, CH_SEGMAP), 0x78);
	assert_int_equal(F(m, CH_LOG2_SEG), 0x100);
	assert_int_equal(F(m, GA_LEN), 0);
	assert_int_equal(F(m, GA_DATA), 8);
	/* Static fields are kept relative to the load bias: per libjvm file. */
	assert_true(F(m, CC_HEAPS) > 0x1000000 && F(m, CC_HEAPS) < 0x2000000);
	assert_true(F(m, AI_CODE) > 0x1000000 && F(m, AI_CODE) < 0x2000000);
	assert_int_equal(m.type_size[JVM_T_CONST_METHOD], 0x30);
	assert_int_equal(m.type_size[JVM_T_CONSTANT_POOL], 0x48);
	assert_int_equal(m.type_size[JVM_T_HEAP_BLOCK], 0x10);
	assert_int_equal(m.int_value[JVM_I_HAS_LINES], 1);
	assert_null(jvm_meta_missing(&m));
	free(buf);
}

/* Temurin 25: no vtable in CodeBlob (offsets, a 16-bit frame complete offset), an
 * 8-byte HeapBlock, ConstMethodFlags. */
static void test_temurin25(void **state)
{
	struct jvm_meta m;
	size_t len;
	uint8_t *buf = load("jvm25_meta.img.gz", &len);

	(void)state;
	assert_int_equal(parse_image(buf, len, &m), 0);
	assert_int_equal(F(m, CB_NAME), 0x8);
	assert_int_equal(F(m, CB_SIZE), 0x18);
	assert_int_equal(F(m, CB_FRAME_SIZE), 0x2c);
	assert_int_equal(F(m, CB_FRAME_COMPLETE), 0x36);
	assert_int_equal(m.width[JVM_F_CB_FRAME_COMPLETE], 2);
	assert_int_equal(F(m, CB_CODE_OFFSET), 0x24);
	assert_false(jvm_has_field(&m, JVM_F_CB_CODE_BEGIN));
	assert_int_equal(F(m, NM_METHOD), 0x50);
	assert_int_equal(F(m, NM_COMPILE_ID), 0xd4);
	assert_int_equal(F(m, CM_FLAGS_NEW), 0x1c);
	assert_int_equal(m.type_size[JVM_T_HEAP_BLOCK], 8);
	assert_int_equal(m.int_value[JVM_I_HAS_LINES_NEW], 1);
	assert_null(jvm_meta_missing(&m));
	free(buf);
}

/* Every cut of the image (memory that ends early) and random flips: an error
 * or a result, never a crash or a hang (ASan/UBSan builds check the reads). */
static void test_garbage(void **state)
{
	struct jvm_meta m;
	size_t len;
	uint8_t *buf = load("jvm17_meta.img.gz", &len), *copy = malloc(len);
	unsigned int seed = 12345, ok = 0, failed = 0;

	(void)state;
	assert_non_null(copy);
	for (size_t cut = 0; cut < 256; cut++)
		assert_true(parse_image(buf, cut, &m) < 0);
	for (int round = 0; round < 300; round++) {
		memcpy(copy, buf, len);
		for (int k = 0; k < 8; k++) {
			size_t at = (size_t)rand_r(&seed) % len;

			copy[at] = (uint8_t)rand_r(&seed);
		}
		if (parse_image(copy, len, &m) == 0)
			ok++;
		else
			failed++;
	}
	assert_int_equal(ok + failed, 300);
	free(copy);
	free(buf);
}

/* Forged tables: strides out of range, and a table with no end, are refused. */
static void test_forged_shapes(void **state)
{
	/* Memory: the 20 symbols' values at 0x1000 + 8 * i, one table of entries at 0x2000. */
	static uint8_t mem[0x3000];
	struct jvm_image *im = &img;
	struct jvm_mem rd = { jvm_image_read, im };
	struct jvm_meta m;
	uint64_t v;

	(void)state;
	memset(im, 0, sizeof(*im));
	im->elf.found = true;
	for (unsigned int i = 0; i < JVM_SYM__N; i++)
		im->elf.sym[i] = 0x1000 + 8 * i;
	im->nseg = 1;
	im->seg[0] = (struct jvm_image_seg){ 0, sizeof(mem), mem };
	memset(mem, 0, sizeof(mem));
	/* A stride of 4: too small for HotSpot's entries. */
	v = 4;
	memcpy(mem + 0x1000 + 8 * JVM_SYM_S_STRIDE, &v, 8);
	v = 0x2000;
	memcpy(mem + 0x1000 + 8 * JVM_SYM_STRUCTS, &v, 8);
	assert_int_equal(jvm_meta_read(&rd, &im->elf, 0, &m, NULL, NULL), -EBADMSG);
	/* A stride of 8 with every entry's names pointing at one name: an endless
	 * table, cut at JVM_MAX_ENTRIES (the memory wraps through the image: each entry
	 * reads the same words). */
	v = 16;
	memcpy(mem + 0x1000 + 8 * JVM_SYM_S_STRIDE, &v, 8);
	v = 8;
	memcpy(mem + 0x1000 + 8 * JVM_SYM_S_FIELD, &v, 8);
	for (unsigned int i = 0; i < 0x800; i += 8) {
		v = 0x2f00;
		memcpy(mem + 0x2000 + i, &v, 8);
	}
	memcpy(mem + 0x2f00, "X", 2);
	/* Entries past the image are unreadable: the walk stops with -EFAULT, or at
	 * the bound; it must not run on. */
	assert_true(jvm_meta_read(&rd, &im->elf, 0, &m, NULL, NULL) < 0);
	assert_true(m.entries[0] <= JVM_MAX_ENTRIES);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_openjdk17),
		cmocka_unit_test(test_temurin25),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_forged_shapes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
