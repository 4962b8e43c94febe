/* test_ureasons.c: the unwind reasons' one table (bpf/prowl.h PROWL_UREASONS) gives
 * the same /metrics labels, counters and marker texts as the tables it replaced. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "array_size.h"
#include "prowl.h"

/* Each reason's counter gets its own value, so a label read from the wrong counter
 * shows: the lines must be these, in this order (the labels operators alert on). */
static void test_metrics_labels_and_counters(void **state)
{
	static const char *const want[] = {
		"prowl_unwind_truncated_total{reason=\"depth\"} 101",
		"prowl_unwind_truncated_total{reason=\"no_table\"} 102",
		"prowl_unwind_truncated_total{reason=\"no_mapping\"} 103",
		"prowl_unwind_truncated_total{reason=\"unreadable\"} 104",
		"prowl_unwind_truncated_total{reason=\"bad_cfi\"} 105",
		"prowl_unwind_truncated_total{reason=\"no_fde\"} 106",
		"prowl_unwind_truncated_total{reason=\"new_process\"} 107",
		"prowl_unwind_truncated_total{reason=\"no_registers\"} 108",
		"prowl_unwind_truncated_total{reason=\"java\"} 109",
		"prowl_unwind_truncated_total{reason=\"v8\"} 110",
	};
	struct agent_snapshot *s = calloc(1, sizeof(*s));
	char *buf = NULL, *at;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_non_null(s);
	assert_non_null(f);
	pthread_mutex_init(&s->lock, NULL);
	s->has_unwind = true;
	for (unsigned int r = PROWL_UR_NONE + 1; r < PROWL_UR__MAX; r++)
		s->bpf.v[PROWL_CNT_UNWIND_TRUNC_OF(r)] = 100 + r;
	agent_metrics_render(s, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(PROWL_UR__MAX - 1, ARRAY_SIZE(want));
	at = buf;
	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		char *line = strstr(at, want[i]);

		if (!line)
			fail_msg("/metrics lacks (or misorders) `%s`:\n%s", want[i], buf);
		at = line + strlen(want[i]);
		assert_true(*at == '\n');
	}
	assert_int_equal(PROWL_CNT_UNWIND_TRUNC_LAST, PROWL_CNT_UNWIND_TRUNC_OF(PROWL_UR__MAX - 1));
	free(buf);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* The marker frames, as docs/unwinding.md lists them; the depth one from the constant. */
static void test_marker_texts(void **state)
{
	char buf[200], depth[80];

	(void)state;
	snprintf(depth, sizeof(depth), "[truncated: user stack deeper than %d frames]", PROWL_MAX_STACK);
	assert_string_equal(prowl_ureason_text(PROWL_UR_DEPTH)->marker, depth);
	assert_string_equal(depth, "[truncated: user stack deeper than 127 frames]");
	assert_false(prowl_ureason_text(PROWL_UR_DEPTH)->names_object);

	snprintf(buf, sizeof(buf), prowl_ureason_text(PROWL_UR_NO_TABLE)->marker, "libfoo.so");
	assert_string_equal(buf, "[truncated: no unwind table for libfoo.so]");
	snprintf(buf, sizeof(buf), prowl_ureason_text(PROWL_UR_BAD_CFI)->marker, "libfoo.so");
	assert_string_equal(buf, "[truncated: unwind rule prowl cannot follow in libfoo.so]");
	snprintf(buf, sizeof(buf), prowl_ureason_text(PROWL_UR_NO_FDE)->marker, "libfoo.so");
	assert_string_equal(buf, "[truncated: no unwind info for code in libfoo.so]");
	assert_string_equal(prowl_ureason_text(PROWL_UR_NO_MAPPING)->marker,
			    "[truncated: return address in no known mapping]");
	assert_string_equal(prowl_ureason_text(PROWL_UR_READ)->marker, "[truncated: unreadable stack]");
	assert_string_equal(prowl_ureason_text(PROWL_UR_NEW_PROC)->marker,
			    "[truncated: frame pointers only, process not loaded by the unwinder yet]");
	assert_string_equal(prowl_ureason_text(PROWL_UR_NO_REGS)->marker,
			    "[truncated: frame pointers only, user registers not found in the kernel]");
	assert_string_equal(prowl_ureason_text(PROWL_UR_V8)->marker, "[truncated: V8 frame prowl cannot follow]");
	/* A marker with a %s names the object, and only those. */
	for (unsigned int r = PROWL_UR_NONE + 1; r < PROWL_UR__MAX; r++)
		assert_int_equal(!!strstr(prowl_ureason_text(r)->marker, "%s"), prowl_ureason_text(r)->names_object);
	assert_null(prowl_ureason_text(PROWL_UR_NONE));
	assert_null(prowl_ureason_text(PROWL_UR__MAX));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metrics_labels_and_counters),
		cmocka_unit_test(test_marker_texts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
