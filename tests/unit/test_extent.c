/* test_extent.c: the extent allocator the unwinder carves its BPF arrays with:
 * exhaustion, fragmentation, coalescing, the reuse grace period, and a random
 * workload checked against a bitmap of which entries are taken. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "extent.h"

#define MS (1000ull * 1000)

/* The free list is sorted, coalesced (no two extents touch), inside [0, total),
 * and with the limbo and the used count accounts for every entry once. */
static void check_invariants(const struct extent_space *s)
{
	uint64_t free_len = 0, limbo_len = 0;

	for (size_t i = 0; i < s->nfree; i++) {
		assert_true(s->free[i].len > 0);
		assert_true((uint64_t)s->free[i].start + s->free[i].len <= s->total);
		if (i > 0)
			assert_true((uint64_t)s->free[i - 1].start + s->free[i - 1].len < s->free[i].start);
		free_len += s->free[i].len;
	}
	for (size_t i = 0; i < s->nlimbo; i++)
		limbo_len += s->limbo[i].len;
	assert_int_equal(free_len + s->used, s->total);
	assert_true(limbo_len <= s->used);
}

static void test_exhaustion(void **state)
{
	struct extent_space s;
	uint32_t at;

	(void)state;
	assert_int_equal(extent_init(&s, 100, 0), 0);
	for (uint32_t i = 0; i < 10; i++) {
		assert_int_equal(extent_alloc(&s, 10, &at), 0);
		assert_int_equal(at, i * 10);
	}
	assert_int_equal(s.used, 100);
	assert_int_equal(s.nfree, 0);
	assert_int_equal(extent_alloc(&s, 1, &at), -ENOSPC);
	check_invariants(&s);
	/* Larger than the whole space, and an empty space. */
	assert_int_equal(extent_release(&s, 50, 10), 0);
	assert_int_equal(extent_alloc(&s, 11, &at), -ENOSPC);
	assert_int_equal(extent_alloc(&s, 10, &at), 0);
	assert_int_equal(at, 50);
	extent_fini(&s);
	assert_int_equal(extent_init(&s, 0, 0), 0);
	assert_int_equal(extent_alloc(&s, 1, &at), -ENOSPC);
	extent_fini(&s);
}

/* Every other extent freed: half the space is free, in holes too small for a
 * larger request; first fit takes the lowest hole that fits. */
static void test_fragmentation(void **state)
{
	struct extent_space s;
	uint32_t at;

	(void)state;
	assert_int_equal(extent_init(&s, 64, 0), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(extent_alloc(&s, 8, &at), 0);
	for (uint32_t i = 0; i < 64; i += 16)
		assert_int_equal(extent_release(&s, i, 8), 0);
	check_invariants(&s);
	assert_int_equal(s.nfree, 4);
	assert_int_equal(s.used, 32);
	assert_int_equal(extent_alloc(&s, 9, &at), -ENOSPC);
	assert_int_equal(extent_alloc(&s, 5, &at), 0);
	assert_int_equal(at, 0);
	assert_int_equal(extent_alloc(&s, 4, &at), 0); /* 3 left at 5: the next hole */
	assert_int_equal(at, 16);
	assert_int_equal(extent_alloc(&s, 3, &at), 0);
	assert_int_equal(at, 5);
	check_invariants(&s);
	extent_fini(&s);
}

/* A freed extent merges with a free neighbour on either side or both; the free
 * list grows past its first capacity (16) with many holes. */
static void test_coalescing(void **state)
{
	struct extent_space s;
	uint32_t at;

	(void)state;
	assert_int_equal(extent_init(&s, 1000, 0), 0);
	for (int i = 0; i < 100; i++)
		assert_int_equal(extent_alloc(&s, 10, &at), 0);
	assert_int_equal(extent_release(&s, 100, 10), 0);
	assert_int_equal(extent_release(&s, 120, 10), 0);
	assert_int_equal(s.nfree, 2);
	assert_int_equal(extent_release(&s, 110, 10), 0); /* both sides */
	assert_int_equal(s.nfree, 1);
	assert_int_equal(s.free[0].start, 100);
	assert_int_equal(s.free[0].len, 30);
	assert_int_equal(extent_release(&s, 90, 10), 0); /* before */
	assert_int_equal(extent_release(&s, 130, 10), 0); /* after */
	assert_int_equal(s.nfree, 1);
	assert_int_equal(s.free[0].start, 90);
	assert_int_equal(s.free[0].len, 50);
	/* 40 holes: the list grows, and stays sorted whatever the release order. */
	for (uint32_t i = 0; i < 40; i++)
		assert_int_equal(extent_release(&s, 980 - i * 20, 10), 0);
	check_invariants(&s);
	assert_int_equal(s.nfree, 41);
	/* Fill the holes back in: one free extent is left. */
	for (uint32_t i = 0; i < 40; i++)
		assert_int_equal(extent_release(&s, 990 - i * 20, 10), 0);
	check_invariants(&s);
	assert_int_equal(extent_alloc(&s, 50, &at), 0);
	assert_int_equal(at, 90);
	extent_fini(&s);
}

/* A deferred extent is not reusable before the grace period, and is after. */
static void test_reuse_grace(void **state)
{
	const uint64_t grace = 60 * MS;
	struct extent_space s;
	uint64_t t0, waited;
	uint32_t at;

	(void)state;
	assert_int_equal(extent_init(&s, 30, grace), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(extent_alloc(&s, 10, &at), 0);
	extent_defer(&s, 10, 10);
	extent_defer(&s, 0, 0); /* nothing */
	assert_int_equal(s.nlimbo, 1);
	assert_int_equal(s.used, 30); /* deferred still counts as used */
	assert_int_equal(extent_alloc(&s, 10, &at), -ENOSPC);
	assert_int_equal(extent_reclaim(&s, false), 0);
	assert_int_equal(extent_alloc(&s, 10, &at), -ENOSPC);
	t0 = clock_mono_ns();
	assert_int_equal(extent_reclaim(&s, true), 1);
	waited = clock_mono_ns() - t0;
	/* It slept for (nearly all of) the grace period, not longer than a margin. */
	assert_true(waited >= grace - 5 * MS);
	assert_true(waited < grace + 2000 * MS);
	assert_int_equal(s.nlimbo, 0);
	assert_int_equal(extent_alloc(&s, 10, &at), 0);
	assert_int_equal(at, 10);
	/* Without waiting: released once the period is over. */
	extent_defer(&s, 20, 10);
	assert_int_equal(extent_reclaim(&s, false), 0);
	while (clock_mono_ns() - s.limbo[0].freed_ns < grace)
		;
	assert_int_equal(extent_reclaim(&s, false), 1);
	assert_int_equal(s.used, 20);
	check_invariants(&s);
	extent_fini(&s);
}

/* Random allocations and frees against a bitmap: no extent handed out
 * overlaps a taken entry, and a request fails only when no free run is long
 * enough. */
static void test_random_against_bitmap(void **state)
{
	enum { TOTAL = 4096, ROUNDS = 20000 };
	static bool taken[TOTAL];
	struct { uint32_t start, len; } live[512];
	size_t nlive = 0;
	struct extent_space s;
	unsigned int seed = 1;

	(void)state;
	memset(taken, 0, sizeof(taken));
	assert_int_equal(extent_init(&s, TOTAL, 0), 0);
	for (int round = 0; round < ROUNDS; round++) {
		bool do_alloc = nlive == 0 || (nlive < 512 && rand_r(&seed) % 2);

		if (do_alloc) {
			uint32_t len = 1 + (uint32_t)rand_r(&seed) % 64, at, run = 0, best = 0;
			int r = extent_alloc(&s, len, &at);

			if (r < 0) {
				for (uint32_t i = 0; i < TOTAL; i++) {
					run = taken[i] ? 0 : run + 1;
					if (run > best)
						best = run;
				}
				assert_int_equal(r, -ENOSPC);
				assert_true(best < len);
				continue;
			}
			assert_true(at + len <= TOTAL);
			for (uint32_t i = at; i < at + len; i++) {
				assert_false(taken[i]);
				taken[i] = true;
			}
			live[nlive].start = at;
			live[nlive++].len = len;
		} else {
			size_t k = (size_t)rand_r(&seed) % nlive;

			assert_int_equal(extent_release(&s, live[k].start, live[k].len), 0);
			for (uint32_t i = live[k].start; i < live[k].start + live[k].len; i++)
				taken[i] = false;
			live[k] = live[--nlive];
		}
		if (round % 256 == 0)
			check_invariants(&s);
	}
	check_invariants(&s);
	extent_fini(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exhaustion),
		cmocka_unit_test(test_fragmentation),
		cmocka_unit_test(test_coalescing),
		cmocka_unit_test(test_reuse_grace),
		cmocka_unit_test(test_random_against_bitmap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
