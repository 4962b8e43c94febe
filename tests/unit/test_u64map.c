/* test_u64map.c: unit tests of the u64 hash map: keys that share a home slot (runs that
 * wrap around the end), deletes between growths, and random operations against a model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "u64map.h"

/* An empty map whose slot array has exactly cap slots (a power of two >= 16). */
static void empty_map_of(struct u64map *m, uint32_t cap)
{
	*m = (struct u64map){};
	for (uint64_t k = 1; m->cap < cap; k++)
		assert_int_equal(u64map_put(m, k, k), 0);
	assert_int_equal(m->cap, cap);
	for (uint32_t i = 0; i < m->cap; i++)
		m->slots[i].used = false;
	m->count = 0;
}

/* Where key lands in probe, an empty map: its home slot, found by asking the map
 * itself rather than copying its hash function. */
static uint32_t home_of(struct u64map *probe, uint64_t key)
{
	uint32_t home = UINT32_MAX;

	assert_int_equal(probe->count, 0);
	assert_int_equal(u64map_put(probe, key, 0), 0);
	for (uint32_t i = 0; i < probe->cap; i++)
		if (probe->slots[i].used)
			home = i;
	assert_true(u64map_del(probe, key));
	return home;
}

/* Every key of want[0..n) is found with its value; every key of gone[0..ngone) is not. */
static void check(const struct u64map *m, const uint64_t *want, size_t n, const uint64_t *gone, size_t ngone)
{
	uint64_t v;

	assert_int_equal(m->count, n);
	for (size_t i = 0; i < n; i++) {
		if (!u64map_get(m, want[i], &v))
			fail_msg("key %#llx lost", (unsigned long long)want[i]);
		assert_int_equal(v, want[i] ^ 0x5a5a);
	}
	for (size_t i = 0; i < ngone; i++)
		if (u64map_get(m, gone[i], NULL))
			fail_msg("deleted key %#llx still found", (unsigned long long)gone[i]);
}

/* Keys that share a home slot near the end of the array, so their run wraps to slot 0,
 * interleaved with keys whose home is slot 0 or 1; deleting from the middle of such a
 * run must move the right members back, and only those. */
static void test_collisions_wrap_around(void **state)
{
	enum { CAP = 64, SAME = 6, LOW = 4 };
	uint64_t same[SAME], low[LOW], all[SAME + LOW], gone[SAME + LOW];
	struct u64map m, probe;

	(void)state;
	empty_map_of(&probe, CAP);
	for (uint64_t k = 1000, n = 0; n < SAME; k++)
		if (home_of(&probe, k) == CAP - 2)
			same[n++] = k;
	for (uint64_t k = 5000, n = 0; n < LOW; k++)
		if (home_of(&probe, k) == n % 2)
			low[n++] = k;
	u64map_free(&probe);
	/* Every order of deleting: the first, a middle one, the last of the run, ... */
	for (unsigned int order = 0; order < 24; order++) {
		size_t n = 0, ngone = 0;

		empty_map_of(&m, CAP);
		for (size_t i = 0; i < SAME; i++) {
			assert_int_equal(u64map_put(&m, same[i], same[i] ^ 0x5a5a), 0);
			all[n++] = same[i];
			if (i == 2)
				for (size_t j = 0; j < LOW; j++) {
					assert_int_equal(u64map_put(&m, low[j], low[j] ^ 0x5a5a), 0);
					all[n++] = low[j];
				}
		}
		assert_int_equal(m.cap, CAP); /* no growth hid the collisions */
		check(&m, all, n, NULL, 0);
		srandom(order);
		while (n > 0) {
			size_t i = order == 0 ? 0 : order == 1 ? n - 1 : (size_t)random() % n;

			assert_true(u64map_del(&m, all[i]));
			assert_false(u64map_del(&m, all[i]));
			gone[ngone++] = all[i];
			all[i] = all[--n];
			check(&m, all, n, gone, ngone);
		}
		u64map_free(&m);
	}
}

/* A simple model: present[k] and val[k] for keys k < NKEYS. */
enum { NKEYS = 2048 };

struct model {
	bool present[NKEYS];
	uint64_t val[NKEYS];
	size_t count;
};

static void check_model(const struct u64map *m, const struct model *md, uint64_t key_of[])
{
	uint64_t k, v, seen = 0;
	uint32_t pos = 0;

	assert_int_equal(m->count, md->count);
	for (size_t i = 0; i < NKEYS; i++) {
		bool got = u64map_get(m, key_of[i], &v);

		if (got != md->present[i] || (got && v != md->val[i]))
			fail_msg("key %zu: map says %d (%llu), model %d (%llu)", i, got, (unsigned long long)v,
				 md->present[i], (unsigned long long)md->val[i]);
	}
	while (u64map_next(m, &pos, &k, &v)) {
		size_t i = 0;

		while (i < NKEYS && key_of[i] != k)
			i++;
		assert_true(i < NKEYS && md->present[i] && md->val[i] == v);
		seen++;
	}
	assert_int_equal(seen, md->count);
}

/* Random puts, replaces and deletes against the model, with growth and shrinking
 * occupancy: the backward-shift deletion must keep every probe run whole. */
static void test_random_against_model(void **state)
{
	static uint64_t key_of[NKEYS];
	static struct model md;
	struct u64map m = {};

	(void)state;
	srandom(64);
	/* Clustered keys (pids, addresses) and spread ones, 0 and ~0 among them. */
	for (size_t i = 0; i < NKEYS; i++)
		key_of[i] = i < NKEYS / 2 ? 0x400000 + i * 16 : ((uint64_t)random() << 33) ^ (uint64_t)random();
	key_of[1] = 0;
	key_of[2] = UINT64_MAX;
	for (int op = 0; op < 300000; op++) {
		/* Phases: mostly puts (growth), then mostly deletes, again and again. */
		bool grow_phase = (op / 20000) % 2 == 0;
		size_t i = (size_t)random() % (op < 100000 ? NKEYS / 8 : NKEYS);
		int dice = (int)(random() % 10);

		if (dice < (grow_phase ? 7 : 3)) {
			uint64_t v = (uint64_t)random();

			assert_int_equal(u64map_put(&m, key_of[i], v), 0);
			md.count += !md.present[i];
			md.present[i] = true;
			md.val[i] = v;
		} else {
			assert_int_equal(u64map_del(&m, key_of[i]), md.present[i]);
			md.count -= md.present[i];
			md.present[i] = false;
		}
		if (op % 5000 == 0)
			check_model(&m, &md, key_of);
	}
	check_model(&m, &md, key_of);
	assert_true(m.cap >= 1024); /* it did grow through several sizes */
	u64map_free(&m);
	assert_int_equal(m.cap, 0);
	assert_false(u64map_get(&m, key_of[3], NULL));
}

/* Deletes between growths: every other key goes as the map grows to 100000 keys, and
 * what grows is what is left, not what was deleted. */
static void test_deletes_during_growth(void **state)
{
	struct u64map m = {};
	uint64_t v;

	(void)state;
	for (uint64_t k = 1; k <= 200000; k++) {
		assert_int_equal(u64map_put(&m, k * 4096, k), 0);
		if (k % 2 == 0)
			assert_true(u64map_del(&m, (k - 1) * 4096));
	}
	assert_int_equal(m.count, 100000);
	for (uint64_t k = 1; k <= 200000; k++) {
		bool want = k % 2 == 0;

		assert_int_equal(u64map_get(&m, k * 4096, &v), want);
		if (want)
			assert_int_equal(v, k);
	}
	/* 100000 live keys at <= 3/4 load: 131072 or 262144 slots, never sized by the 200000 puts. */
	assert_true(m.cap <= 262144);
	assert_int_equal(u64map_mem_bytes(&m), (size_t)m.cap * sizeof(*m.slots));
	u64map_free(&m);
}

static void test_empty_map(void **state)
{
	struct u64map m = {};
	uint32_t pos = 0;

	(void)state;
	assert_false(u64map_get(&m, 0, NULL));
	assert_false(u64map_del(&m, 0));
	assert_false(u64map_next(&m, &pos, NULL, NULL));
	assert_int_equal(u64map_mem_bytes(&m), 0);
	u64map_free(&m);
	assert_int_equal(u64map_put(&m, 7, 8), 0);
	assert_int_equal(u64map_put(&m, 7, 9), 0); /* replaces */
	assert_int_equal(m.count, 1);
	pos = 0;
	assert_true(u64map_next(&m, &pos, NULL, NULL));
	assert_false(u64map_next(&m, &pos, NULL, NULL));
	u64map_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_collisions_wrap_around),
		cmocka_unit_test(test_random_against_model),
		cmocka_unit_test(test_deletes_during_growth),
		cmocka_unit_test(test_empty_map),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
