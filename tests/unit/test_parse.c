/* test_parse.c: unit tests of the strict value parsers in lib/parse.c: every size
 * suffix (T included, issue 33), the largest size that fits in 64 bits and the next. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "parse.h"

static void test_size_suffixes(void **state)
{
	static const struct { const char *in; uint64_t want; } ok[] = {
		{ "0", 0 }, { "100", 100 }, { "100B", 100 },
		{ "512k", 512ull << 10 }, { "512K", 512ull << 10 }, { "512KB", 512ull << 10 }, { "512KiB", 512ull << 10 },
		{ "64M", 64ull << 20 }, { "64MB", 64ull << 20 }, { "64MiB", 64ull << 20 },
		{ "1G", 1ull << 30 }, { "1GB", 1ull << 30 }, { "1GiB", 1ull << 30 }, { "1024GiB", 1ull << 40 },
		{ "1T", 1ull << 40 }, { "1TB", 1ull << 40 }, { "1TiB", 1ull << 40 }, { "3TiB", 3ull << 40 },
		/* 2^64 - 2^40: the most whole TiB in 64 bits */
		{ "16777215TiB", 16777215ull << 40 },
		{ "18446744073709551615", UINT64_MAX },
	};
	static const char *const invalid[] = {
		"", "T", "1t", "1Ti", "1TIB", "1PiB", "1 TiB", "-1TiB", "1.5TiB", "TiB1", "1TiBB", "0x10",
	};
	static const char *const too_big[] = {
		"16777216TiB", "16777216T", "17179869184GiB", "18446744073709551616", "99999999999999999999TiB",
	};
	uint64_t v;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		v = 1;
		assert_int_equal(parse_size_bytes(ok[i].in, &v), 0);
		assert_true(v == ok[i].want);
	}
	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++)
		assert_int_equal(parse_size_bytes(invalid[i], &v), -EINVAL);
	for (size_t i = 0; i < sizeof(too_big) / sizeof(too_big[0]); i++)
		assert_int_equal(parse_size_bytes(too_big[i], &v), -ERANGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_size_suffixes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
