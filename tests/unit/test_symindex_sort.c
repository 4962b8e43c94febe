/* test_symindex_sort.c: the symbol index's radix sort gives the order a stable sort by
 * (address, rank) gives: aliases, ranks, addresses spread over more than 32 bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "dwfl_session.h"
#include "symindex.h"

/* Reference: insertion by (addr, rank), stable (names carry the input order). */
static void reference(struct fsym *v, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct fsym x = v[i];
		size_t j = i;

		while (j && (v[j - 1].addr > x.addr || (v[j - 1].addr == x.addr && v[j - 1].rank > x.rank))) {
			v[j] = v[j - 1];
			j--;
		}
		v[j] = x;
	}
}

static void check(uint64_t base, uint64_t span, size_t n, unsigned seed)
{
	struct fsym *a = calloc(n, sizeof(*a)), *b = calloc(n, sizeof(*b));
	static char tags[4096];

	assert_true(a && b && n <= sizeof(tags));
	srand(seed);
	for (size_t i = 0; i < n; i++) {
		/* few distinct addresses: many aliases */
		a[i].addr = base + ((uint64_t)rand() * 2654435761u) % span;
		if (i && rand() % 3 == 0)
			a[i].addr = a[rand() % i].addr;
		a[i].rank = (unsigned)rand() % 4;
		a[i].size = i;
		a[i].name = &tags[i];
	}
	memcpy(b, a, n * sizeof(*a));
	fsyms_sort(a, n);
	reference(b, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(a[i].addr, b[i].addr);
		assert_int_equal(a[i].rank, b[i].rank);
		assert_ptr_equal(a[i].name, b[i].name); /* stable: same alias first */
	}
	free(a);
	free(b);
}

static void test_sort(void **state)
{
	(void)state;
	check(0x400000, 0x10000, 3000, 1);
	check(0x7f0000000000ull, 1ull << 40, 3000, 2); /* a span past 32 bits */
	check(0, 16, 500, 3);                          /* mostly aliases */
	check(0x1000, 1, 100, 4);                      /* one address: ranks only */
	check(0x1000, 1000, 1, 5);
}

static void test_sorted_input_unchanged(void **state)
{
	struct fsym v[64];

	(void)state;
	for (size_t i = 0; i < 64; i++)
		v[i] = (struct fsym){ .addr = 0x1000 + i / 2 * 16, .rank = i % 2, .size = i };
	fsyms_sort(v, 64);
	for (size_t i = 0; i < 64; i++)
		assert_int_equal(v[i].size, i);
	fsyms_sort(v, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sort),
		cmocka_unit_test(test_sorted_input_unchanged),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
