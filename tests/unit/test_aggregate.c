/* test_aggregate.c: unit tests of the aggregate stage: interning identity,
 * growth, memory that does not grow with samples, stats and profile_top. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"

#if defined(__SANITIZE_ADDRESS__)
/* From ASan's runtime (gcc ships no header for it). */
size_t __sanitizer_get_current_allocated_bytes(void);
#else
#include <malloc.h>
#endif

static uint32_t add_map(struct profile *p, uint64_t key, const char *file, bool is_main)
{
	uint32_t id = 0;

	assert_int_equal(profile_mapping(p, &(struct prof_mapping_in){
		.key = key, .start = key << 24, .limit = (key + 1) << 24, .filename = file,
		.is_main = is_main }, &id), 0);
	assert_true(id != 0);
	return id;
}

static uint32_t add_loc(struct profile *p, uint32_t map, uint64_t addr, const char *fn, const char *file,
			int64_t start_line, bool symbolized)
{
	struct prof_frame f = { .function = fn, .file = file, .line = file ? 10 : 0, .start_line = start_line };
	uint32_t id = 0;

	assert_int_equal(profile_add_location(p, map, addr, &f, 1, symbolized, &id), 0);
	assert_true(id != 0);
	return id;
}

static void test_intern_identity(void **state)
{
	struct profile *p = profile_new();
	struct profile_stats st;
	uint32_t m1, m2, id, l1, l2, l3, l4, ls1, ls2, ls3, ls4;

	(void)state;
	assert_non_null(p);
	/* Mappings: by key; other fields of a repeated key are ignored. */
	m1 = add_map(p, 1, "/bin/a", true);
	m2 = add_map(p, 2, "/bin/b", false);
	assert_int_not_equal(m1, m2);
	assert_int_equal(add_map(p, 1, "/bin/other", false), m1);

	/* Locations: by (mapping, address). */
	assert_int_equal(profile_find_location(p, m1, 0x10), 0);
	l1 = add_loc(p, m1, 0x10, "f", "a.c", 1, true);
	assert_int_equal(profile_find_location(p, m1, 0x10), l1);
	assert_int_equal(add_loc(p, m1, 0x10, "ignored", NULL, 0, false), l1);
	l2 = add_loc(p, m2, 0x10, "f", "a.c", 1, true);
	l3 = add_loc(p, m1, 0x11, "f", "a.c", 1, true);
	assert_int_not_equal(l1, l2);
	assert_int_not_equal(l1, l3);
	assert_int_not_equal(l2, l3);
	assert_int_equal(profile_find_location(p, m2, 0x10), l2);
	assert_int_equal(profile_find_location(p, m2, 0x11), 0);
	/* Same function name, other start_line: another function. */
	l4 = add_loc(p, m1, 0x12, "f", "a.c", 2, true);

	profile_get_stats(p, &st);
	assert_int_equal(st.mappings, 2);
	assert_int_equal(st.locations, 4);
	assert_int_equal(st.functions, 2);
	/* "/bin/a", "/bin/b", "f", "a.c": each string once. */
	assert_int_equal(st.strings, 4);

	/* Label sets: order does not matter, values do. */
	assert_int_equal(profile_labelset(p, (struct prof_label_in[]){
		{ .key = "process_name", .str = "x" }, { .key = "pid", .num = 1 } }, 2, &ls1), 0);
	assert_int_equal(profile_labelset(p, (struct prof_label_in[]){
		{ .key = "pid", .num = 1 }, { .key = "process_name", .str = "x" } }, 2, &ls2), 0);
	assert_int_equal(ls1, ls2);
	assert_int_equal(profile_labelset(p, (struct prof_label_in[]){
		{ .key = "pid", .num = 2 }, { .key = "process_name", .str = "x" } }, 2, &ls3), 0);
	assert_int_not_equal(ls1, ls3);
	assert_int_equal(profile_labelset(p, (struct prof_label_in[]){
		{ .key = "pid", .num = 1, .num_unit = "id" }, { .key = "process_name", .str = "x" } }, 2, &ls4), 0);
	assert_int_not_equal(ls1, ls4);
	assert_int_not_equal(ls3, ls4);

	/* Stacks: one count per (label set, stack). */
	assert_int_equal(profile_add_sample(p, ls1, (uint32_t[]){ l1, l3 }, 2, 1), 0);
	assert_int_equal(profile_add_sample(p, ls2, (uint32_t[]){ l1, l3 }, 2, 1), 0);
	profile_get_stats(p, &st);
	assert_int_equal(st.stacks, 1);
	assert_int_equal(profile_add_sample(p, ls3, (uint32_t[]){ l1, l3 }, 2, 1), 0);
	assert_int_equal(profile_add_sample(p, ls1, (uint32_t[]){ l3, l1 }, 2, 1), 0);
	assert_int_equal(profile_add_sample(p, ls1, (uint32_t[]){ l1 }, 1, 1), 0);
	assert_int_equal(profile_add_sample(p, ls1, (uint32_t[]){ l1, l3, l4 }, 3, 1), 0);
	assert_int_equal(profile_add_sample(p, 0, (uint32_t[]){ l1, l3 }, 2, 1), 0);
	profile_get_stats(p, &st);
	assert_int_equal(st.stacks, 6);
	assert_int_equal(st.samples, 7);
	assert_int_equal(st.labelsets, 3);

	/* Bad arguments are refused and change nothing. */
	assert_int_equal(profile_add_sample(p, ls1, (uint32_t[]){ l1, 0 }, 2, 1), -EINVAL);
	assert_int_equal(profile_add_sample(p, ls1, (uint32_t[]){ 99 }, 1, 1), -EINVAL);
	assert_int_equal(profile_add_sample(p, 99, (uint32_t[]){ l1 }, 1, 1), -EINVAL);
	assert_int_equal(profile_add_sample(p, ls1, (uint32_t[]){ l1 }, 1, -1), -EINVAL);
	assert_int_equal(profile_add_location(p, 77, 0x10, &(struct prof_frame){ .function = "f" }, 1, true, &id),
			 -EINVAL);
	assert_int_equal(profile_labelset(p, (struct prof_label_in[]){ { .str = "x" } }, 1, &id), -EINVAL);
	assert_int_equal(profile_add_comment(p, NULL), -EINVAL);
	{
		struct profile_stats st2;

		profile_get_stats(p, &st2);
		assert_int_equal(st2.stacks, st.stacks);
		assert_int_equal(st2.samples, st.samples);
		assert_int_equal(st2.locations, st.locations);
		assert_int_equal(st2.labelsets, st.labelsets);
	}
	profile_free(p);
}

#define MANY 100000u

/* 100k distinct locations, label sets and stacks survive every table growth. */
static void test_intern_many(void **state)
{
	struct profile *p = profile_new();
	struct profile_stats st;
	uint32_t m, *locs = calloc(MANY + 1, sizeof(*locs));
	char name[32];

	(void)state;
	assert_non_null(p);
	assert_non_null(locs);
	m = add_map(p, 1, "/bin/many", true);
	for (uint32_t i = 1; i <= MANY; i++) {
		snprintf(name, sizeof(name), "fn_%u", i);
		locs[i] = add_loc(p, m, 0x1000 + i, name, "many.c", 0, true);
		assert_int_equal(locs[i], i); /* dense ids */
	}
	for (uint32_t i = 1; i <= MANY; i++) {
		assert_int_equal(profile_find_location(p, m, 0x1000 + i), locs[i]);
		assert_int_equal(add_loc(p, m, 0x1000 + i, "other", NULL, 0, false), locs[i]);
	}
	for (int round = 0; round < 2; round++) {
		for (uint32_t i = 1; i <= MANY; i++) {
			uint32_t stack[2] = { locs[i], locs[(uint32_t)((i * 7ull) % MANY) + 1] };
			uint32_t ls, ls_again;

			assert_int_equal(profile_labelset(p, (struct prof_label_in[]){
				{ .key = "pid", .num = i % 1000 } }, 1, &ls), 0);
			assert_int_equal(profile_labelset(p, (struct prof_label_in[]){
				{ .key = "pid", .num = i % 1000 } }, 1, &ls_again), 0);
			assert_int_equal(ls, ls_again);
			assert_int_equal(profile_add_sample(p, ls, stack, 2, 1), 0);
		}
	}
	profile_get_stats(p, &st);
	assert_int_equal(st.locations, MANY);
	assert_int_equal(st.functions, MANY);
	assert_int_equal(st.strings, MANY + 3); /* fn_*, "/bin/many", "many.c", "pid" */
	assert_int_equal(st.labelsets, 1000);
	assert_int_equal(st.stacks, MANY);
	assert_int_equal(st.samples, 2 * MANY);
	assert_int_equal(st.frames, 4 * MANY);
	assert_int_equal(st.frames_symbolized, 4 * MANY);
	free(locs);
	profile_free(p);
}

/* Bytes the allocator has handed out and not had back: glibc's count, or ASan's
 * when the test runs under it (its allocator replaces glibc's). */
static size_t heap_in_use(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return __sanitizer_get_current_allocated_bytes();
#else
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
#endif
}

/* Memory follows distinct stacks, never the number of samples: measured by the
 * allocator, not by the profile's own account of itself (which it also checks). */
static void test_memory_bounded(void **state)
{
	struct profile *p = profile_new();
	struct profile_stats st0, st1;
	uint32_t m, stack[64], ls;
	size_t heap0, heap1;

	(void)state;
	assert_non_null(p);
	m = add_map(p, 1, "/bin/mem", true);
	for (uint32_t i = 0; i < 64; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%u", i);
		stack[i] = add_loc(p, m, 0x100 + i, name, "m.c", 0, i % 2);
	}
	assert_int_equal(profile_labelset(p, (struct prof_label_in[]){ { .key = "process_name", .str = "m" } }, 1, &ls), 0);
	assert_int_equal(profile_add_sample(p, ls, stack, 64, 1), 0);
	profile_get_stats(p, &st0);
	heap0 = heap_in_use();
	for (int i = 1; i < 1000000; i++)
		assert_int_equal(profile_add_sample(p, ls, stack, 64, 1), 0);
	heap1 = heap_in_use();
	profile_get_stats(p, &st1);
	assert_int_equal(st1.samples, 1000000);
	assert_int_equal(st1.stacks, 1);
	assert_int_equal(st1.frames, 64000000ull);
	assert_int_equal(st1.frames_symbolized, 32000000ull);
	/* A million samples of one stack: not one byte more from the allocator. A leak of
	 * a single byte per sample would show as a megabyte here. */
	if (heap1 != heap0)
		fail_msg("the heap grew by %zd bytes over 999999 samples of one stack", (ssize_t)(heap1 - heap0));
	assert_int_equal(st1.mem_bytes, st0.mem_bytes);

	/* Distinct stacks do cost memory, and the profile's account of it (what the agent
	 * reports as prowl_memory_bytes) is within a factor of two of the allocator's. */
	for (uint32_t i = 0; i < 20000; i++) {
		uint32_t s[3] = { stack[i % 64], stack[(i / 64) % 64], stack[(i / 4096) % 64] };

		assert_int_equal(profile_add_sample(p, ls, s, 3, 1), 0);
	}
	profile_get_stats(p, &st1);
	assert_int_equal(st1.stacks, 20001);
	heap1 = heap_in_use();
	assert_true(heap1 > heap0 + 20000 * 3 * sizeof(uint32_t));
	if (st1.mem_bytes - st0.mem_bytes < (heap1 - heap0) / 2 || st1.mem_bytes - st0.mem_bytes > (heap1 - heap0) * 2)
		fail_msg("the profile says it grew by %zu bytes, the allocator says %zu", st1.mem_bytes - st0.mem_bytes,
			 heap1 - heap0);
	profile_free(p);
}

static void test_reset(void **state)
{
	struct profile *p = profile_new();
	struct profile_stats st, st2;
	struct prof_top_entry top[4];
	uint32_t m, l;

	(void)state;
	assert_non_null(p);
	for (int round = 0; round < 3; round++) {
		m = add_map(p, 5, "/bin/r", true);
		assert_int_equal(m, 1);
		l = add_loc(p, m, 0x10, "r", "r.c", 0, true);
		assert_int_equal(l, 1);
		assert_int_equal(profile_add_sample(p, 0, &l, 1, 3), 0);
		assert_int_equal(profile_add_comment(p, "c"), 0);
		profile_get_stats(p, &st);
		assert_int_equal(st.samples, 3);
		assert_int_equal(st.stacks, 1);
		if (round)
			assert_int_equal(st.mem_bytes, st2.mem_bytes); /* capacity reused */
		st2 = st;
		profile_reset(p);
		profile_get_stats(p, &st);
		assert_int_equal(st.samples, 0);
		assert_int_equal(st.stacks, 0);
		assert_int_equal(st.locations, 0);
		assert_int_equal(st.strings, 0);
		assert_int_equal(st.mappings, 0);
		assert_int_equal(st.frames, 0);
		assert_int_equal(profile_find_location(p, 1, 0x10), 0);
		assert_int_equal(profile_top(p, false, top, 4), 0);
	}
	profile_free(p);
}

/* A hand-computed profile with recursion, an inlined frame, a function name
 * in two files and a function with two ids (other start_line). */
static struct profile *top_profile(void)
{
	struct profile *p = profile_new();
	uint32_t m, lmain, la1, la2, lb, lother, lk, ls1, ls2;
	struct prof_frame bc[2] = {
		{ .function = "c", .file = "b.c", .line = 5 },
		{ .function = "b", .file = "b.c", .line = 9 },
	};

	assert_non_null(p);
	m = add_map(p, 1, "/bin/top", true);
	lmain = add_loc(p, m, 0x10, "main", "m.c", 0, true);
	la1 = add_loc(p, m, 0x20, "a", "a.c", 0, true);
	la2 = add_loc(p, m, 0x21, "a", "a.c", 7, true);
	assert_int_equal(profile_add_location(p, m, 0x30, bc, 2, true, &lb), 0);
	lother = add_loc(p, m, 0x40, "a", "other.c", 0, false);
	add_loc(p, m, 0x50, "unused", "u.c", 0, true);
	assert_int_equal(profile_labelset(p, (struct prof_label_in[]){ { .key = "pid", .num = 1 } }, 1, &ls1), 0);
	assert_int_equal(profile_labelset(p, (struct prof_label_in[]){ { .key = "pid", .num = 2 } }, 1, &ls2), 0);

	/* leaf first */
	assert_int_equal(profile_add_sample(p, ls1, (uint32_t[]){ la1, la2, la1, lmain }, 4, 4), 0);
	assert_int_equal(profile_add_sample(p, ls2, (uint32_t[]){ la1, la2, la1, lmain }, 4, 1), 0);
	assert_int_equal(profile_add_sample(p, ls1, (uint32_t[]){ lb, la1, lmain }, 3, 3), 0);
	/* The same label set and stack twice: one stack of count 2. */
	assert_int_equal(profile_add_sample(p, ls1, (uint32_t[]){ lmain }, 1, 1), 0);
	assert_int_equal(profile_add_sample(p, ls1, (uint32_t[]){ lmain }, 1, 1), 0);
	assert_int_equal(profile_add_sample(p, ls2, (uint32_t[]){ lother, lb, lmain }, 3, 1), 0);
	/* A frame without a source file, e.g. a kernel function. */
	lk = add_loc(p, m, 0x60, "k", NULL, 0, true);
	assert_int_equal(profile_add_sample(p, ls2, (uint32_t[]){ lk }, 1, 1), 0);
	return p;
}

static void assert_top(const struct prof_top_entry *e, const char *fn, const char *file, int64_t self, int64_t total)
{
	assert_string_equal(e->function, fn);
	if (file)
		assert_string_equal(e->file, file);
	else
		assert_null(e->file);
	assert_int_equal(e->self, self);
	assert_int_equal(e->total, total);
}

static void test_top(void **state)
{
	struct profile *p = top_profile();
	struct prof_top_entry top[10];

	(void)state;
	/* self: a@a.c 4+1, c 3 (inlined innermost of the leaf), main 2, a@other.c 1, b 0.
	 * total: main 11; a@a.c 4+1+3 = 8 (once per stack despite recursion);
	 * b and c 3+1 = 4; a@other.c 1; k (no file) 1 and 1; "unused" is in no
	 * sample. Full ties are broken by name. */
	assert_int_equal(profile_top(p, false, top, 10), 6);
	assert_top(&top[0], "a", "a.c", 5, 8);
	assert_top(&top[1], "c", "b.c", 3, 4);
	assert_top(&top[2], "main", "m.c", 2, 11);
	assert_top(&top[3], "a", "other.c", 1, 1);
	assert_top(&top[4], "k", NULL, 1, 1);
	assert_top(&top[5], "b", "b.c", 0, 4);

	assert_int_equal(profile_top(p, true, top, 10), 6);
	assert_top(&top[0], "main", "m.c", 2, 11);
	assert_top(&top[1], "a", "a.c", 5, 8);
	assert_top(&top[2], "c", "b.c", 3, 4); /* ties on total broken by self */
	assert_top(&top[3], "b", "b.c", 0, 4);
	assert_top(&top[4], "a", "other.c", 1, 1);
	assert_top(&top[5], "k", NULL, 1, 1);

	memset(top, 0, sizeof(top));
	assert_int_equal(profile_top(p, true, top, 2), 2);
	assert_top(&top[1], "a", "a.c", 5, 8);
	assert_null(top[2].function);
	assert_int_equal(profile_top(p, true, top, 0), 0);
	assert_int_equal(profile_top(p, true, NULL, 3), -EINVAL);
	profile_free(p);
}

static void test_stats(void **state)
{
	struct profile *p = top_profile();
	struct profile_stats st;

	(void)state;
	profile_get_stats(p, &st);
	assert_int_equal(st.samples, 12);
	assert_int_equal(st.stacks, 6);
	assert_int_equal(st.locations, 7);
	assert_int_equal(st.functions, 8); /* main, a, a (line 7), c, b, a@other.c, unused, k */
	assert_int_equal(st.mappings, 1);
	assert_int_equal(st.labelsets, 2);
	/* frames: 4*4 + 4*1 + 3*3 + 1*2 + 3*1 + 1*1 = 35, one per location (the
	 * inlined location counts once); the unsymbolized a@other.c is in 1 sample. */
	assert_int_equal(st.frames, 35);
	assert_int_equal(st.frames_symbolized, 34);
	assert_true(st.mem_bytes > 0);
	profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_intern_identity),
		cmocka_unit_test(test_intern_many),
		cmocka_unit_test(test_memory_bounded),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_top),
		cmocka_unit_test(test_stats),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
