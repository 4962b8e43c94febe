/* test_relabel.c: table-driven tests of relabel_configs: every action with results
 * from Prometheus's documented semantics, $N expansion, RE2 translation and --check errors. */
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
#include <yaml.h>

#include "labels/labelset.h"
#include "labels/relabel.h"
#include "log.h"

/* The label set every case starts from: discovery labels as prowl makes them. */
static const char *const base[][2] = {
	{ "__meta_kubernetes_namespace", "prod" },
	{ "__meta_kubernetes_pod_name", "api-7d9f" },
	{ "__meta_kubernetes_pod_label_app", "api" },
	{ "__meta_kubernetes_pod_label_tier", "Backend" },
	{ "__meta_process_comm", "Ärger" },
	{ "a", "foo" },
	{ "b", "bar" },
	{ "a2", "foo" },
	{ "num", "12-ab" },
	{ "service_name", "x" },
};

struct rcase {
	const char *name;
	const char *yaml; /* the relabel_configs list */
	int keep;         /* expected result of relabel_apply */
	/* Expected labels after relabeling: "name=value" present, "!name" absent.
	 * Labels not listed must be as in base[] (unless `only` is set). */
	const char *expect[8];
	bool only; /* the set holds exactly `expect` */
};

static const struct rcase cases[] = {
	{ "replace default regex and replacement", "- source_labels: [a]\n  target_label: c\n", 1, { "c=foo" } },
	{ "replace with groups and separator",
	  "- source_labels: [a, b]\n  regex: '(f.*);(b.*)'\n  replacement: '$2-$1'\n  target_label: c\n", 1,
	  { "c=bar-foo" } },
	{ "replace custom separator", "- source_labels: [a, b]\n  separator: /\n  target_label: c\n", 1, { "c=foo/bar" } },
	{ "replace: no match, no change", "- source_labels: [a]\n  regex: bar\n  target_label: a\n  replacement: z\n", 1,
	  { "a=foo" } },
	{ "replace: anchored, a partial match is no match",
	  "- source_labels: [a]\n  regex: fo\n  target_label: c\n  replacement: hit\n", 1, { "!c" } },
	{ "replace ${1}x is group 1 then x", "- source_labels: [a]\n  replacement: '${1}x'\n  target_label: c\n", 1,
	  { "c=foox" } },
	{ "replace $1x is the named group 1x: empty, so the target goes",
	  "- source_labels: [a]\n  replacement: '$1x'\n  target_label: b\n", 1, { "!b" } },
	{ "replace $$ is a dollar", "- source_labels: [a]\n  replacement: '$$1 ${1}'\n  target_label: c\n", 1,
	  { "c=$1 foo" } },
	{ "replace a lone $ is text", "- source_labels: [a]\n  replacement: 'cost $ $}'\n  target_label: c\n", 1,
	  { "c=cost $ $}" } },
	{ "replace with an empty result deletes the target",
	  "- source_labels: [missing]\n  regex: ''\n  replacement: ''\n  target_label: a\n", 1, { "!a" } },
	{ "replace: missing source labels read as empty",
	  "- source_labels: [missing, a]\n  regex: ';foo'\n  target_label: c\n  replacement: yes\n", 1, { "c=yes" } },
	{ "replace: target name from a group",
	  "- source_labels: [a]\n  regex: '(.*)'\n  target_label: '${1}_x'\n  replacement: v\n", 1, { "foo_x=v" } },
	{ "replace: an invalid expanded target name is skipped",
	  "- source_labels: [num]\n  regex: '(.*)'\n  target_label: '$1'\n  replacement: v\n", 1, { "num=12-ab" } },
	{ "replace $0 is the whole match",
	  "- source_labels: [a]\n  regex: 'f(o+)'\n  target_label: c\n  replacement: '$0/$1/$2'\n", 1,
	  { "c=foo/oo/" } },
	{ "RE2 \\d and \\w are translated",
	  "- source_labels: [num]\n  regex: '(\\d+)-(\\w+)'\n  target_label: c\n  replacement: '$2$1'\n", 1,
	  { "c=ab12" } },
	{ "RE2 \\d in brackets", "- source_labels: [num]\n  regex: '([\\d]+)-.*'\n  target_label: c\n", 1, { "c=12" } },
	{ "keep on match", "- source_labels: [__meta_kubernetes_namespace]\n  regex: prod|staging\n  action: keep\n", 1,
	  { "a=foo" } },
	{ "keep drops on no match", "- source_labels: [__meta_kubernetes_namespace]\n  regex: staging\n  action: keep\n",
	  0, {} },
	{ "keep: anchored", "- source_labels: [__meta_kubernetes_namespace]\n  regex: pro\n  action: keep\n", 0, {} },
	{ "keep: action names are case-insensitive",
	  "- source_labels: [a, b]\n  regex: foo;bar\n  action: Keep\n", 1, {} },
	{ "drop on match", "- source_labels: [a]\n  regex: 'f.*'\n  action: drop\n", 0, {} },
	{ "drop keeps on no match", "- source_labels: [a]\n  regex: 'x.*'\n  action: drop\n", 1, {} },
	{ "drop: no source labels match the empty string", "- action: drop\n  regex: ''\n", 0, {} },
	{ "keepequal keeps equal values", "- source_labels: [a]\n  target_label: a2\n  action: keepequal\n", 1, {} },
	{ "keepequal drops different values", "- source_labels: [b]\n  target_label: a2\n  action: keepequal\n", 0, {} },
	{ "dropequal drops equal values", "- source_labels: [a]\n  target_label: a2\n  action: dropequal\n", 0, {} },
	{ "dropequal keeps different values", "- source_labels: [b]\n  target_label: a2\n  action: dropequal\n", 1, {} },
	{ "hashmod (MD5, last 8 bytes, big-endian)",
	  "- source_labels: [a]\n  modulus: 1000\n  target_label: h\n  action: hashmod\n"
	  "- source_labels: [__meta_kubernetes_namespace, __meta_kubernetes_pod_name]\n  modulus: 4\n"
	  "  target_label: h2\n  action: hashmod\n",
	  1, { "h=696", "h2=0" } },
	{ "labelmap copies with the name's groups",
	  "- regex: __meta_kubernetes_pod_label_(.+)\n  action: labelmap\n", 1, { "app=api", "tier=Backend" } },
	{ "labelmap with a replacement template",
	  "- regex: __meta_(kubernetes)_(namespace)\n  replacement: '${1}_$2'\n  action: labelmap\n", 1,
	  { "kubernetes_namespace=prod" } },
	{ "labeldrop removes matching names", "- regex: __meta_.*|a2\n  action: labeldrop\n", 1,
	  { "a=foo", "b=bar", "num=12-ab", "service_name=x" }, true },
	{ "labelkeep keeps matching names only", "- regex: a|b\n  action: labelkeep\n", 1, { "a=foo", "b=bar" }, true },
	{ "lowercase", "- source_labels: [__meta_kubernetes_pod_label_tier]\n  target_label: t\n  action: lowercase\n", 1,
	  { "t=backend" } },
	{ "uppercase", "- source_labels: [a, b]\n  target_label: t\n  action: uppercase\n", 1, { "t=FOO;BAR" } },
	{ "lowercase beyond ASCII", "- source_labels: [__meta_process_comm]\n  target_label: t\n  action: lowercase\n",
	  1, { "t=ärger" } },
	{ "lowercase of nothing deletes the target", "- source_labels: [none]\n  target_label: a\n  action: lowercase\n",
	  1, { "!a" } },
	{ "rules run in order",
	  "- source_labels: [__meta_kubernetes_pod_label_app]\n  target_label: service_name\n"
	  "- source_labels: [service_name]\n  regex: api\n  action: keep\n"
	  "- source_labels: [service_name]\n  regex: '(.*)'\n  replacement: 'svc-$1'\n  target_label: service_name\n",
	  1, { "service_name=svc-api" } },
	{ "a later rule does not run after a drop",
	  "- source_labels: [a]\n  regex: foo\n  action: drop\n- target_label: never\n  replacement: set\n", 0, {} },
};

static int parse_yaml(const char *text, struct relabel_config *c)
{
	yaml_parser_t p;
	yaml_document_t d;
	int r;

	*c = (struct relabel_config){};
	assert_true(yaml_parser_initialize(&p));
	yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
	assert_true(yaml_parser_load(&p, &d));
	r = relabel_config_parse("test.yaml", &d, yaml_document_get_root_node(&d), c);
	yaml_document_delete(&d);
	yaml_parser_delete(&p);
	return r;
}

static void fill_base(struct labelset *s)
{
	for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++)
		assert_int_equal(labelset_set(s, base[i][0], base[i][1]), 0);
}

static bool listed(const struct rcase *c, const char *name)
{
	for (size_t i = 0; i < 8 && c->expect[i]; i++) {
		const char *e = c->expect[i] + (c->expect[i][0] == '!');
		size_t n = strcspn(e, "=");

		if (strlen(name) == n && strncmp(e, name, n) == 0)
			return true;
	}
	return false;
}

static void test_actions(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const struct rcase *c = &cases[k];
		struct relabel_config cfg;
		struct relabel *rl = NULL;
		struct labelset s = {};
		int r;

		print_message("case: %s\n", c->name);
		assert_int_equal(parse_yaml(c->yaml, &cfg), 0);
		assert_int_equal(relabel_new(&cfg, &rl), 0);
		fill_base(&s);
		r = relabel_apply(rl, &s);
		assert_int_equal(r, c->keep);
		if (r == 1) {
			for (size_t i = 0; i < 8 && c->expect[i]; i++) {
				const char *e = c->expect[i];

				if (e[0] == '!') {
					assert_null(labelset_get(&s, e + 1));
				} else {
					char name[128];
					size_t n = strcspn(e, "=");

					snprintf(name, sizeof(name), "%.*s", (int)n, e);
					assert_non_null(labelset_get(&s, name));
					assert_string_equal(labelset_get(&s, name), e + n + 1);
				}
			}
			/* Everything not named keeps its value (or, with only, is gone). */
			for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++) {
				if (listed(c, base[i][0]))
					continue;
				if (c->only)
					assert_null(labelset_get(&s, base[i][0]));
				else
					assert_string_equal(labelset_value(&s, base[i][0]), base[i][1]);
			}
		}
		labelset_free(&s);
		relabel_free(rl);
		relabel_config_free(&cfg);
	}
}

static void test_internal_labels_dropped_after(void **state)
{
	struct labelset s = {};

	(void)state;
	fill_base(&s);
	labelset_drop_internal(&s);
	assert_null(labelset_get(&s, "__meta_kubernetes_namespace"));
	assert_string_equal(labelset_value(&s, "a"), "foo");
	assert_int_equal(s.n, 5);
	labelset_free(&s);
}

/* Config errors: each is one line naming file:line, and parsing fails with -EINVAL. */
struct ecase {
	const char *yaml;
	unsigned long line;
	const char *want;
};

static const struct ecase errors[] = {
	{ "- action: rename\n", 1, "unknown action 'rename'" },
	{ "- source_labels: [a]\n  action: replace\n", 1, "needs a target_label" },
	{ "- source_labels: [a]\n  target_label: h\n  action: hashmod\n", 1, "modulus above 0" },
	{ "- regex: a\n  source_labels: [a]\n  action: labeldrop\n", 1, "takes only a regex" },
	{ "- regex: a\n  target_label: x\n  action: labelkeep\n", 1, "takes only a regex" },
	{ "- source_labels: [a]\n  target_label: b\n  regex: x\n  action: keepequal\n", 1, "only source_labels and target_label" },
	{ "- source_labels: [a]\n  target_label: b\n  replacement: x\n  action: lowercase\n", 1, "takes no replacement" },
	{ "- source_labels: [a]\n\n  regex: '(a'\n  target_label: b\n", 3, "bad regex '(a'" },
	{ "- source_labels: [a]\n  regex: '(?i)foo'\n  action: keep\n", 2, "RE2 syntax" },
	{ "- source_labels: [a]\n  regex: 'a.*?'\n  action: keep\n", 2, "non-greedy" },
	{ "- source_labels: [a]\n  regex: '\\pL'\n  action: keep\n", 2, "escape" },
	{ "- source_labels: [1x]\n  action: keep\n", 1, "'1x' is not a valid label name" },
	{ "- regex: (.*)\n  replacement: '1$1'\n  action: labelmap\n", 1, "not a valid label name template" },
	{ "- source_labels: [a]\n  target_label: a-b\n", 1, "'a-b' is not a valid label name" },
	{ "- source_labels: [a]\n  target_label: '${1'\n", 1, "not a valid label name template" },
	{ "- source_labels: [a]\n  target_label: '$1'\n  action: lowercase\n", 1, "no $ references" },
	{ "- source_labels: [a]\n  regexp: x\n", 2, "unknown key 'regexp'" },
	{ "- source_labels: a\n  action: keep\n", 1, "expected a list of label names" },
	{ "- source_labels: [a]\n  modulus: many\n  target_label: h\n  action: hashmod\n", 2, "invalid modulus" },
	{ "- [a]\n", 1, "expected a mapping" },
	{ "x: 1\n", 1, "expected a list of rules" },
	{ "- source_labels: [a]\n  action: keep\n  action: drop\n", 3, "duplicate key" },
};

static char *capture_path;

static void test_config_errors(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(errors) / sizeof(errors[0]); k++) {
		const struct ecase *e = &errors[k];
		struct relabel_config cfg;
		char want_prefix[64], *text;
		FILE *f;
		long len;

		print_message("error case %zu: %s\n", k, e->want);
		assert_non_null(freopen(capture_path, "w+", stderr));
		assert_int_equal(parse_yaml(e->yaml, &cfg), -EINVAL);
		fflush(stderr);
		relabel_config_free(&cfg);
		f = fopen(capture_path, "r");
		assert_non_null(f);
		fseek(f, 0, SEEK_END);
		len = ftell(f);
		rewind(f);
		text = calloc(1, (size_t)len + 1);
		assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
		fclose(f);
		snprintf(want_prefix, sizeof(want_prefix), "test.yaml:%lu: relabel_configs", e->line);
		if (!strstr(text, want_prefix) || !strstr(text, e->want))
			fail_msg("wanted '%s' and '%s' in: %s", want_prefix, e->want, text);
		/* exactly one line */
		assert_ptr_equal(strchr(text, '\n'), text + len - 1);
		free(text);
	}
	assert_non_null(freopen("/dev/null", "w", stderr));
}

static void test_print_reads_back(void **state)
{
	const char *yaml = "- source_labels: [a, b]\n  separator: '/'\n  regex: 'x\"y\\\\d'\n  target_label: c\n"
			   "- regex: __meta_(.+)\n  action: labelmap\n"
			   "- source_labels: [a]\n  modulus: 8\n  target_label: h\n  action: hashmod\n";
	struct relabel_config a, b;
	char *text = NULL, *doc;
	size_t len = 0;
	FILE *f;

	(void)state;
	assert_int_equal(parse_yaml(yaml, &a), 0);
	f = open_memstream(&text, &len);
	relabel_config_print(&a, f);
	fclose(f);
	assert_int_equal(asprintf(&doc, "%s\n", text + 1), (int)strlen(text)); /* drop the leading newline */
	assert_int_equal(parse_yaml(doc, &b), 0);
	assert_true(relabel_config_equal(&a, &b));
	assert_int_equal(b.rules[0].has_separator, true);
	assert_int_equal(b.rules[1].has_source, false);
	free(doc);
	free(text);
	relabel_config_free(&a);
	relabel_config_free(&b);
}

static void test_targets_and_can_drop(void **state)
{
	const char *yaml = "- source_labels: [a]\n  target_label: team\n"
			   "- source_labels: [a]\n  target_label: '${1}_x'\n"
			   "- regex: __meta_kubernetes_pod_label_(.+)\n  action: labelmap\n"
			   "- regex: __meta_kubernetes_pod_label_app\n  replacement: app\n  action: labelmap\n"
			   "- source_labels: [a]\n  target_label: __tmp\n"
			   "- source_labels: [a]\n  modulus: 2\n  target_label: shard\n  action: hashmod\n";
	struct relabel_config c;
	const char *t[8];
	size_t n;

	(void)state;
	assert_int_equal(parse_yaml(yaml, &c), 0);
	n = relabel_config_targets(&c, t, 8);
	assert_int_equal(n, 3);
	assert_string_equal(t[0], "team");
	assert_string_equal(t[1], "app");
	assert_string_equal(t[2], "shard");
	assert_false(relabel_config_can_drop(&c));
	relabel_config_free(&c);
	assert_int_equal(parse_yaml("- source_labels: [a]\n  action: dropequal\n  target_label: b\n", &c), 0);
	assert_true(relabel_config_can_drop(&c));
	relabel_config_free(&c);
}

/* Hostile input: huge values and many groups stay bounded and never crash. */
static void test_bounds(void **state)
{
	struct relabel_config c;
	struct relabel *rl;
	struct labelset s = {};
	char *big = malloc(100000);

	(void)state;
	memset(big, 'a', 99999);
	big[99999] = 0;
	assert_int_equal(parse_yaml("- source_labels: [v, v, v]\n  regex: '(a*);(a*);(a*)'\n"
				    "  replacement: '$1$2$3$1$2$3'\n  target_label: out\n", &c), 0);
	assert_int_equal(relabel_new(&c, &rl), 0);
	assert_int_equal(labelset_set(&s, "v", big), 0);
	assert_true(relabel_apply(rl, &s) >= 0);
	if (labelset_get(&s, "out"))
		assert_true(strlen(labelset_get(&s, "out")) < 4096);
	labelset_free(&s);
	relabel_free(rl);
	relabel_config_free(&c);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_actions),
		cmocka_unit_test(test_internal_labels_dropped_after),
		cmocka_unit_test(test_config_errors),
		cmocka_unit_test(test_print_reads_back),
		cmocka_unit_test(test_targets_and_can_drop),
		cmocka_unit_test(test_bounds),
	};
	char tmpl[] = "/tmp/i9-relabel-XXXXXX";
	int fd = mkstemp(tmpl), r;

	if (fd < 0)
		return 1;
	close(fd);
	capture_path = tmpl;
	log_set_format(LOG_FMT_PLAIN);
	r = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(tmpl);
	return r;
}
