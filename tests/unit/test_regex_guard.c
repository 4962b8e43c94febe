/* test_regex_guard.c: unit tests of the regular-expression pre-check: what Prometheus
 * users write passes, and what would make glibc's regcomp() run out of memory does not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <regex.h>
#include <string.h>

#include "regex_guard.h"

static void test_accepts_real_expressions(void **state)
{
	static const char *ok[] = {
		"", "shop", "shop|cart", "(.*)/(.*)", "kube-.+", "a+?", "a*?b??", "x{2,5}?",
		"[+*?]+", "[[:alpha:]]{3}", "\\\\+\\\\*", "([a-z0-9-]+)\\\\.svc", "a{1000}",
		"(((((((((((((((((((((((((((((((x)))))))))))))))))))))))))))))))",
	};
	char err[128];

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		regex_t rx;

		assert_int_equal(regex_guard(ok[i], err, sizeof(err)), 0);
		assert_int_equal(regcomp(&rx, ok[i], REG_EXTENDED | REG_NOSUB), 0);
		regfree(&rx);
	}
}

static void test_refuses_what_blows_up(void **state)
{
	static const struct {
		const char *re, *why;
	} bad[] = {
		{ "h++", "bad repetition operator: +" },
		{ "a*+", "bad repetition operator: +" },
		{ "a+??", "bad repetition operator: ?" },
		{ "x{2}{3}", "bad repetition operator: {3}" },
		{ "a{1001}", "repetition counts add up to more than 1000" },
		{ "(a{600}){600}", "repetition counts add up to more than 1000" },
	};
	char err[128], deep[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(regex_guard(bad[i].re, err, sizeof(err)), -EINVAL);
		assert_string_equal(err, bad[i].why);
	}
	memset(deep, '(', 65);
	deep[65] = 'x';
	memset(deep + 66, ')', 65);
	deep[131] = 0;
	assert_int_equal(regex_guard(deep, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "groups nested more than 64 deep");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accepts_real_expressions),
		cmocka_unit_test(test_refuses_what_blows_up),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
