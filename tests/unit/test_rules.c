/* test_rules.c: unit tests of the recording rules: matchers, total and self, group_by,
 * one count per rule per sample, overflow, idle label sets freed, windows, reload, rendering,
 * the `.*` a regex loses, the evaluation budget and the bounded function cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "aggregate.h"
#include "analyse/rules.h"
#include "analyse/rules_priv.h"

#define PERIOD_NS 10000000 /* 10 ms: a sample is 0.01 s */

static const char *const series_labels[] = { "service_name", "host_name", "env" };
/* The series labels rules may name: series_labels unless a test sets others. */
static const char *const *known = series_labels;
static size_t nknown = 3;

/* Parses "recording_rules:" YAML text; returns rules_config_parse's result, and
 * rules_config_check's when parsing succeeded. */
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
	assert_int_equal(root->type, YAML_MAPPING_NODE);
	for (yaml_node_pair_t *kv = root->data.mapping.pairs.start; kv < root->data.mapping.pairs.top; kv++) {
		yaml_node_t *k = yaml_document_get_node(&d, kv->key);

		if (strcmp((const char *)k->data.scalar.value, "recording_rules") == 0)
			r = rules_config_parse("test.yaml", &d, yaml_document_get_node(&d, kv->value), c);
	}
	if (r == 0)
		r = rules_config_check("test.yaml", c, known, nknown);
	yaml_document_delete(&d);
	yaml_parser_delete(&p);
	return r;
}

static struct rules *engine(const char *yaml, uint32_t max_series)
{
	struct recording_rules_config c;
	struct rules_opts o = { .series_labels = known, .nseries_labels = nknown, .max_series = max_series };
	struct rules *e = NULL;

	assert_int_equal(load(yaml, &c), 0);
	assert_int_equal(rules_new(&c, &o, &e), 0);
	rules_config_free(&c);
	return e;
}

/* A location whose frames are given innermost first, e.g. {"mix", "hot_a"}. */
static uint32_t loc(struct profile *p, uint64_t addr, const char *const *fns, size_t n)
{
	struct prof_frame f[4] = {};
	uint32_t map = 0, id = 0;

	assert_true(n <= 4);
	assert_int_equal(profile_mapping(p, &(struct prof_mapping_in){ .key = 1, .start = 0, .limit = 1ull << 40,
								       .filename = "/bin/w", .is_main = true }, &map), 0);
	for (size_t i = 0; i < n; i++)
		f[i].function = fns[i];
	assert_int_equal(profile_add_location(p, map, addr, f, n, true, &id), 0);
	return id;
}

#define LOC(p, addr, ...) loc(p, addr, (const char *const[]){ __VA_ARGS__ }, \
			      sizeof((const char *const[]){ __VA_ARGS__ }) / sizeof(const char *))

static void sample(struct profile *p, const uint32_t *locs, size_t n, int64_t count)
{
	assert_int_equal(profile_add_sample(p, 0, locs, n, count), 0);
}

struct fixture {
	struct profile *prof[3];
	struct series_label labels[3][3];
	struct export_series series[3];
	struct export_batch b;
};

/* Series 0: checkout (env=prod): 3 x [mix<hot_a, main], 1 x [hot_b, hot_a, main],
 *           2 x [f, f, f, main] (recursion).
 * Series 1: checkout-canary (env=staging): 4 x [hot_b, main].
 * Series 2: batch (no env label): 5 x [g, main]. */
static void fixture_init(struct fixture *x)
{
	static const char *const svc[] = { "checkout", "checkout-canary", "batch" };
	static const char *const env[] = { "prod", "staging", NULL };

	memset(x, 0, sizeof(*x));
	for (int i = 0; i < 3; i++) {
		x->prof[i] = profile_new();
		assert_non_null(x->prof[i]);
		profile_set_period(x->prof[i], PERIOD_NS);
		x->labels[i][0] = (struct series_label){ "service_name", svc[i] };
		x->labels[i][1] = (struct series_label){ "host_name", "h1" };
		x->labels[i][2] = (struct series_label){ "env", env[i] };
		x->series[i] = (struct export_series){ .labels = x->labels[i], .nlabels = env[i] ? 3 : 2,
						       .prof = x->prof[i] };
	}
	{
		struct profile *p = x->prof[0];
		uint32_t m = LOC(p, 0x100, "main"), ha = LOC(p, 0x200, "mix", "hot_a"), hb = LOC(p, 0x300, "hot_b"),
			 ha2 = LOC(p, 0x210, "hot_a"), f1 = LOC(p, 0x400, "f"), f2 = LOC(p, 0x410, "f");

		sample(p, (uint32_t[]){ ha, m }, 2, 3);
		sample(p, (uint32_t[]){ hb, ha2, m }, 3, 1);
		sample(p, (uint32_t[]){ f1, f2, f2, m }, 4, 2);
	}
	{
		struct profile *p = x->prof[1];
		uint32_t m = LOC(p, 0x100, "main"), hb = LOC(p, 0x300, "hot_b");

		sample(p, (uint32_t[]){ hb, m }, 2, 4);
	}
	{
		struct profile *p = x->prof[2];
		uint32_t m = LOC(p, 0x100, "main"), g = LOC(p, 0x500, "g");

		sample(p, (uint32_t[]){ g, m }, 2, 5);
	}
	x->b = (struct export_batch){ .series = x->series, .nseries = 3, .period_ns = PERIOD_NS };
}

static void fixture_free(struct fixture *x)
{
	for (int i = 0; i < 3; i++)
		profile_free(x->prof[i]);
}

#define V(...) (const char *const[]){ __VA_ARGS__ }, sizeof((const char *const[]){ __VA_ARGS__ }) / sizeof(char *)
#define V0 NULL, 0

static void assert_seconds(struct rules *e, const char *metric, const char *const *v, size_t n, double want)
{
	double got = rules_value(e, metric, v, n);

	if (got < want - 1e-9 || got > want + 1e-9)
		fail_msg("%s: %.6f, want %.6f", metric, got, want);
}

static void test_total_and_builtin(void **state)
{
	struct fixture x;
	struct rules *e = engine("recording_rules:\n"
				 "  - metric: checkout_cpu_seconds_total\n"
				 "    match: {service_name: checkout}\n", 0);

	(void)state;
	fixture_init(&x);
	assert_int_equal(rules_count(e, &x.b), 0);
	/* Without a function, a rule counts the series' whole CPU: 3 + 1 + 2 samples. */
	assert_seconds(e, "checkout_cpu_seconds_total", V0, 0.06);
	/* The built-in counter: every series under all of its labels. */
	assert_seconds(e, RULES_BUILTIN_METRIC, V("checkout", "h1", "prod"), 0.06);
	assert_seconds(e, RULES_BUILTIN_METRIC, V("checkout-canary", "h1", "staging"), 0.04);
	assert_seconds(e, RULES_BUILTIN_METRIC, V("batch", "h1", ""), 0.05);
	rules_free(e);
	fixture_free(&x);
}

static void test_function_total_and_self(void **state)
{
	struct fixture x;
	struct rules *e = engine("recording_rules:\n"
				 "  - metric: hot_a_total\n"
				 "    function: '^hot_a$'\n"
				 "  - metric: hot_a_self_total\n"
				 "    function: '^hot_a$'\n"
				 "    self: true\n"
				 "  - metric: mix_self_total\n"
				 "    function: 'mix'\n"
				 "    self: true\n"
				 "  - metric: main_total\n"
				 "    function: '^main$'\n", 0);

	(void)state;
	fixture_init(&x);
	assert_int_equal(rules_count(e, &x.b), 0);
	/* hot_a is on the stack of 3 + 1 samples; it is never the leaf (mix is
	 * inlined into it, hot_b is its callee), so its self time is zero. */
	assert_seconds(e, "hot_a_total", V0, 0.04);
	assert_int_equal(rules_value(e, "hot_a_self_total", NULL, 0), -1);
	assert_seconds(e, "mix_self_total", V0, 0.03);
	/* main is under every sample of every series: 6 + 4 + 5. */
	assert_seconds(e, "main_total", V0, 0.15);
	rules_free(e);
	fixture_free(&x);
}

static void test_count_once_and_nearest_leaf(void **state)
{
	struct fixture x;
	struct rules *e = engine("recording_rules:\n"
				 "  - metric: f_total\n"
				 "    function: '^f$'\n"
				 "    group_by: [function]\n"
				 "  - metric: hot_total\n"
				 "    match: {service_name: checkout}\n"
				 "    function: '^hot_'\n"
				 "    group_by: [function]\n"
				 "  - metric: any_total\n"
				 "    match: {service_name: checkout}\n"
				 "    function: '.'\n", 0);

	(void)state;
	fixture_init(&x);
	assert_int_equal(rules_count(e, &x.b), 0);
	/* f is three frames deep in 2 samples: counted once per sample. */
	assert_seconds(e, "f_total", V("f"), 0.02);
	/* [hot_b, hot_a, main] counts under hot_b, the match nearest the leaf;
	 * [mix<hot_a, main] under hot_a. */
	assert_seconds(e, "hot_total", V("hot_a"), 0.03);
	assert_seconds(e, "hot_total", V("hot_b"), 0.01);
	/* Every frame matches: still once per sample, the series' whole CPU. */
	assert_seconds(e, "any_total", V0, 0.06);
	rules_free(e);
	fixture_free(&x);
}

static void test_group_by_and_shared_metric(void **state)
{
	struct fixture x;
	struct rules *e = engine("recording_rules:\n"
				 "  - metric: by_env_total\n"
				 "    group_by: [env, service_name]\n"
				 "  - metric: one_total\n"
				 "    group_by: []\n"
				 "  - metric: shared_total\n"
				 "    match: {service_name: checkout}\n"
				 "    group_by: [service_name]\n"
				 "  - metric: shared_total\n"
				 "    match: {service_name: batch}\n"
				 "    group_by: [service_name]\n", 0);

	(void)state;
	fixture_init(&x);
	assert_int_equal(rules_count(e, &x.b), 0);
	assert_seconds(e, "by_env_total", V("prod", "checkout"), 0.06);
	assert_seconds(e, "by_env_total", V("staging", "checkout-canary"), 0.04);
	assert_seconds(e, "by_env_total", V("", "batch"), 0.05);
	assert_seconds(e, "one_total", V0, 0.15);
	assert_seconds(e, "shared_total", V("checkout"), 0.06);
	assert_seconds(e, "shared_total", V("batch"), 0.05);
	rules_free(e);
	fixture_free(&x);
}

/* container_id of a pod's series is its resource's container.id: rules match and group
 * by it, the built-in counter keeps to the series labels. Series 0 is a pod's
 * container (resource only), series 1 a container outside pods (label), series 2
 * spans containers (neither). */
static void test_container_id_from_resource(void **state)
{
	static const char *const labels4[] = { "service_name", "host_name", "env", "container_id" };
	struct series_label res0 = { RESOURCE_CONTAINER_ID, "c0" }, other = { "k8s.pod.uid", "u0" };
	struct series_label res_both[2] = { other, res0 };
	struct fixture x;
	struct rules *e;

	(void)state;
	known = labels4;
	nknown = 4;
	e = engine("recording_rules:\n"
		   "  - metric: by_cid_total\n"
		   "    group_by: [service_name, container_id]\n"
		   "  - metric: one_cid_total\n"
		   "    match: {container_id: c0}\n"
		   "    group_by: []\n"
		   "  - metric: no_cid_total\n"
		   "    match: {container_id: \"\"}\n"
		   "    group_by: [service_name]\n", 0);
	fixture_init(&x);
	x.series[0].resource = res_both;
	x.series[0].nresource = 2;
	x.labels[1][2] = (struct series_label){ LABEL_CONTAINER_ID, "c1" };
	assert_int_equal(rules_count(e, &x.b), 0);
	assert_seconds(e, "by_cid_total", V("checkout", "c0"), 0.06);
	assert_seconds(e, "by_cid_total", V("checkout-canary", "c1"), 0.04);
	assert_seconds(e, "by_cid_total", V("batch", ""), 0.05);
	assert_seconds(e, "one_cid_total", V0, 0.06);
	assert_seconds(e, "no_cid_total", V("batch"), 0.05);
	assert_true(rules_value(e, "no_cid_total", V("checkout")) < 0);
	/* The built-in counter: container_id of the series labels only. */
	assert_seconds(e, RULES_BUILTIN_METRIC, V("checkout", "h1", "prod", ""), 0.06);
	assert_seconds(e, RULES_BUILTIN_METRIC, V("checkout-canary", "h1", "", "c1"), 0.04);
	assert_true(rules_value(e, RULES_BUILTIN_METRIC, V("checkout", "h1", "prod", "c0")) < 0);
	rules_free(e);
	fixture_free(&x);
}

/* Back to the three series labels, also after a failed assertion. */
static int known_reset(void **state)
{
	(void)state;
	known = series_labels;
	nknown = 3;
	return 0;
}

static void test_matchers(void **state)
{
	struct fixture x;
	struct rules *e = engine("recording_rules:\n"
				 "  - metric: eq_total\n"
				 "    match: {service_name: checkout, env: prod}\n"
				 "  - metric: re_partial_total\n" /* anchored: "check" is not "checkout" */
				 "    match: {service_name: '=~check'}\n"
				 "  - metric: re_total\n"
				 "    match: {service_name: '=~check.*'}\n"
				 "  - metric: ne_total\n"
				 "    match: {env: '!=prod'}\n"          /* an absent env is not prod */
				 "  - metric: nre_total\n"
				 "    match: {service_name: '!~checkout.*'}\n"
				 "  - metric: absent_total\n"
				 "    match: {env: ''}\n"                /* empty: the label is absent */
				 "  - metric: alt_total\n"
				 "    match: {service_name: '=~batch|checkout'}\n"
				 "  - metric: escaped_total\n"
				 "    match: {service_name: '=!=x'}\n", 0);

	(void)state;
	fixture_init(&x);
	assert_int_equal(rules_count(e, &x.b), 0);
	assert_seconds(e, "eq_total", V0, 0.06);
	assert_int_equal(rules_value(e, "re_partial_total", NULL, 0), -1);
	assert_seconds(e, "re_total", V0, 0.10);
	assert_seconds(e, "ne_total", V0, 0.09);
	assert_seconds(e, "nre_total", V0, 0.05);
	assert_seconds(e, "absent_total", V0, 0.05);
	/* Anchoring wraps the whole alternation, not its first branch. */
	assert_seconds(e, "alt_total", V0, 0.11);
	assert_int_equal(rules_value(e, "escaped_total", NULL, 0), -1);
	rules_free(e);
	fixture_free(&x);
}

/* Without function in group_by, the overflow series is service_name="other" when
 * service_name is grouped on, else every label "other" (configuration.md's
 * limits.recording_series, metrics.md's cardinality guard). */
static void test_overflow_without_function(void **state)
{
	struct fixture x;
	struct rules *e = engine("recording_rules:\n"
				 "  - metric: svc_env_total\n"
				 "    function: '.'\n"
				 "    self: true\n"
				 "    group_by: [service_name, env]\n"
				 "  - metric: env_total\n"
				 "    function: '.'\n"
				 "    self: true\n"
				 "    group_by: [env]\n", 2);

	(void)state;
	fixture_init(&x);
	assert_int_equal(rules_count(e, &x.b), 0);
	/* checkout/prod 6 samples, checkout-canary/staging 4, batch (no env) 5. */
	assert_seconds(e, "svc_env_total", V("checkout", "prod"), 0.06);
	assert_seconds(e, "svc_env_total", V("checkout-canary", "staging"), 0.04);
	assert_seconds(e, "svc_env_total", V("other", ""), 0.05);
	assert_int_equal(rules_value(e, "svc_env_total", V("batch", "")), -1);
	assert_seconds(e, "env_total", V("prod"), 0.06);
	assert_seconds(e, "env_total", V("staging"), 0.04);
	assert_seconds(e, "env_total", V("other"), 0.05);
	rules_free(e);
	fixture_free(&x);
}

static void test_overflow(void **state)
{
	struct fixture x;
	struct rules_stats st;
	struct rules *e = engine("recording_rules:\n"
				 "  - metric: fn_total\n"
				 "    function: '.'\n"
				 "    self: true\n"
				 "    group_by: [function]\n"
				 "  - metric: svc_fn_total\n"
				 "    function: '.'\n"
				 "    self: true\n"
				 "    group_by: [service_name, function]\n", 2);
	double sum = 0;

	(void)state;
	fixture_init(&x);
	assert_int_equal(rules_count(e, &x.b), 0);
	/* Leaves: mix 3, hot_b 1 + 4, f 2, g 5. Two label sets fit; the rest goes
	 * to function="other", and no sample is lost. */
	for (const char *const *fn = (const char *const[]){ "mix", "hot_b", "f", "g", "other", NULL }; *fn; fn++) {
		double v = rules_value(e, "fn_total", &*fn, 1);

		sum += v > 0 ? v : 0;
	}
	assert_true(sum > 0.15 - 1e-9 && sum < 0.15 + 1e-9);
	assert_true(rules_value(e, "fn_total", (const char *const[]){ "other" }, 1) > 0);
	/* svc_fn_total, in series order: (checkout, mix) and (checkout, hot_b) fit;
	 * (checkout, f) and (checkout-canary, hot_b) go to their service's overflow
	 * series, which may reach twice the cap; past that (batch, g) goes to (other, other). */
	assert_seconds(e, "svc_fn_total", V("checkout", "mix"), 0.03);
	assert_seconds(e, "svc_fn_total", V("checkout", "hot_b"), 0.01);
	assert_seconds(e, "svc_fn_total", V("checkout", "other"), 0.02);
	assert_seconds(e, "svc_fn_total", V("checkout-canary", "other"), 0.04);
	assert_seconds(e, "svc_fn_total", V("other", "other"), 0.05);
	assert_int_equal(rules_value(e, "svc_fn_total", V("batch", "other")), -1);
	/* The built-in counter overflows to service_name="other". */
	assert_seconds(e, RULES_BUILTIN_METRIC, V("other", "h1", ""), 0.05);
	rules_get_stats(e, &st);
	assert_int_equal(st.overflow_samples, 7 + 11 + 5);
	/* A second window adds to the same series; nothing new appears. */
	assert_int_equal(rules_count(e, &x.b), 0);
	assert_seconds(e, "svc_fn_total", V("other", "other"), 0.10);
	rules_get_stats(e, &st);
	assert_int_equal(st.series, 3 + 3 + 5); /* builtin, fn_total, svc_fn_total */
	rules_free(e);
	fixture_free(&x);
}

static struct rules *engine_opts(const char *yaml, uint32_t max_series, uint64_t budget_ns)
{
	struct recording_rules_config c;
	struct rules_opts o = { .series_labels = series_labels, .nseries_labels = 3, .max_series = max_series,
				.eval_budget_ns = budget_ns };
	struct rules *e = NULL;

	assert_int_equal(load(yaml, &c), 0);
	assert_int_equal(rules_new(&c, &o, &e), 0);
	rules_config_free(&c);
	return e;
}

static bool rx_match(const char *re, const char *s)
{
	regex_t rx;
	bool m;

	assert_int_equal(regcomp(&rx, re, REG_EXTENDED | REG_NOSUB), 0);
	m = regexec(&rx, s, 0, NULL, 0) == 0;
	regfree(&rx);
	return m;
}

static void test_regex_simplify(void **state)
{
	/* pattern, what it becomes (NULL: kept as written) */
	static const char *const cases[][2] = {
		{ ".*(gc|GC).*", "(gc|GC)" },
		{ ".*gc", "gc" },
		{ "gc.*", "gc" },
		{ "^.*gc.*$", "gc" },
		{ "^.*gc", "gc" },
		{ "^gc.*", "^gc" },
		{ ".*.*gc.*.*", "gc" },
		{ ".*a.*|.*b.*", "a|b" },
		{ ".*runtime\\.gc.*", "runtime\\.gc" },
		{ ".*[[:alpha:]]x.*", "[[:alpha:]]x" },
		{ "gc\\\\.*", "gc\\\\" },
		{ ".*(a|b)\\1.*", "(a|b)\\1" },
		/* kept: the `.*` is not one that can go, or the text is not understood */
		{ ".*", NULL },
		{ "^.*", "^" },
		{ ".*$", "$" },
		{ "^x.*gc", NULL },
		{ ".*?gc", NULL },
		{ ".*+gc", NULL },
		{ ".*{2}gc", NULL },
		{ ".{2}gc", NULL },
		{ "\\.*gc", NULL },
		{ "gc\\.*", NULL },
		{ "[.*]gc", NULL },
		{ "[]a.*]", NULL },
		{ "(.*gc)", NULL },
		{ "x|.*", NULL },
		{ "^gc$", NULL },
		{ "a|b", NULL },
	};
	static const char *const subjects[] = { "", "gc", "xgcx", "GC", "runtime.gc", "runtime_gc", "a", "b", "ab",
						"\n", "x\ngc\n", "\xff" "gc\x80", ".*", "gc\\", "gc.", "aa", "x", "[", "]",
						"*gc", "ggc", "q", "gcgc" };

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = NULL;

		assert_int_equal(rules_regex_simplify(cases[i][0], &got), 0);
		if (!cases[i][1] != !got || (got && strcmp(got, cases[i][1]) != 0))
			fail_msg("'%s' became '%s', want '%s'", cases[i][0], got ? got : "(kept)",
				 cases[i][1] ? cases[i][1] : "(kept)");
		/* Whatever it became matches exactly the same names. */
		for (size_t k = 0; got && k < sizeof(subjects) / sizeof(subjects[0]); k++)
			if (rx_match(got, subjects[k]) != rx_match(cases[i][0], subjects[k]))
				fail_msg("'%s' and '%s' disagree on '%s'", cases[i][0], got, subjects[k]);
		free(got);
	}
}

static void test_simplified_rule_counts_the_same(void **state)
{
	struct fixture x;
	struct rules *e = engine("recording_rules:\n"
				 "  - metric: a_total\n    function: '.*hot_.*'\n    group_by: [function]\n"
				 "  - metric: b_total\n    function: '^.*hot_b.*$'\n", 0);

	(void)state;
	fixture_init(&x);
	assert_int_equal(rules_count(e, &x.b), 0);
	assert_seconds(e, "a_total", V("hot_a"), 0.03);
	assert_seconds(e, "a_total", V("hot_b"), 0.05);
	assert_seconds(e, "b_total", V0, 0.05);
	rules_free(e);
	fixture_free(&x);
}

/* A budget of 1 ns: each window evaluates one new name, the rest wait; the
 * samples that need a name not evaluated yet are deferred, not miscounted; once
 * every name is known a window counts what an unbudgeted engine counts. */
static void test_budget(void **state)
{
	static const char rules[] = "recording_rules:\n"
				    "  - metric: fn_total\n    function: '^(hot_|f$)'\n    group_by: [function]\n"
				    "  - metric: self_total\n    function: 'o'\n    self: true\n";
	struct fixture x;
	struct rules *e = engine_opts(rules, 0, 1), *ref = engine_opts(rules, 0, 0);
	struct rules_stats st;
	uint64_t prev_deferred = 0;
	int w;

	(void)state;
	fixture_init(&x);
	assert_int_equal(rules_count(e, &x.b), 0);
	rules_get_stats(e, &st);
	assert_int_equal(st.names_evaluated, 1);
	assert_true(st.deferred_samples > 0);
	/* Six distinct names (main, mix, hot_a, hot_b, f, g): one a window. */
	for (w = 2; w <= 6; w++) {
		assert_int_equal(rules_count(e, &x.b), 0);
		rules_get_stats(e, &st);
		assert_int_equal(st.names_evaluated, (uint64_t)w);
		assert_true(st.deferred_samples >= prev_deferred);
		prev_deferred = st.deferred_samples;
	}
	/* All known: nothing more is evaluated or deferred, and a window adds what one adds without a budget. */
	{
		double a0 = rules_value(e, "fn_total", V("hot_a")), b0 = rules_value(e, "fn_total", V("hot_b"));
		double f0 = rules_value(e, "fn_total", V("f")), s0 = rules_value(e, "self_total", V0);

		assert_int_equal(rules_count(e, &x.b), 0);
		assert_int_equal(rules_count(ref, &x.b), 0);
		rules_get_stats(e, &st);
		assert_int_equal(st.names_evaluated, 6);
		assert_int_equal(st.deferred_samples, prev_deferred);
		assert_seconds(e, "fn_total", V("hot_a"), (a0 > 0 ? a0 : 0) + rules_value(ref, "fn_total", V("hot_a")));
		assert_seconds(e, "fn_total", V("hot_b"), (b0 > 0 ? b0 : 0) + rules_value(ref, "fn_total", V("hot_b")));
		assert_seconds(e, "fn_total", V("f"), (f0 > 0 ? f0 : 0) + rules_value(ref, "fn_total", V("f")));
		assert_seconds(e, "self_total", V0, (s0 > 0 ? s0 : 0) + rules_value(ref, "self_total", V0));
	}
	/* Counted plus deferred covers every sample each rule would count in 7 windows:
	 * fn_total (hot_a 3, hot_b 5, f 2) and self_total (leaf with an 'o': hot_b 5). */
	{
		double fn = 0, self = rules_value(e, "self_total", V0);
		uint64_t deferred = 0;

		for (const char *const *f = (const char *const[]){ "hot_a", "hot_b", "f", NULL }; *f; f++)
			fn += rules_value(e, "fn_total", f, 1) > 0 ? rules_value(e, "fn_total", f, 1) : 0;
		for (size_t i = 0; i < e->nfams; i++)
			deferred += e->fams[i].ct.deferred_samples;
		assert_int_equal(deferred, st.deferred_samples);
		/* Deferred samples include some that would not have matched (g's): they could not be told. */
		assert_true(fn + self < 7 * 0.15 - 0.05);
		assert_true(fn + self + (double)deferred * 0.01 > 7 * 0.15 - 1e-9);
	}
	rules_free(e);
	rules_free(ref);
	fixture_free(&x);
}

static void test_fcache_bounded_lru(void **state)
{
	struct rules_fcache c;
	uint64_t bits;
	char name[16];

	(void)state;
	rules_fcache_init(&c, 1, 4, 1 << 20);
	c.window = 1;
	for (uint64_t i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "n%" PRIu64, i);
		assert_int_equal(rules_fcache_add(&c, name, strlen(name), &i), 0);
	}
	c.window = 2;
	assert_non_null(rules_fcache_find(&c, "n0", 2)); /* n1 is now the least recently used */
	bits = 99;
	assert_int_equal(rules_fcache_add(&c, "n4", 2, &bits), 0);
	assert_int_equal(c.count, 4);
	assert_int_equal(c.evictions, 1);
	assert_null(rules_fcache_find(&c, "n1", 2));
	assert_int_equal(*rules_fcache_find(&c, "n0", 2), 0);
	assert_int_equal(*rules_fcache_find(&c, "n4", 2), 99);
	assert_int_equal(*rules_fcache_find(&c, "n3", 2), 3);
	/* Every name was used in this window: a new one is evaluated but not kept. */
	assert_non_null(rules_fcache_find(&c, "n2", 2));
	assert_int_equal(rules_fcache_add(&c, "n5", 2, &bits), 0);
	assert_null(rules_fcache_find(&c, "n5", 2));
	assert_int_equal(c.refused, 1);
	assert_int_equal(c.evictions, 1);
	for (const char *const *n = (const char *const[]){ "n0", "n2", "n3", "n4", NULL }; *n; n++)
		assert_non_null(rules_fcache_find(&c, *n, 2));
	/* The next window, the least recently used goes for it. */
	c.window = 3;
	assert_int_equal(rules_fcache_add(&c, "n5", 2, &bits), 0);
	assert_non_null(rules_fcache_find(&c, "n5", 2));
	assert_null(rules_fcache_find(&c, "n0", 2));
	assert_int_equal(c.evictions, 2);
	rules_fcache_free(&c);
	/* Bytes: names of 1000 bytes in 4000 bytes of entries: never more. */
	rules_fcache_init(&c, 1, 1000, 4000);
	for (uint64_t i = 0; i < 50; i++) {
		char big[1000];

		memset(big, 'a' + (int)(i % 26), sizeof(big));
		big[0] = (char)i;
		c.window = i + 1;
		assert_int_equal(rules_fcache_add(&c, big, sizeof(big), &i), 0);
		assert_true(c.bytes <= 4000);
		assert_int_equal(*rules_fcache_find(&c, big, sizeof(big)), i);
	}
	assert_true(c.count >= 3 && c.count <= 4);
	rules_fcache_free(&c);
}

/* The cap full of label sets of processes gone: a window refuses the new one and
 * frees the idle ones, the next gives it its own series. */
static void test_idle_label_sets_freed(void **state)
{
	struct fixture x;
	struct rules *e = engine("recording_rules:\n  - metric: by_svc_total\n    group_by: [service_name]\n", 2);
	struct export_batch ab = { .series = x.series, .nseries = 2, .period_ns = PERIOD_NS };
	struct export_batch c = { .series = x.series + 2, .nseries = 1, .period_ns = PERIOD_NS };
	struct rules_stats st;

	(void)state;
	fixture_init(&x);
	ab.series = x.series;
	c.series = x.series + 2;
	assert_int_equal(rules_count(e, &ab), 0);
	assert_int_equal(rules_count(e, &ab), 0);
	assert_seconds(e, "by_svc_total", V("checkout"), 0.12);
	/* batch arrives: both caps are full, it goes to "other" ... */
	assert_int_equal(rules_count(e, &c), 0);
	assert_seconds(e, "by_svc_total", V("other"), 0.05);
	assert_int_equal(rules_value(e, "by_svc_total", V("batch")), -1);
	rules_get_stats(e, &st);
	assert_int_equal(st.refused, 2); /* by_svc_total and the built-in counter */
	/* ... and checkout and checkout-canary, idle this window, were freed. */
	assert_int_equal(rules_value(e, "by_svc_total", V("checkout")), -1);
	assert_int_equal(st.freed, 2 + 2);
	assert_int_equal(rules_count(e, &c), 0);
	assert_seconds(e, "by_svc_total", V("batch"), 0.05);
	assert_seconds(e, RULES_BUILTIN_METRIC, V("batch", "h1", ""), 0.05);
	rules_get_stats(e, &st);
	assert_int_equal(st.refused, 2);
	/* "other" got nothing in this window, but nothing was refused: it stays. */
	assert_seconds(e, "by_svc_total", V("other"), 0.05);
	/* All three again: batch keeps its counter (it had samples in every window since),
	 * checkout starts again from zero (a counter reset), canary is refused. */
	assert_int_equal(rules_count(e, &x.b), 0);
	rules_get_stats(e, &st);
	assert_int_equal(st.refused, 4);
	assert_seconds(e, "by_svc_total", V("batch"), 0.10);
	assert_seconds(e, "by_svc_total", V("checkout"), 0.06);
	assert_seconds(e, "by_svc_total", V("other"), 0.09);
	rules_free(e);
	fixture_free(&x);
}

static void test_windows_and_reload(void **state)
{
	static const char base[] = "recording_rules:\n"
				   "  - metric: kept_total\n"
				   "    match: {service_name: checkout, env: prod}\n"
				   "    function: '^hot_'\n"
				   "    group_by: [function]\n"
				   "  - metric: changed_total\n"
				   "    match: {service_name: checkout}\n";
	struct fixture x;
	struct rules *e = engine(base, 0), *n;

	(void)state;
	fixture_init(&x);
	for (int i = 0; i < 3; i++)
		assert_int_equal(rules_count(e, &x.b), 0);
	assert_seconds(e, "kept_total", V("hot_a"), 0.09);
	assert_seconds(e, "changed_total", V0, 0.18);
	/* Same rules (matchers in another order), one changed, one new. */
	n = engine("recording_rules:\n"
		   "  - metric: kept_total\n"
		   "    match: {env: prod, service_name: checkout}\n"
		   "    function: '^hot_'\n"
		   "    group_by: [function]\n"
		   "  - metric: changed_total\n"
		   "    match: {service_name: checkout-canary}\n"
		   "  - metric: new_total\n", 0);
	rules_adopt(n, e);
	rules_free(e);
	assert_int_equal(rules_count(n, &x.b), 0);
	assert_seconds(n, "kept_total", V("hot_a"), 0.12);
	assert_seconds(n, "changed_total", V0, 0.04);
	assert_seconds(n, "new_total", V0, 0.15);
	assert_seconds(n, RULES_BUILTIN_METRIC, V("batch", "h1", ""), 0.20);
	rules_free(n);
	fixture_free(&x);
}

static void test_render(void **state)
{
	struct fixture x;
	struct rules *e = engine("recording_rules:\n"
				 "  - metric: by_svc_total\n"
				 "    group_by: [service_name, env]\n", 0);
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	fixture_init(&x);
	x.labels[0][2].value = "a\"b\\c";
	/* Invalid UTF-8 (an executable's name) would make Prometheus reject the scrape. */
	x.labels[2][0].value = "ba\xfftch\xc3";
	assert_int_equal(rules_count(e, &x.b), 0);
	f = open_memstream(&text, &len);
	rules_render(e, f);
	fclose(f);
	assert_non_null(strstr(text, "# HELP by_svc_total CPU seconds"));
	assert_non_null(strstr(text, "# TYPE by_svc_total counter\n"));
	assert_non_null(strstr(text, "\nby_svc_total{service_name=\"checkout\",env=\"a\\\"b\\\\c\"} 0.06\n"));
	/* An absent label is left out, not written empty. */
	assert_non_null(strstr(text, "\nby_svc_total{service_name=\"ba\xef\xbf\xbdtch\xef\xbf\xbd\"} 0.05\n"));
	assert_non_null(strstr(text, "# TYPE " RULES_BUILTIN_METRIC " counter\n"));
	assert_non_null(strstr(text, "prowl_recording_series{metric=\"by_svc_total\"} 3\n"));
	assert_non_null(strstr(text, "prowl_recording_overflow_samples_total{metric=\"by_svc_total\"} 0\n"));
	free(text);
	rules_free(e);
	fixture_free(&x);
}

static void test_config_errors(void **state)
{
	static const char *const bad[] = {
		"recording_rules:\n  - metric: no_suffix\n",
		"recording_rules:\n  - metric: 9bad_total\n",
		"recording_rules:\n  - metric: prowl_mine_total\n",
		"recording_rules:\n  - metric: a_total\n    function: '(('\n",
		"recording_rules:\n  - metric: a_total\n    match: {service_name: '=~[z-a]'}\n",
		"recording_rules:\n  - metric: a_total\n    group_by: [pod]\n",
		"recording_rules:\n  - metric: a_total\n    group_by: [function]\n",
		"recording_rules:\n  - metric: a_total\n    match: {pod: x}\n",
		"recording_rules:\n  - metric: a_total\n    group_by: [env]\n  - metric: a_total\n",
		"recording_rules:\n  - metric: a_total\n    self: true\n",
		"recording_rules:\n  - metric: a_total\n    self: maybe\n    function: x\n",
		"recording_rules:\n  - metric: a_total\n    colour: red\n",
		"recording_rules:\n  - match: {service_name: x}\n",
		"recording_rules:\n  metric: a_total\n",
		"recording_rules:\n  - metric: a_total\n    group_by: [env, env]\n",
	};
	struct recording_rules_config c;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (load(bad[i], &c) != -EINVAL)
			fail_msg("accepted: %s", bad[i]);
		rules_config_free(&c);
	}
	assert_int_equal(load("recording_rules:\n  - metric: a_total\n    group_by: [env]\n"
			      "  - metric: a_total\n    group_by: [env]\n    function: x\n", &c), 0);
	rules_config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_total_and_builtin),
		cmocka_unit_test(test_function_total_and_self),
		cmocka_unit_test(test_count_once_and_nearest_leaf),
		cmocka_unit_test(test_group_by_and_shared_metric),
		cmocka_unit_test_teardown(test_container_id_from_resource, known_reset),
		cmocka_unit_test(test_matchers),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_overflow_without_function),
		cmocka_unit_test(test_regex_simplify),
		cmocka_unit_test(test_simplified_rule_counts_the_same),
		cmocka_unit_test(test_budget),
		cmocka_unit_test(test_fcache_bounded_lru),
		cmocka_unit_test(test_idle_label_sets_freed),
		cmocka_unit_test(test_windows_and_reload),
		cmocka_unit_test(test_render),
		cmocka_unit_test(test_config_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
