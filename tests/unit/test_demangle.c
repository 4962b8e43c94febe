/* test_demangle.c: unit tests of the demangling modes over libiberty: C++ and Rust
 * (legacy and v0) names, what is not mangled, garbage and names too long to try. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"

static void expect(const char *mangled, enum sym_demangle mode, const char *want)
{
	char *got = sym_demangle(mangled, mode);

	if (!want) {
		assert_null(got);
		return;
	}
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void test_modes(void **state)
{
	(void)state;
	expect("_ZNK4shop4CartIlE5totalEv", SYM_DEMANGLE_TEMPLATES, "shop::Cart<long>::total");
	expect("_ZNK4shop4CartIlE5totalEv", SYM_DEMANGLE_FULL, "shop::Cart<long>::total() const");
	expect("_ZNK4shop4CartIlE5totalEv", SYM_DEMANGLE_NONE, NULL);
	/* Rust legacy: the hash suffix goes; v0. */
	expect("_ZN6rs_hot6engine7Planner8optimize17h139b037f8d54d791E", SYM_DEMANGLE_TEMPLATES,
	       "rs_hot::engine::Planner::optimize");
	expect("_RNvMNtCs1234_6rs_hot6engineNtB2_7Planner8optimize", SYM_DEMANGLE_TEMPLATES,
	       "<rs_hot::engine::Planner>::optimize");
}

static void test_not_mangled_or_refused(void **state)
{
	char *long_name = malloc(SYM_DEMANGLE_MAX_NAME + 16);
	enum sym_demangle m;

	(void)state;
	expect("main", SYM_DEMANGLE_TEMPLATES, NULL);
	expect("_Z", SYM_DEMANGLE_TEMPLATES, NULL);
	expect("_Zxyz", SYM_DEMANGLE_TEMPLATES, NULL);   /* libiberty refuses it */
	expect("_RNvXq", SYM_DEMANGLE_TEMPLATES, NULL);
	assert_non_null(long_name);
	memcpy(long_name, "_ZN", 3);
	memset(long_name + 3, '1', SYM_DEMANGLE_MAX_NAME + 8);
	long_name[SYM_DEMANGLE_MAX_NAME + 11] = 0;
	expect(long_name, SYM_DEMANGLE_TEMPLATES, NULL); /* over the length cap: not tried */
	free(long_name);
	assert_int_equal(sym_demangle_parse("full", &m), 0);
	assert_int_equal(m, SYM_DEMANGLE_FULL);
	assert_int_equal(sym_demangle_parse("Full", &m), -EINVAL);
	assert_string_equal(sym_demangle_name(SYM_DEMANGLE_NONE), "none");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_modes),
		cmocka_unit_test(test_not_mangled_or_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
