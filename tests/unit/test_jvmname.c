/* test_jvmname.c: HotSpot's compressed line number tables, as javac's Split.fifty gets
 * them in JDK 17 and (UNSIGNED5, every byte plus one) in JDK 20+, and garbled ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_fifty),
		cmocka_unit_test(test_multibyte),
		cmocka_unit_test(test_garbage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
