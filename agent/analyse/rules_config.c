/* rules_config.c: reads and checks `recording_rules:` from the agent's YAML
 * (libyaml nodes, so that every error names its file:line and key). */
#include "rules_config.h"

#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "array_size.h"
#include "escape.h"
#include "log.h"
#include "parse.h"
#include "regex_re2.h"
#include "yamlnode.h"

static const char *const rule_keys[] = { "metric", "match", "function", "self", "group_by" };

/* Logs "path:line: recording_rules[i].key: message" and returns -EINVAL (list-level errors). */
#define rule_error(path, line, idx, key, ...) yaml_list_error(path, line, "recording_rules", idx, key, __VA_ARGS__)

/* Problems of this file so far: rule r is the idx-th of the array being parsed. */
static unsigned problems_so_far(const struct recording_rule_config *r, long idx)
{
	unsigned n = 0;

	for (long i = -idx; i <= 0; i++)
		n += r[i].problems;
	return n;
}

/* Counts a problem of rule r (the idx-th) and logs it as one line while the file has
 * had fewer than RULES_MAX_PROBLEMS. Returns 0: parsing goes on. */
static int __attribute__((format(printf, 6, 7)))
problem(struct recording_rule_config *r, long idx, const char *path, unsigned long line, const char *key,
	const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	if (problems_so_far(r, idx) < RULES_MAX_PROBLEMS) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		rule_error(path, line, idx, key, "%s", msg);
	}
	r->problems++;
	return 0;
}

static int oom(void)
{
	return log_error_errno(-ENOMEM, "cannot load the configuration");
}

/* A Prometheus metric name ending in _total. NULL or why not. */
static const char *metric_problem(const char *s)
{
	size_t n = strlen(s);

	if (!n)
		return "it is empty";
	if (n > RULES_MAX_METRIC)
		return "it is too long (at most 200 bytes)";
	if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_' || *s == ':'))
		return "a metric name starts with a letter, '_' or ':'";
	for (const char *p = s + 1; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
		      *p == ':'))
			return "use letters, digits, '_' and ':' only";
	if (n < 7 || strcmp(s + n - 6, "_total") != 0)
		return "a counter's name ends in _total, e.g. checkout_gc_cpu_seconds_total";
	if (strncmp(s, "prowl_", 6) == 0)
		return "names starting with prowl_ are reserved for the agent's own metrics";
	return NULL;
}

/* Compiles re as the agent will (anchored or not) to check it; 0 or -EINVAL with
 * the reason in err. */
static int regex_check(const char *re, bool anchored, char *err, size_t size)
{
	regex_t rx;
	int rc;

	if (strlen(re) > RULES_MAX_REGEX) {
		snprintf(err, size, "longer than %d bytes", RULES_MAX_REGEX);
		return -EINVAL;
	}
	rc = regex_re2_compile(re, anchored, REG_NOSUB, &rx, err, size);
	if (rc == 0)
		regfree(&rx);
	return rc;
}

/* A scalar's text; else a problem naming what was expected, and -EINVAL (skip it). */
static int scalar_of(struct recording_rule_config *r, const char *path, long idx, const char *key,
		     const yaml_node_t *n, const char *what, const char **ret)
{
	const char *s;

	if (n->type != YAML_SCALAR_NODE) {
		problem(r, idx, path, yaml_node_line(n), key, "expected %s, got %s", what, yaml_node_kind(n));
		return -EINVAL;
	}
	s = yaml_node_is_null(n) ? "" : (const char *)n->data.scalar.value;
	if (strlen(s) > 4096 || has_control(s)) {
		problem(r, idx, path, yaml_node_line(n), key,
			"invalid value: at most 4096 bytes, without control characters or newlines");
		return -EINVAL;
	}
	*ret = s;
	return 0;
}

static int parse_match(const char *path, long idx, yaml_document_t *d, yaml_node_t *map,
		       struct recording_rule_config *r)
{
	char key[192], err[256];
	size_t n;

	if (yaml_node_is_null(map))
		return 0;
	if (map->type != YAML_MAPPING_NODE)
		return problem(r, idx, path, yaml_node_line(map), "match", "expected a mapping of label: value, got %s",
			       yaml_node_kind(map));
	n = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
	if (n > RULES_MAX_MATCHERS)
		return problem(r, idx, path, yaml_node_line(map), "match", "too many matchers: at most %d",
			       RULES_MAX_MATCHERS);
	r->match = calloc(n ? n : 1, sizeof(*r->match));
	if (!r->match)
		return oom();
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = yaml_document_get_node(d, p->key), *vn = yaml_document_get_node(d, p->value);
		struct rule_matcher_config *m = &r->match[r->nmatch];
		const char *label, *v;
		bool dup = false;
		int rc;

		if (scalar_of(r, path, idx, "match", kn, "a label name", &label) < 0)
			continue;
		snprintf(key, sizeof(key), "match.%s", label);
		if (!valid_label_name(label) || strlen(label) > 128) {
			problem(r, idx, path, yaml_node_line(kn), key,
				"invalid label name '%s': use letters, digits and '_', not starting with a digit", label);
			continue;
		}
		for (size_t i = 0; i < r->nmatch && !dup; i++)
			dup = strcmp(r->match[i].label, label) == 0;
		if (dup) {
			for (size_t i = 0; i < r->nmatch; i++)
				if (strcmp(r->match[i].label, label) == 0)
					problem(r, idx, path, yaml_node_line(kn), key, "duplicate label '%s' (first at line %lu)",
						label, r->match[i].line);
			continue;
		}
		if (scalar_of(r, path, idx, key, vn, "a value, \"=~regex\", \"!=value\" or \"!~regex\"", &v) < 0)
			continue;
		m->line = yaml_node_line(vn);
		if (strncmp(v, "=~", 2) == 0)
			m->op = RULE_MATCH_RE, v += 2;
		else if (strncmp(v, "!~", 2) == 0)
			m->op = RULE_MATCH_NRE, v += 2;
		else if (strncmp(v, "!=", 2) == 0)
			m->op = RULE_MATCH_NE, v += 2;
		else if (*v == '=')
			m->op = RULE_MATCH_EQ, v += 1;
		else
			m->op = RULE_MATCH_EQ;
		if (m->op == RULE_MATCH_RE || m->op == RULE_MATCH_NRE) {
			rc = regex_check(v, true, err, sizeof(err));
			if (rc == -ENOMEM)
				return oom();
			if (rc < 0) {
				problem(r, idx, path, m->line, key, "bad regex '%s': %s", v, err);
				continue;
			}
		}
		m->label = strdup(label);
		m->value = strdup(v);
		r->nmatch++;
		if (!m->label || !m->value)
			return oom();
	}
	return 0;
}

static int parse_group_by(const char *path, long idx, yaml_document_t *d, yaml_node_t *seq,
			  struct recording_rule_config *r)
{
	size_t n;

	if (yaml_node_is_null(seq))
		return 0;
	if (seq->type != YAML_SEQUENCE_NODE)
		return problem(r, idx, path, yaml_node_line(seq), "group_by", "expected a list of label names, got %s",
			       yaml_node_kind(seq));
	n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
	if (n > RULES_MAX_GROUP_BY)
		return problem(r, idx, path, yaml_node_line(seq), "group_by", "too many labels: at most %d",
			       RULES_MAX_GROUP_BY);
	r->group_by = calloc(n ? n : 1, sizeof(*r->group_by));
	r->group_by_lines = calloc(n ? n : 1, sizeof(*r->group_by_lines));
	if (!r->group_by || !r->group_by_lines)
		return oom();
	for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++) {
		yaml_node_t *vn = yaml_document_get_node(d, *it);
		const char *name;
		bool dup = false;

		if (scalar_of(r, path, idx, "group_by", vn, "a label name", &name) < 0)
			continue;
		if (!valid_label_name(name) || strlen(name) > 128) {
			problem(r, idx, path, yaml_node_line(vn), "group_by",
				"invalid label name '%s': use letters, digits and '_', not starting with a digit", name);
			continue;
		}
		for (size_t i = 0; i < r->ngroup && !dup; i++)
			dup = strcmp(r->group_by[i], name) == 0;
		if (dup) {
			problem(r, idx, path, yaml_node_line(vn), "group_by", "label '%s' is listed twice", name);
			continue;
		}
		r->group_by[r->ngroup] = strdup(name);
		r->group_by_lines[r->ngroup] = yaml_node_line(vn);
		if (!r->group_by[r->ngroup])
			return oom();
		r->ngroup++;
	}
	return 0;
}

static int parse_function(const char *path, long idx, const yaml_node_t *vn, struct recording_rule_config *r)
{
	char err[256];
	const char *s;
	int rc;

	r->function_line = yaml_node_line(vn);
	if (scalar_of(r, path, idx, "function", vn, "a regular expression", &s) < 0) {
		r->function_bad = true;
		return 0;
	}
	if (!*s)
		return 0;
	rc = regex_check(s, false, err, sizeof(err));
	if (rc == -ENOMEM)
		return oom();
	if (rc < 0) {
		r->function_bad = true;
		return problem(r, idx, path, r->function_line, "function", "bad regex '%s': %s", s, err);
	}
	r->function = strdup(s);
	return r->function ? 0 : oom();
}

static int parse_rule(const char *path, long idx, yaml_document_t *d, yaml_node_t *map, void *elem)
{
	struct recording_rule_config *r = elem;
	const char *s;
	int rc = 0;

	r->line = yaml_node_line(map);
	if (map->type != YAML_MAPPING_NODE)
		return problem(r, idx, path, yaml_node_line(map), NULL,
			       "expected a mapping with metric, match, function, self and group_by, got %s",
			       yaml_node_kind(map));
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top && rc >= 0; p++) {
		yaml_node_t *vn = yaml_document_get_node(d, p->value);
		int k;

		if (problems_so_far(r, idx) >= RULES_MAX_PROBLEMS) {
			r->problems++; /* past the cap: the rest of the file waits for the next run */
			return 0;
		}
		k = yaml_item_key(path, "recording_rules", idx, d, map, p, rule_keys, ARRAY_SIZE(rule_keys));
		switch (k) {
		case 0: /* metric */
			r->metric_line = yaml_node_line(vn);
			if (scalar_of(r, path, idx, "metric", vn, "a metric name", &s) < 0)
				break;
			if (metric_problem(s)) {
				problem(r, idx, path, r->metric_line, "metric", "bad metric name '%s': %s", s, metric_problem(s));
				break;
			}
			r->metric = strdup(s);
			rc = r->metric ? 0 : oom();
			break;
		case 1:
			rc = parse_match(path, idx, d, vn, r);
			break;
		case 2:
			rc = parse_function(path, idx, vn, r);
			break;
		case 3: /* self */
			if (scalar_of(r, path, idx, "self", vn, "true or false", &s) < 0)
				break;
			r->self_line = yaml_node_line(vn);
			if (strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0 || strcasecmp(s, "on") == 0)
				r->self = true;
			else if (strcasecmp(s, "false") == 0 || strcasecmp(s, "no") == 0 || strcasecmp(s, "off") == 0)
				r->self = false;
			else
				problem(r, idx, path, r->self_line, "self", "invalid boolean '%s': use true or false", s);
			break;
		case 4:
			rc = parse_group_by(path, idx, d, vn, r);
			break;
		default: /* yaml_item_key logged it */
			r->problems++;
			break;
		}
	}
	if (rc < 0)
		return rc;
	if (!r->metric && !r->metric_line)
		problem(r, idx, path, r->line, "metric", "every rule needs a metric name, e.g. metric: checkout_cpu_seconds_total");
	if (r->self && !r->function && !r->function_bad)
		problem(r, idx, path, r->self_line, "self",
			"self: true needs a function regex (without one a rule counts the whole CPU)");
	return 0;
}

int rules_config_parse(const char *path, yaml_document_t *d, yaml_node_t *node, struct recording_rules_config *ret)
{
	return yaml_parse_list(path, "recording_rules", "- metric: ...", d, node, RULES_MAX, sizeof(*ret->rules),
			       parse_rule, (void **)&ret->rules, &ret->n);
}

static bool in_list(const char *const *list, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i], s) == 0)
			return true;
	return false;
}

/* Same labels in any order. */
static bool same_label_set(const struct recording_rule_config *a, const struct recording_rule_config *b)
{
	if (a->ngroup != b->ngroup)
		return false;
	for (size_t i = 0; i < a->ngroup; i++)
		if (!in_list((const char *const *)b->group_by, b->ngroup, a->group_by[i]))
			return false;
	return true;
}

static void label_list(const struct recording_rule_config *r, char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = 0;
	for (size_t i = 0; i < r->ngroup && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? ", " : "", r->group_by[i]);
}

/* Logs one problem of the check while the file has had fewer than RULES_MAX_PROBLEMS. */
#define check_problem(nprob, path, line, idx, key, ...)                                         \
	do {                                                                                      \
		if ((nprob)++ < RULES_MAX_PROBLEMS)                                               \
			rule_error(path, line, idx, key, __VA_ARGS__);                             \
	} while (0)

int rules_config_check(const char *path, const struct recording_rules_config *c, const char *const *labels,
		       size_t n)
{
	char known[512], key[192], l1[256], l2[256];
	unsigned nprob = 0;
	size_t k = 0;

	known[0] = 0;
	for (size_t i = 0; i < n && k < sizeof(known); i++)
		k += (size_t)snprintf(known + k, sizeof(known) - k, "%s%s", i ? ", " : "", labels[i]);
	for (size_t i = 0; i < c->n; i++)
		nprob += c->rules[i].problems;
	for (size_t i = 0; i < c->n; i++) {
		const struct recording_rule_config *r = &c->rules[i];

		for (size_t m = 0; m < r->nmatch; m++) {
			snprintf(key, sizeof(key), "match.%s", r->match[m].label);
			if (!in_list(labels, n, r->match[m].label))
				check_problem(nprob, path, r->match[m].line, (long)i, key,
					      "unknown label '%s': rules match on the series labels (%s)", r->match[m].label,
					      known);
		}
		for (size_t g = 0; g < r->ngroup; g++) {
			const char *name = r->group_by[g];

			if (strcmp(name, RULES_FUNCTION_LABEL) == 0 && !r->function && !r->function_bad)
				check_problem(nprob, path, r->group_by_lines[g], (long)i, "group_by",
					      "label 'function' needs a function regex in the same rule");
			if (strcmp(name, RULES_FUNCTION_LABEL) != 0 && !in_list(labels, n, name))
				check_problem(nprob, path, r->group_by_lines[g], (long)i, "group_by",
					      "unknown label '%s' (known: %s, %s)", name, known, RULES_FUNCTION_LABEL);
		}
		for (size_t j = 0; j < i && r->metric; j++) {
			const struct recording_rule_config *o = &c->rules[j];

			if (!o->metric || strcmp(o->metric, r->metric) != 0 || same_label_set(o, r))
				continue;
			label_list(o, l1, sizeof(l1));
			label_list(r, l2, sizeof(l2));
			check_problem(nprob, path, r->metric_line, (long)i, "metric",
				      "metric '%s' is also recorded at line %lu with labels [%s], here with [%s]: "
				      "rules that share a metric must group by the same labels",
				      r->metric, o->metric_line, l1, l2);
			break;
		}
	}
	if (nprob > RULES_MAX_PROBLEMS)
		log_error("%s: recording_rules: more than %d problems, the first %d shown: fix them and run --check again",
			  path, RULES_MAX_PROBLEMS, RULES_MAX_PROBLEMS);
	return nprob ? -EINVAL : 0;
}

/* prefix + s as a YAML double-quoted scalar (escape.c's JSON string is one). */
static void print_quoted(FILE *f, const char *prefix, const char *s)
{
	char *v = NULL;

	if (asprintf(&v, "%s%s", prefix, s) < 0) {
		fputs("\"\"", f); /* out of memory: --check's output is all that suffers */
		return;
	}
	escape_json(f, v);
	free(v);
}

void rules_config_print(const struct recording_rules_config *c, FILE *f)
{
	static const char *const ops[] = { [RULE_MATCH_EQ] = "", [RULE_MATCH_NE] = "!=", [RULE_MATCH_RE] = "=~",
					   [RULE_MATCH_NRE] = "!~" };

	if (!c->n) {
		fputs(" []", f);
		return;
	}
	for (size_t i = 0; i < c->n; i++) {
		const struct recording_rule_config *r = &c->rules[i];

		fprintf(f, "\n  - metric: %s", r->metric);
		if (r->nmatch)
			fputs("\n    match:", f);
		for (size_t m = 0; m < r->nmatch; m++) {
			const struct rule_matcher_config *x = &r->match[m];
			/* An exact value that looks like an operator keeps its '='. */
			bool escape = x->op == RULE_MATCH_EQ && (x->value[0] == '=' || x->value[0] == '!');

			fprintf(f, "\n      %s: ", x->label);
			print_quoted(f, escape ? "=" : ops[x->op], x->value);
		}
		if (r->function) {
			fputs("\n    function: ", f);
			print_quoted(f, "", r->function);
			fprintf(f, "\n    self: %s", r->self ? "true" : "false");
		}
		fputs("\n    group_by: [", f);
		for (size_t g = 0; g < r->ngroup; g++)
			fprintf(f, "%s%s", g ? ", " : "", r->group_by[g]);
		fputc(']', f);
	}
}

void rules_config_free(struct recording_rules_config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		struct recording_rule_config *r = &c->rules[i];

		free(r->metric);
		for (size_t m = 0; m < r->nmatch; m++) {
			free(r->match[m].label);
			free(r->match[m].value);
		}
		free(r->match);
		free(r->function);
		for (size_t g = 0; g < r->ngroup; g++)
			free(r->group_by[g]);
		free(r->group_by);
		free(r->group_by_lines);
	}
	free(c->rules);
	*c = (struct recording_rules_config){};
}
