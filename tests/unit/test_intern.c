/* test_intern.c: unit tests of the interning table: dense stable ids, binary keys,
 * key memory that never moves, clear and reuse without growth, a model of random puts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "intern.h"

static uint32_t put(struct intern *t, const void *key, size_t len, bool *ret_new)
{
	uint32_t id = 0;

	assert_int_equal(intern_put(t, key, len, &id, ret_new), 0);
	assert_true(id >= 1 && id <= intern_count(t));
	return id;
}

/* Keys that differ only in length or in a NUL byte are different keys; each is
 * returned with its length and a NUL after it. */
static void test_binary_keys(void **state)
{
	static const struct { const char *k; size_t len; } keys[] = {
		{ "", 0 }, { "\0", 1 }, { "\0\0", 2 }, { "a", 1 }, { "a\0", 2 }, { "a\0b", 3 }, { "ab", 2 },
	};
	struct intern *t = intern_new();
	uint32_t ids[7];
	bool added;
	size_t len;

	(void)state;
	assert_non_null(t);
	for (size_t i = 0; i < 7; i++) {
		ids[i] = put(t, keys[i].k, keys[i].len, &added);
		assert_true(added);
		assert_int_equal(ids[i], i + 1); /* dense, in order of arrival */
	}
	for (size_t i = 0; i < 7; i++) {
		const char *k = intern_key(t, ids[i], &len);

		assert_int_equal(put(t, keys[i].k, keys[i].len, &added), ids[i]);
		assert_false(added);
		assert_int_equal(intern_find(t, keys[i].k, keys[i].len), ids[i]);
		assert_int_equal(len, keys[i].len);
		assert_memory_equal(k, keys[i].k, len ? len : 1);
		assert_int_equal(k[len], 0);
	}
	assert_int_equal(intern_count(t), 7);
	assert_null(intern_key(t, 0, NULL));
	assert_null(intern_key(t, 8, NULL));
	assert_int_equal(intern_find(t, "b", 1), 0);
	/* A length past 4 GiB is refused before a byte is read (the key is 1 byte long). */
	assert_int_equal(intern_put(t, "x", (size_t)UINT32_MAX + 7, &ids[1], NULL), -EINVAL);
	assert_int_equal(intern_put_str(t, "ab", &ids[0]), 0);
	assert_int_equal(ids[0], 7);
	assert_string_equal(intern_str(t, 4), "a");
	/* hash_bytes sees the length as well as the bytes. */
	assert_true(hash_bytes("", 0) != hash_bytes("\0", 1) && hash_bytes("\0", 1) != hash_bytes("\0\0", 2));
	intern_free(t);
	intern_free(NULL);
}

/* A key's bytes stay where they are while the table grows around them, keys larger
 * than an arena chunk included. */
static void test_keys_never_move(void **state)
{
	struct intern *t = intern_new();
	const void *first[100];
	static char big[1 << 20];
	char key[32];
	uint32_t big_id;

	(void)state;
	assert_non_null(t);
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "early-%d", i);
		first[i] = intern_str(t, put(t, key, strlen(key), NULL));
	}
	memset(big, 'B', sizeof(big));
	big_id = put(t, big, sizeof(big), NULL);
	for (int i = 0; i < 100000; i++) {
		snprintf(key, sizeof(key), "late-%d", i);
		put(t, key, strlen(key), NULL);
	}
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "early-%d", i);
		assert_ptr_equal(intern_str(t, (uint32_t)i + 1), first[i]);
		assert_string_equal(first[i], key);
	}
	assert_int_equal(intern_find(t, big, sizeof(big)), big_id);
	assert_int_equal(intern_count(t), 100101);
	assert_true(intern_mem_bytes(t) >= sizeof(big) + 100000 * 8);
	intern_free(t);
}

/* Each export window clears its tables: ids restart at 1, old keys are gone, and
 * refilling with the same keys window after window settles at a fixed memory. */
static void test_clear_reuses_memory(void **state)
{
	struct intern *t = intern_new();
	size_t mem_first = 0, mem_steady = 0, mem_busy;
	char key[32];

	(void)state;
	assert_non_null(t);
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < 5000; i++) {
			snprintf(key, sizeof(key), "frame-%d", i);
			assert_int_equal(put(t, key, strlen(key), NULL), (uint32_t)i + 1);
		}
		/* The arena keeps one chunk over a clear, so the second round may allocate
		 * a little more; from the third on, not a byte. */
		if (round == 0)
			mem_first = intern_mem_bytes(t);
		else if (round == 2)
			mem_steady = intern_mem_bytes(t);
		else if (round > 2)
			assert_int_equal(intern_mem_bytes(t), mem_steady);
		assert_true(intern_mem_bytes(t) <= mem_first * 3 / 2);
		intern_clear(t);
		assert_int_equal(intern_count(t), 0);
		assert_int_equal(intern_find(t, "frame-1", 7), 0);
		assert_null(intern_key(t, 1, NULL));
	}
	/* One busy window does not pin its index: a quiet one after it gives it back. */
	for (int i = 0; i < 200000; i++) {
		snprintf(key, sizeof(key), "busy-%d", i);
		put(t, key, strlen(key), NULL);
	}
	mem_busy = intern_mem_bytes(t);
	intern_clear(t);
	put(t, "quiet", 5, NULL);
	intern_clear(t);
	assert_true(intern_mem_bytes(t) < mem_busy / 4);
	assert_int_equal(put(t, "again", 5, NULL), 1);
	intern_free(t);
}

/* Random puts of a pool of keys (random bytes, and one prefix at every length) against
 * a model that knows which id each key got. */
static void test_random_against_model(void **state)
{
	enum { POOL = 6000 };
	static unsigned char keys[POOL][48];
	static size_t lens[POOL];
	static uint32_t model[POOL];
	struct intern *t = intern_new();
	uint32_t count = 0;

	(void)state;
	assert_non_null(t);
	srandom(5);
	for (size_t i = 0; i < POOL; i++) {
		if (i < 48) {
			memset(keys[i], 0x11, i); /* the same bytes, every length from 0 */
			lens[i] = i;
			continue;
		}
		lens[i] = 5 + (size_t)random() % 43;
		memcpy(keys[i], &i, 4); /* distinct from each other and from the prefixes */
		keys[i][4] = 0xfe;
		for (size_t j = 5; j < lens[i]; j++)
			keys[i][j] = (unsigned char)random();
	}
	for (int op = 0; op < 200000; op++) {
		size_t i = (size_t)random() % (op < 50000 ? POOL / 10 : POOL);
		bool added;
		uint32_t id = put(t, keys[i], lens[i], &added);

		if (model[i]) {
			assert_false(added);
			assert_int_equal(id, model[i]);
		} else {
			assert_true(added);
			assert_int_equal(id, ++count);
			model[i] = id;
		}
		if (op == 120000) { /* a window ends */
			intern_clear(t);
			memset(model, 0, sizeof(model));
			count = 0;
		}
	}
	assert_int_equal(intern_count(t), count);
	for (size_t i = 0; i < POOL; i++) {
		size_t len;
		const void *k;

		assert_int_equal(intern_find(t, keys[i], lens[i]), model[i]);
		if (!model[i])
			continue;
		k = intern_key(t, model[i], &len);
		assert_int_equal(len, lens[i]);
		assert_memory_equal(k, keys[i], len ? len : 1);
	}
	intern_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_binary_keys),
		cmocka_unit_test(test_keys_never_move),
		cmocka_unit_test(test_clear_reuses_memory),
		cmocka_unit_test(test_random_against_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
