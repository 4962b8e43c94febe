/* test_jvmname.c: HotSpot's compressed line number tables, as javac's Split.fifty gets
 * them in JDK 17 and (UNSIGNED5, every byte plus one) in JDK 20+, and garbled ones; a
 * compiled frame named from metadata laid out in this process, then freed and reused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "jvmname.h"

/* Split.fifty's LineNumberTable (javap -l): bci 0 line 15, 4: 16, 12: 17, 17: 16,
 * 23: 18, 27: 19. Pairs that fit a byte are (bci delta << 3 | line delta); the others
 * are 0xff and two zigzag integers. */
static const uint8_t fifty_17[] = { 0xff, 0x00, 0x1e, 0x21, 0x41, 0xff, 0x0a, 0x01, 0x32, 0x21, 0x00 };
static const uint8_t fifty_25[] = { 0xff, 0x01, 0x1f, 0x21, 0x41, 0xff, 0x0b, 0x02, 0x32, 0x21, 0x00 };

static void check_fifty(const uint8_t *tab, size_t len, unsigned int jdk)
{
	static const int want[28] = { 15, 15, 15, 15, 16, 16, 16, 16, 16, 16, 16, 16, 17, 17,
				      17, 17, 17, 16, 16, 16, 16, 16, 16, 18, 18, 18, 18, 19 };

	for (uint32_t bci = 0; bci < 28; bci++)
		assert_int_equal(jvm_line_for_bci(tab, len, bci, jdk), want[bci]);
	assert_int_equal(jvm_line_for_bci(tab, len, 5000, jdk), 19);
}

static void test_split_fifty(void **state)
{
	(void)state;
	check_fifty(fifty_17, sizeof(fifty_17), 17);
	check_fifty(fifty_25, sizeof(fifty_25), 25);
	/* Read with the other JDK's coding, each is garbage: no line, not a wrong one. */
	assert_int_equal(jvm_line_for_bci(fifty_25, sizeof(fifty_25), 4, 17), 0);
	assert_int_equal(jvm_line_for_bci(fifty_17, sizeof(fifty_17), 4, 25), 0);
}

/* Line 300 at bci 0: its zigzag 600 takes two bytes in either coding. */
static void test_multibyte(void **state)
{
	static const uint8_t old[] = { 0xff, 0x00, 216, 6, 0x00 };
	static const uint8_t u5[] = { 0xff, 0x01, 217, 7, 0x00 };

	(void)state;
	assert_int_equal(jvm_line_for_bci(old, sizeof(old), 3, 17), 300);
	assert_int_equal(jvm_line_for_bci(u5, sizeof(u5), 3, 21), 300);
}

/* Cut tables (no end byte), escapes without their integers, negative and huge
 * positions, and random bytes: 0 or a line, never a read past the table. */
static void test_garbage(void **state)
{
	static const uint8_t neg[] = { 0xff, 0x01, 0x00, 0x00 };        /* bci -1 */
	static const uint8_t endless[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	unsigned int seed = 7;

	(void)state;
	for (size_t cut = 0; cut < sizeof(fifty_17) - 1; cut++)
		assert_int_equal(jvm_line_for_bci(fifty_17, cut, 30, 17), 0);
	assert_int_equal(jvm_line_for_bci(neg, sizeof(neg), 0, 17), 0);
	assert_int_equal(jvm_line_for_bci(endless, sizeof(endless), 0, 17), 0);
	assert_int_equal(jvm_line_for_bci(NULL, 0, 0, 17), 0);
	for (int round = 0; round < 2000; round++) {
		size_t len = (size_t)rand_r(&seed) % 64 + 1;
		uint8_t *buf = malloc(len); /* exactly len: ASan sees a read past it */

		assert_non_null(buf);
		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)rand_r(&seed);
		assert_true(jvm_line_for_bci(buf, len, (uint32_t)rand_r(&seed) % 100, round & 1 ? 25 : 17) >= 0);
		free(buf);
	}
}

/* A code heap block holding an nmethod of Foo.bar, and its metadata, in this process
 * (the namer reads it with process_vm_readv). Offsets: HotSpot's shape, not its values. */
struct fake_jvm {
	uint64_t block[2]; /* HeapBlock::Header: _length, _used (byte 8) */
	struct {
		uint32_t compile_id, _pad;
		uint64_t method;
	} nm;
	uint64_t method[1];              /* Method::_constMethod */
	uint64_t const_method[4];        /* _constants, then _name_index, _code_size (u16) */
	uint64_t cp[4];                  /* _pool_holder; then the entries from cp_size (16) */
	uint64_t klass[1];               /* Klass::_name */
	struct { uint16_t len; char body[14]; } ksym, nsym; /* Symbol: _length, _body */
};

static struct fake_jvm fj;

static int fake_proc_get(void *ctx, uint32_t pid, struct prowl_java_proc *ret)
{
	(void)ctx, (void)pid;
	memset(ret, 0, sizeof(*ret));
	ret->gen = 7;
	ret->heap_block = 16, ret->hb_used = 8;
	ret->nm_compile_id = 0, ret->nm_method = 8;
	ret->m_const_method = 0, ret->const_method_size = 32;
	ret->cm_constants = 0, ret->cm_name_index = 8, ret->cm_code_size = 10, ret->cm_flags = PROWL_JAVA_NONE;
	ret->cp_holder = 0, ret->cp_size = 16, ret->cp_source_file = PROWL_JAVA_NONE;
	ret->ik_source_file = PROWL_JAVA_NONE, ret->k_name = 0, ret->sym_length = 0, ret->sym_body = 2;
	return 0;
}

static void fake_fill(void)
{
	uint16_t name_idx = 1;

	memset(&fj, 0, sizeof(fj));
	fj.block[1] = 1;
	fj.nm.compile_id = 42;
	fj.nm.method = (uint64_t)(uintptr_t)fj.method;
	fj.method[0] = (uint64_t)(uintptr_t)fj.const_method;
	fj.const_method[0] = (uint64_t)(uintptr_t)fj.cp;
	memcpy((char *)fj.const_method + 8, &name_idx, 2);
	fj.cp[0] = (uint64_t)(uintptr_t)fj.klass;
	fj.cp[3] = (uint64_t)(uintptr_t)&fj.nsym; /* entry 1, at cp_size + 8 */
	fj.klass[0] = (uint64_t)(uintptr_t)&fj.ksym;
	fj.ksym.len = 3, memcpy(fj.ksym.body, "Foo", 3);
	fj.nsym.len = 3, memcpy(fj.nsym.body, "bar", 3);
}

/* Named while the block is in use with the sampled compile id; a marker once the block
 * is freed (its bytes and compile id left as they were, its class's metadata reused by
 * another class) or holds another compilation: never the other class's name. */
static void test_compiled_freed(void **state)
{
	struct maps_io io = { .java_proc_get = fake_proc_get };
	struct jvm_namer *r;
	struct jvm_frame_name out[4];
	struct prowl_jframe f = { .ptr = (uint64_t)(uintptr_t)&fj.nm, .off = 5, .check = 42, .idx = 1,
				  .kind = PROWL_JF_COMPILED };
	const char *why;
	uint64_t key;
	size_t n;

	(void)state;
	fake_fill();
	assert_int_equal(jvm_namer_new(&r), 0);
	jvm_namer_set_io(r, &io);
	assert_int_equal(jvm_namer_frame(r, (uint32_t)getpid(), 7, &f, out, 4, &n, &key, &why), 0);
	assert_int_equal(n, 1);
	assert_string_equal(out[0].function, "Foo.bar");
	/* Freed, and Foo's metadata now another class's: a marker. */
	fj.block[1] = 0;
	memcpy(fj.ksym.body, "Bee", 3);
	f.off = 6; /* another pc: not the cached name */
	assert_int_equal(jvm_namer_frame(r, (uint32_t)getpid(), 7, &f, out, 4, &n, &key, &why), -ESTALE);
	assert_non_null(strstr(why, "freed or replaced"));
	/* The block in use again, by another compilation. */
	fj.block[1] = 1;
	fj.nm.compile_id = 43;
	assert_int_equal(jvm_namer_frame(r, (uint32_t)getpid(), 7, &f, out, 4, &n, &key, &why), -ESTALE);
	/* The same compilation, in use: named (from the memory as it is now). */
	fj.nm.compile_id = 42;
	assert_int_equal(jvm_namer_frame(r, (uint32_t)getpid(), 7, &f, out, 4, &n, &key, &why), 0);
	assert_string_equal(out[0].function, "Bee.bar");
	jvm_namer_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_fifty),
		cmocka_unit_test(test_multibyte),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_compiled_freed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
