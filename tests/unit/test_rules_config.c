/* test_rules_config.c: the recording rules' loader names every problem of a file in
 * one run (capped), and rule regexes read RE2 escapes as relabel_configs do. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "aggregate.h"
#include "analyse/rules.h"
#include "labels/relabel.h"
#include "testutil.h"

#define PERIOD_NS 10000000 /* 10 ms: a sample is 0.01 s */

static const char *const series_labels[] = { "service_name", "host_name", "env" };

/* rules_config_parse, then rules_config_check (as the agent's loader does: the
 * check runs after a parse that found problems, and fails on them). */
static int load(const char *yaml, struct recording_rules_config *c)
{
	yaml_parser_t p;
	yaml_document_t d;
	yaml_node_t *root;
	int r = -EINVAL;

	*c = (struct recording_rules_config){};
	assert_true(yaml_parser_initialize(&p));
	yaml_parser_set_input_string(&p, (const unsigned char *)yaml, strlen(yaml));
	assert_true(yaml_parser_load(&p, &d));
	root = yaml_document_get_root_node(&d);
	assert_non_null(root);
	r = rules_config_parse("t.yaml", &d, yaml_document_get_node(&d, root->data.mapping.pairs.start->value), c);
	if (r == 0)
		r = rules_config_check("t.yaml", c, series_labels, 3);
	yaml_document_delete(&d);
	yaml_parser_delete(&p);
	return r;
}

/* load() with stderr captured; returns what was printed (malloc'ed). */
static char *load_output(const char *yaml, int want)
{
	struct recording_rules_config c;
	char *out;
	int r;

	capture_begin();
	r = load(yaml, &c);
	out = capture_end();
	assert_int_equal(r, want);
	rules_config_free(&c);
	return out;
}

static void test_every_problem_in_one_run(void **state)
{
	/* Two problems of form in rule 1, an unknown key and a bad boolean in rule 3,
	 * then those against the labels and the other rules. */
	char *out = load_output("recording_rules:\n"
				"  - metric: a_total\n"           /* 2 */
				"    group_by: [service_name]\n"
				"  - metric: gc_seconds\n"        /* 4 */
				"    function: 'gc(('\n"          /* 5 */
				"    group_by: [pods]\n"          /* 6 */
				"  - metric: a_total\n"           /* 7 */
				"    group_by: [host_name]\n"
				"  - metric: b_total\n"
				"    colour: red\n"               /* 10 */
				"    self: maybe\n"               /* 11 */
				"    match: {team: x}\n",         /* 12 */
				-EINVAL);
	static const char *const want[] = {
		"prowl: error: t.yaml:4: recording_rules[1].metric: bad metric name 'gc_seconds': ",
		"prowl: error: t.yaml:5: recording_rules[1].function: bad regex 'gc((': ",
		"prowl: error: t.yaml:10: recording_rules[3]: unknown key 'colour' ",
		"prowl: error: t.yaml:11: recording_rules[3].self: invalid boolean 'maybe'",
		"prowl: error: t.yaml:6: recording_rules[1].group_by: unknown label 'pods' "
		"(known: service_name, host_name, env, function)",
		"prowl: error: t.yaml:7: recording_rules[2].metric: metric 'a_total' is also recorded at line 2 ",
		"prowl: error: t.yaml:12: recording_rules[3].match.team: unknown label 'team'",
	};
	char *line = out;

	(void)state;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		char *end = strchr(line, '\n');

		assert_non_null(end);
		if (strncmp(line, want[i], strlen(want[i])) != 0)
			fail_msg("line %zu: %.*s\nwant: %s", i + 1, (int)(end - line), line, want[i]);
		line = end + 1;
	}
	assert_string_equal(line, ""); /* nothing else: one line per problem */
	free(out);
}

static void test_problems_are_capped(void **state)
{
	char yaml[8192] = "recording_rules:\n", *out;
	int n = 0;

	(void)state;
	for (int i = 0; i < 2 * RULES_MAX_PROBLEMS; i++)
		snprintf(yaml + strlen(yaml), sizeof(yaml) - strlen(yaml), "  - metric: bad%d\n", i);
	out = load_output(yaml, -EINVAL);
	for (char *p = out; (p = strstr(p, "bad metric name")); p++)
		n++;
	assert_int_equal(n, RULES_MAX_PROBLEMS);
	assert_non_null(strstr(out, "t.yaml: recording_rules: more than 20 problems, the first 20 shown: fix them "
				    "and run --check again\n"));
	free(out);
	/* A file with exactly the cap: every problem shown, no "more" line. */
	yaml[strlen("recording_rules:\n")] = 0;
	for (int i = 0; i < RULES_MAX_PROBLEMS; i++)
		snprintf(yaml + strlen(yaml), sizeof(yaml) - strlen(yaml), "  - metric: bad%d\n", i);
	out = load_output(yaml, -EINVAL);
	assert_null(strstr(out, "more than"));
	free(out);
}

/* Seconds one rule counted over samples [worker7, main] x 3, [workerd, main] x 2
 * and [worker_x, main] x 1 of one series (service_name=svc). */
static double count(const char *function)
{
	char yaml[256];
	struct recording_rules_config c;
	struct series_label lb[] = { { "service_name", "svc" }, { "host_name", "h" } };
	struct rules_opts o = { .series_labels = series_labels, .nseries_labels = 3 };
	struct profile *p = profile_new();
	struct export_series s = { .labels = lb, .nlabels = 2, .prof = p };
	struct export_batch b = { .series = &s, .nseries = 1, .period_ns = PERIOD_NS };
	const char *names[] = { "main", "worker7", "workerd", "worker_x" };
	uint32_t map = 0, loc[4];
	struct rules *e = NULL;
	double v;

	assert_non_null(p);
	profile_set_period(p, PERIOD_NS);
	assert_int_equal(profile_mapping(p, &(struct prof_mapping_in){ .key = 1, .limit = 1ull << 40, .filename = "/w" },
					 &map), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(profile_add_location(p, map, 0x100u * (i + 1), &(struct prof_frame){ .function = names[i] }, 1,
						      true, &loc[i]), 0);
	for (int i = 1; i < 4; i++)
		assert_int_equal(profile_add_sample(p, 0, (uint32_t[]){ loc[i], loc[0] }, 2, 4 - i), 0);
	snprintf(yaml, sizeof(yaml), "recording_rules:\n  - metric: t_total\n    function: '%s'\n", function);
	assert_int_equal(load(yaml, &c), 0);
	assert_int_equal(rules_new(&c, &o, &e), 0);
	rules_config_free(&c);
	assert_int_equal(rules_count(e, &b), 0);
	v = rules_value(e, "t_total", NULL, 0);
	rules_free(e);
	profile_free(p);
	return v;
}

/* What relabel_configs' regex (anchored) says of s. */
static bool relabel_matches(const char *re, const char *s)
{
	char err[256];
	regex_t rx;
	bool m;

	assert_int_equal(relabel_regex_compile(re, &rx, err, sizeof(err)), 0);
	m = regexec(&rx, s, 0, NULL, 0) == 0;
	regfree(&rx);
	return m;
}

static void test_re2_escapes_as_in_relabel(void **state)
{
	(void)state;
	/* \d is a digit, in a rule as in relabel_configs: not a literal d. */
	assert_true(count("^worker\\d$") > 0.03 - 1e-9 && count("^worker\\d$") < 0.03 + 1e-9);
	assert_true(relabel_matches("worker\\d", "worker7") && !relabel_matches("worker\\d", "workerd"));
	/* \D and [\d] likewise; \w is a word character (glibc's own). */
	assert_true(count("^worker\\D$") > 0.02 - 1e-9 && count("^worker\\D$") < 0.02 + 1e-9);
	assert_true(count("^worker[\\d_]") > 0.04 - 1e-9 && count("^worker[\\d_]") < 0.04 + 1e-9);
	assert_true(relabel_matches("worker[\\d_]x?", "worker_x") && !relabel_matches("worker[\\d_]", "workerd"));
	assert_true(count("^worker\\w$") > 0.05 - 1e-9 && count("^worker\\w$") < 0.05 + 1e-9);
}

static void test_unknown_escapes_refused(void **state)
{
	static const char *const bad[] = { "'x\\q'", "'\\pL'", "'a*?'", "'(?i)gc'", "'[\\q]'" };
	char yaml[256], err[256];
	regex_t rx;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *out, re[16];

		snprintf(yaml, sizeof(yaml), "recording_rules:\n  - metric: t_total\n    function: %s\n", bad[i]);
		out = load_output(yaml, -EINVAL);
		assert_non_null(strstr(out, "t.yaml:3: recording_rules[0].function: bad regex "));
		assert_non_null(strstr(out, "RE2 syntax POSIX ERE does not have"));
		assert_ptr_equal(strchr(out, '\n'), out + strlen(out) - 1); /* one line */
		if (i < 2 || i == 4)
			assert_non_null(strstr(out, "instead, e.g. "));
		free(out);
		/* The same words from relabel_configs: one translation for both. */
		snprintf(re, sizeof(re), "%.*s", (int)strlen(bad[i]) - 2, bad[i] + 1);
		assert_int_equal(relabel_regex_compile(re, &rx, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "RE2 syntax POSIX ERE does not have"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_problem_in_one_run),
		cmocka_unit_test(test_problems_are_capped),
		cmocka_unit_test(test_re2_escapes_as_in_relabel),
		cmocka_unit_test(test_unknown_escapes_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
