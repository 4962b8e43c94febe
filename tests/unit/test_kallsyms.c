/* test_kallsyms.c: kallsyms parsing (text-only filter, modules, unsorted input,
 * aliases) and lookups, kptr_restrict detection, and a smoke test on /proc/kallsyms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kallsyms.h"

static const char sample[] =
	"ffffffffc0a01000 t nft_do_chain\t[nf_tables]\n"
	"ffffffff81000000 T _stext\n"
	"ffffffff81000000 T _text\n"
	"ffffffff81001000 T do_syscall_64\n"
	"ffffffff81002000 D some_data\n"
	"ffffffff81001800 t helper_local\n"
	"ffffffff81003000 r some_rodata\n"
	"ffffffff81004000 W weak_func\n"
	"ffffffffc0a01400 t nft_lookup_eval\t[nf_tables]\n"
	"ffffffffc0800000 T ext4_sync_file\t[ext4]\n"
	"garbage line\n"
	"ffffffff81005000 b some_bss\n";

static struct kallsyms *parse(const char *text)
{
	struct kallsyms *k = NULL;
	FILE *f = fmemopen((void *)text, strlen(text), "r");

	assert_non_null(f);
	assert_int_equal(kallsyms_parse(f, &k), 0);
	fclose(f);
	assert_non_null(k);
	return k;
}

static void expect(const struct kallsyms *k, uint64_t addr, const char *name, const char *module)
{
	const struct ksym *s = kallsyms_find(k, addr);

	if (!name) {
		assert_null(s);
		return;
	}
	assert_non_null(s);
	assert_string_equal(s->name, name);
	if (module)
		assert_string_equal(s->module, module);
	else
		assert_null(s->module);
}

static void test_lookup(void **state)
{
	struct kallsyms *k = parse(sample);

	(void)state;
	assert_false(k->hidden);
	assert_int_equal(k->n, 8); /* D, r, b dropped */
	for (size_t i = 1; i < k->n; i++)
		assert_true(k->v[i - 1].addr <= k->v[i].addr);

	expect(k, 0xffffffff80ffffffull, NULL, NULL);                /* before first */
	expect(k, 0xffffffff81000000ull, "_stext", NULL);            /* alias: first in file order */
	expect(k, 0xffffffff81000fffull, "_stext", NULL);
	expect(k, 0xffffffff81001000ull, "do_syscall_64", NULL);     /* exact */
	expect(k, 0xffffffff81001234ull, "do_syscall_64", NULL);     /* inside */
	expect(k, 0xffffffff81001800ull, "helper_local", NULL);
	expect(k, 0xffffffff81002010ull, "helper_local", NULL);      /* data symbols are not boundaries */
	expect(k, 0xffffffff81004010ull, "weak_func", NULL);
	expect(k, 0xffffffffc0800010ull, "ext4_sync_file", "ext4"); /* between modules */
	expect(k, 0xffffffffc0a01000ull, "nft_do_chain", "nf_tables");
	expect(k, 0xffffffffc0a013ffull, "nft_do_chain", "nf_tables");
	expect(k, 0xffffffffc0a01400ull, "nft_lookup_eval", "nf_tables");
	expect(k, 0xffffffffc0a01400ull + KSYM_LAST_MAX - 1, "nft_lookup_eval", "nf_tables");
	expect(k, 0xffffffffc0a01400ull + KSYM_LAST_MAX, NULL, NULL); /* far after last */
	expect(k, UINT64_MAX, NULL, NULL);
	kallsyms_free(k);
}

static void test_hidden(void **state)
{
	static const char hidden[] = "0000000000000000 T _stext\n"
				     "0000000000000000 T do_syscall_64\n"
				     "0000000000000000 t nft_do_chain\t[nf_tables]\n"
				     "0000000000000000 D some_data\n";
	struct kallsyms *k = parse(hidden);

	(void)state;
	assert_true(k->hidden);
	assert_int_equal(k->n, 0);
	expect(k, 0, NULL, NULL);
	expect(k, 0xffffffff81001000ull, NULL, NULL);
	kallsyms_free(k);

	/* One nonzero address is enough to trust the table. */
	k = parse("0000000000000000 A fixed_percpu_data\nffffffff81001000 T do_syscall_64\n");
	assert_false(k->hidden);
	assert_int_equal(k->n, 1);
	kallsyms_free(k);

	k = parse("");
	assert_false(k->hidden);
	assert_int_equal(k->n, 0);
	kallsyms_free(k);
}

static void test_missing(void **state)
{
	struct kallsyms *k = NULL;

	(void)state;
	assert_int_equal(kallsyms_load("/nonexistent/kallsyms", &k), -ENOENT);
	assert_null(k);
	kallsyms_free(NULL);
}

static void test_proc_kallsyms(void **state)
{
	struct kallsyms *k = NULL;
	const struct ksym *s;
	char line[512], name[256], type;
	unsigned long long addr = 0;
	FILE *f;

	(void)state;
	if (kallsyms_load("/proc/kallsyms", &k) < 0)
		skip();
	if (k->hidden) {
		kallsyms_free(k);
		skip();
	}
	assert_true(k->n > 1000);
	/* Find an independent reference for a core function with a unique name. */
	f = fopen("/proc/kallsyms", "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %255s", &addr, &type, name) == 3 && strcmp(name, "schedule") == 0)
			break;
	fclose(f);
	assert_string_equal(name, "schedule");
	s = kallsyms_find(k, addr + 1);
	assert_non_null(s);
	assert_true(s->addr == addr);
	assert_string_equal(s->name, "schedule");
	assert_null(s->module);
	kallsyms_free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_hidden),
		cmocka_unit_test(test_missing),
		cmocka_unit_test(test_proc_kallsyms),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
