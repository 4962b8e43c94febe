/* test_kallsyms.c: kallsyms parsing (text-only filter, modules, __pfx_ padding,
 * unsorted input, aliases, wide address ranges), lookups, kptr_restrict
 * detection, the table's memory, and /proc/kallsyms against a reference parse. */
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

static struct kallsyms *parse_len(const char *text, size_t len)
{
	struct kallsyms *k = NULL;
	FILE *f = fmemopen((void *)text, len, "r");

	assert_non_null(f);
	assert_int_equal(kallsyms_parse(f, &k), 0);
	fclose(f);
	assert_non_null(k);
	return k;
}

static struct kallsyms *parse(const char *text)
{
	return parse_len(text, strlen(text));
}

static void assert_sorted(const struct kallsyms *k)
{
	for (size_t i = 1; i < k->n; i++)
		assert_true(kallsyms_addr(k, i - 1) <= kallsyms_addr(k, i));
}

/* Full name of a lookup result: prefix and name joined. */
static const char *full_name(const struct ksym *s, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s", s->prefix, s->name);
	return buf;
}

static void expect(const struct kallsyms *k, uint64_t addr, const char *name, const char *module)
{
	char buf[sizeof("__pfx_") + KSYM_NAME_LEN];
	struct ksym s;

	if (!name) {
		assert_false(kallsyms_find(k, addr, &s));
		return;
	}
	assert_true(kallsyms_find(k, addr, &s));
	assert_true(s.addr <= addr);
	assert_string_equal(full_name(&s, buf, sizeof(buf)), name);
	if (module)
		assert_string_equal(s.module, module);
	else
		assert_null(s.module);
}

static void test_lookup(void **state)
{
	struct kallsyms *k = parse(sample);

	(void)state;
	assert_false(k->hidden);
	assert_int_equal(k->n, 8); /* D, r, b dropped */
	assert_sorted(k);
	assert_null(k->addr64); /* one 4 GiB window: 32-bit offsets */

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
	/* Module names are kept once. */
	assert_int_equal(k->nmods, 2);
	kallsyms_free(k);
}

static void test_pfx(void **state)
{
	static const char text[] =
		"ffffffff81000ff0 t __pfx_foo\n"
		"ffffffff81001000 t foo\n"
		"ffffffff81001ff0 T __pfx_bar\n" /* bar itself is missing */
		"ffffffff81002000 T baz\n"
		"ffffffff81002ff0 t __pfx_alias_a\n"
		"ffffffff81002ff0 t __pfx_alias_b\n"
		"ffffffff81003000 t alias_a\n"
		"ffffffff81003000 t alias_b\n"
		"ffffffff81003ff0 t __pfx_\n" /* nothing after the prefix */
		"ffffffff81004000 t __pfx\n"
		"ffffffffc0001ff0 t __pfx_modfn\t[mod_a]\n" /* its function is in another module */
		"ffffffffc0002000 t modfn\t[mod_b]\n"
		"ffffffffc0002ff0 t __pfx_foo\t[mod_b]\n" /* the core kernel's foo is far back */
		"ffffffffc0003000 t bar\t[mod_b]\n"
		"ffffffffc0003ff0 t __pfx_last\t[mod_b]\n";
	/* Each name once: a name equal to a recent __pfx_ entry's shares its bytes. */
	static const char stored[] = "foo\0bar\0baz\0alias_a\0alias_b\0\0__pfx\0modfn\0mod_a\0mod_b\0last";
	struct kallsyms *k = parse(text);

	(void)state;
	assert_int_equal(k->n, 15);
	expect(k, 0xffffffff81000ff0ull, "__pfx_foo", NULL);
	expect(k, 0xffffffff81000fffull, "__pfx_foo", NULL);
	expect(k, 0xffffffff81001000ull, "foo", NULL);
	expect(k, 0xffffffff81001fefull, "foo", NULL);
	expect(k, 0xffffffff81001ff0ull, "__pfx_bar", NULL);
	expect(k, 0xffffffff81002000ull, "baz", NULL);
	expect(k, 0xffffffff81002ff8ull, "__pfx_alias_a", NULL);
	expect(k, 0xffffffff81003008ull, "alias_a", NULL);
	expect(k, 0xffffffff81003ff0ull, "__pfx_", NULL);
	expect(k, 0xffffffff81004000ull, "__pfx", NULL);
	expect(k, 0xffffffffc0001ff0ull, "__pfx_modfn", "mod_a");
	expect(k, 0xffffffffc0002000ull, "modfn", "mod_b");
	expect(k, 0xffffffffc0002ff1ull, "__pfx_foo", "mod_b");
	expect(k, 0xffffffffc0003000ull, "bar", "mod_b");
	expect(k, 0xffffffffc0003fffull, "__pfx_last", "mod_b");
	assert_int_equal(k->names_len, sizeof(stored));
	assert_memory_equal(k->names, stored, sizeof(stored));
	kallsyms_free(k);
}

static void test_unsorted(void **state)
{
	static const char sorted[] =
		"ffffffff81000000 T _stext\n"
		"ffffffff81000ff0 t __pfx_first\n"
		"ffffffff81000ff0 t __pfx_second\n"
		"ffffffff81001000 t first\n"
		"ffffffff81001000 t second\n"
		"ffffffff81002000 T other\n"
		"ffffffffc0001000 t mfn\t[m]\n"
		"ffffffffc0002000 t mfn2\t[m]\n";
	/* The same symbols shuffled; aliases stay in file order among themselves. */
	static const char shuffled[] =
		"ffffffffc0002000 t mfn2\t[m]\n"
		"ffffffff81000ff0 t __pfx_first\n"
		"ffffffff81001000 t first\n"
		"ffffffff81002000 T other\n"
		"ffffffff81000ff0 t __pfx_second\n"
		"ffffffffc0001000 t mfn\t[m]\n"
		"ffffffff81001000 t second\n"
		"ffffffff81000000 T _stext\n";
	static const uint64_t probes[] = {
		0xffffffff80ffffffull, 0xffffffff81000000ull, 0xffffffff81000ff0ull, 0xffffffff81000ff8ull,
		0xffffffff81001000ull, 0xffffffff81001fffull, 0xffffffff81002000ull, 0xffffffffc0001000ull,
		0xffffffffc0001800ull, 0xffffffffc0002000ull, 0xffffffffc0002000ull + KSYM_LAST_MAX,
	};
	struct kallsyms *a = parse(sorted), *b = parse(shuffled);

	(void)state;
	assert_int_equal(a->n, b->n);
	assert_sorted(b);
	for (size_t i = 0; i < sizeof(probes) / sizeof(*probes); i++) {
		char na[sizeof("__pfx_") + KSYM_NAME_LEN], nb[sizeof(na)];
		struct ksym sa, sb;
		bool fa = kallsyms_find(a, probes[i], &sa), fb = kallsyms_find(b, probes[i], &sb);

		assert_int_equal(fa, fb);
		if (!fa)
			continue;
		assert_true(sa.addr == sb.addr);
		assert_string_equal(full_name(&sa, na, sizeof(na)), full_name(&sb, nb, sizeof(nb)));
		if (sa.module)
			assert_string_equal(sa.module, sb.module);
		else
			assert_null(sb.module);
	}
	expect(b, 0xffffffff81000ff8ull, "__pfx_first", NULL);
	expect(b, 0xffffffff81001000ull, "first", NULL);
	expect(b, 0xffffffffc0001800ull, "mfn", "m");
	kallsyms_free(a);
	kallsyms_free(b);

	/* Equal addresses keep file order, not name order, when sorting. */
	a = parse("ffffffff81001000 T zz_first\n"
		  "ffffffff81000000 T _stext\n"
		  "ffffffff81001000 T aa_second\n");
	expect(a, 0xffffffff81001010ull, "zz_first", NULL);
	kallsyms_free(a);
}

static void test_wide(void **state)
{
	/* Addresses more than 4 GiB apart need full 64-bit storage. */
	struct kallsyms *k = parse("ffffffff81001000 T high\n"
				   "0000000100000000 T low\n"
				   "ffffffff81000000 T high_first\n"
				   "0000000100000100 t low2\t[m]\n");

	(void)state;
	assert_non_null(k->addr64);
	assert_null(k->addr32);
	assert_int_equal(k->n, 4);
	assert_sorted(k);
	expect(k, 0x00000000ffffffffull, NULL, NULL);
	expect(k, 0x0000000100000010ull, "low", NULL);
	expect(k, 0x0000000100000200ull, "low2", "m");
	expect(k, 0x0000000100020000ull, "low2", "m"); /* not the last symbol: no limit */
	expect(k, 0xffffffff81000010ull, "high_first", NULL);
	expect(k, 0xffffffff81001010ull, "high", NULL);
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
	assert_int_equal(kallsyms_mem_bytes(k), sizeof(*k));
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
	expect(k, 0, NULL, NULL);
	kallsyms_free(k);
	assert_int_equal(kallsyms_mem_bytes(NULL), 0);
}

static void test_missing(void **state)
{
	struct kallsyms *k = NULL;

	(void)state;
	assert_int_equal(kallsyms_load("/nonexistent/kallsyms", &k), -ENOENT);
	assert_null(k);
	kallsyms_free(NULL);
}

/* 100k symbols, half of them __pfx_ padding, a quarter in 100 modules: the
 * table holds 10 bytes per symbol plus each name once. */
static void test_memory(void **state)
{
	enum { NFUNC = 50000, NSYM = 2 * NFUNC };
	size_t cap = NSYM * 48, len = 0, names = 0;
	char *text = malloc(cap);
	struct kallsyms *k;

	(void)state;
	assert_non_null(text);
	for (unsigned i = 0; i < NFUNC; i++) {
		uint64_t addr = 0xffffffff81000000ull + 32ull * i;
		char mod[16] = "";

		if (i >= NFUNC * 3 / 4) {
			addr = 0xffffffffc0000000ull + 32ull * i;
			snprintf(mod, sizeof(mod), "\t[m%u]", i % 100);
		}
		len += (size_t)snprintf(text + len, cap - len, "%016llx t __pfx_fn%05u%s\n",
					(unsigned long long)addr - 16, i, mod);
		len += (size_t)snprintf(text + len, cap - len, "%016llx T fn%05u%s\n", (unsigned long long)addr, i, mod);
		assert_true(len < cap);
		names += sizeof("fn00000");
	}
	for (unsigned m = 0; m < 100; m++)
		names += (size_t)snprintf(NULL, 0, "m%u", m) + 1;

	k = parse_len(text, len);
	assert_int_equal(k->n, NSYM);
	expect(k, 0xffffffff81000000ull + 32 * 1234 - 1, "__pfx_fn01234", NULL);
	expect(k, 0xffffffff81000000ull + 32 * 1234 + 1, "fn01234", NULL);
	expect(k, 0xffffffffc0000000ull + 32ull * 45678 - 16, "__pfx_fn45678", "m78");
	expect(k, 0xffffffffc0000000ull + 32ull * 45678, "fn45678", "m78");
	/* 24 bytes per symbol (an address and two pointers) would not fit. */
	assert_true(kallsyms_mem_bytes(k) < 16 * NSYM);
	assert_int_equal(kallsyms_mem_bytes(k), sizeof(*k) + 10 * NSYM + 100 * sizeof(uint32_t) + names);
	assert_int_equal(k->names_len, names);
	kallsyms_free(k);
	free(text);
}

struct ref_sym {
	uint64_t addr;
	size_t seq;
	char *name, *module;
};

static int cmp_ref(const void *a, const void *b)
{
	const struct ref_sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The lookup on the plain reference array. */
static const struct ref_sym *ref_find(const struct ref_sym *v, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || (lo == n && addr - v[n - 1].addr >= KSYM_LAST_MAX))
		return NULL;
	lo--;
	while (lo > 0 && v[lo - 1].addr == v[lo].addr)
		lo--;
	return &v[lo];
}

static void check_against_ref(const struct kallsyms *k, const struct ref_sym *v, size_t n, uint64_t addr)
{
	char buf[sizeof("__pfx_") + KSYM_NAME_LEN];
	const struct ref_sym *want = ref_find(v, n, addr);
	struct ksym got;

	if (!want) {
		assert_false(kallsyms_find(k, addr, &got));
		return;
	}
	assert_true(kallsyms_find(k, addr, &got));
	assert_true(got.addr == want->addr);
	assert_string_equal(full_name(&got, buf, sizeof(buf)), want->name);
	if (want->module)
		assert_string_equal(got.module, want->module);
	else
		assert_null(got.module);
}

static void test_proc_kallsyms(void **state)
{
	struct ref_sym *v = NULL;
	size_t n = 0, cap = 0, len = 0, bufcap = 1 << 20, checked = 0;
	char *buf = malloc(bufcap), *line, *save = NULL;
	struct kallsyms *k;
	FILE *f;

	(void)state;
	assert_non_null(buf);
	/* Read once: loaded BPF programs change the file between reads. */
	f = fopen("/proc/kallsyms", "r");
	if (!f) {
		free(buf);
		skip();
	}
	for (size_t got; (got = fread(buf + len, 1, bufcap - len, f)) > 0;) {
		len += got;
		if (len == bufcap) {
			bufcap *= 2;
			buf = realloc(buf, bufcap);
			assert_non_null(buf);
		}
	}
	fclose(f);
	k = parse_len(buf, len);
	if (k->hidden) {
		kallsyms_free(k);
		free(buf);
		skip();
	}
	assert_true(k->n > 1000);
	assert_sorted(k);

	buf[len] = 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[KSYM_NAME_LEN], mod[256], type;
		unsigned long long addr;
		int got = sscanf(line, "%llx %c %511s %255s", &addr, &type, name, mod);

		if (got < 3 || !strchr("tTwW", type))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 4096;
			v = realloc(v, cap * sizeof(*v));
			assert_non_null(v);
		}
		v[n] = (struct ref_sym){ .addr = addr, .seq = n, .name = strdup(name) };
		assert_non_null(v[n].name);
		if (got == 4 && mod[0] == '[') {
			mod[strcspn(mod, "]")] = 0;
			v[n].module = strdup(mod + 1);
			assert_non_null(v[n].module);
		}
		n++;
	}
	qsort(v, n, sizeof(*v), cmp_ref);
	assert_int_equal(k->n, n);

	for (size_t i = 0; i < n; i += 97) {
		check_against_ref(k, v, n, v[i].addr);
		check_against_ref(k, v, n, v[i].addr + 1);
		check_against_ref(k, v, n, v[i].addr - 1);
		checked += 3;
	}
	check_against_ref(k, v, n, v[n - 1].addr + KSYM_LAST_MAX - 1);
	check_against_ref(k, v, n, v[n - 1].addr + KSYM_LAST_MAX);
	print_message("%zu symbols, %zu lookups checked, table %zu bytes\n", n, checked, kallsyms_mem_bytes(k));
	for (size_t i = 0; i < n; i++) {
		if (strcmp(v[i].name, "schedule") == 0 && !v[i].module)
			expect(k, v[i].addr + 1, "schedule", NULL);
		free(v[i].name);
		free(v[i].module);
	}
	free(v);
	kallsyms_free(k);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_pfx),
		cmocka_unit_test(test_unsorted),
		cmocka_unit_test(test_wide),
		cmocka_unit_test(test_hidden),
		cmocka_unit_test(test_missing),
		cmocka_unit_test(test_memory),
		cmocka_unit_test(test_proc_kallsyms),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
