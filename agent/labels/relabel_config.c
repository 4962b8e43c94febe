/* relabel_config.c: reads and checks `relabel_configs:` from the agent's YAML
 * (libyaml nodes, so every error names its file:line), as Prometheus validates them. */
#include "relabel_config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "array_size.h"
#include "labelset.h"
#include "log.h"
#include "parse.h"
#include "regex_re2.h"
#include "yamlnode.h"

#define DEF_SEPARATOR   ";"
#define DEF_REGEX       "(.*)"
#define DEF_REPLACEMENT "$1"

static const char *const action_names[RELABEL__MAX] = {
	[RELABEL_REPLACE] = "replace",     [RELABEL_KEEP] = "keep",           [RELABEL_DROP] = "drop",
	[RELABEL_HASHMOD] = "hashmod",     [RELABEL_LABELMAP] = "labelmap",   [RELABEL_LABELDROP] = "labeldrop",
	[RELABEL_LABELKEEP] = "labelkeep", [RELABEL_LOWERCASE] = "lowercase", [RELABEL_UPPERCASE] = "uppercase",
	[RELABEL_KEEPEQUAL] = "keepequal", [RELABEL_DROPEQUAL] = "dropequal",
};

static const char *const rule_keys[] = { "source_labels", "separator", "regex",  "modulus",
					 "target_label",  "replacement", "action" };

int relabel_regex_compile(const char *re, regex_t *ret, char *err, size_t errsz)
{
	if (strlen(re) > RELABEL_MAX_REGEX) {
		snprintf(err, errsz, "longer than %d bytes", RELABEL_MAX_REGEX);
		return -EINVAL;
	}
	return regex_re2_compile(re, true, 0, ret, err, errsz);
}

const char *relabel_action_name(enum relabel_action a)
{
	return a < RELABEL__MAX ? action_names[a] : "?";
}

/* Logs "path:line: relabel_configs[i].key: message" and returns -EINVAL. */
#define rl_error(path, line, idx, key, ...) yaml_list_error(path, line, "relabel_configs", idx, key, __VA_ARGS__)

static int oom(void)
{
	return log_error_errno(-ENOMEM, "cannot load the configuration");
}

static int scalar(const char *path, long idx, const char *key, const yaml_node_t *n, size_t max, const char **ret)
{
	const char *s;

	if (n->type != YAML_SCALAR_NODE)
		return rl_error(path, yaml_node_line(n), idx, key, "expected a single value, got %s", yaml_node_kind(n));
	s = yaml_node_is_null(n) ? "" : (const char *)n->data.scalar.value;
	if (strlen(s) > max || has_control(s))
		return rl_error(path, yaml_node_line(n), idx, key,
				"invalid value: at most %zu bytes, without control characters or newlines", max);
	*ret = s;
	return 0;
}

static int set_str(char **dst, const char *s)
{
	char *c = strdup(s);

	if (!c)
		return oom();
	free(*dst);
	*dst = c;
	return 0;
}

static int parse_sources(const char *path, long idx, yaml_document_t *d, yaml_node_t *seq,
			 struct relabel_rule_config *r)
{
	size_t n;

	r->has_source = true;
	if (yaml_node_is_null(seq))
		return 0;
	if (seq->type != YAML_SEQUENCE_NODE)
		return rl_error(path, yaml_node_line(seq), idx, "source_labels",
				"expected a list of label names, e.g. [__meta_kubernetes_namespace], got %s",
				yaml_node_kind(seq));
	n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
	if (n > RELABEL_MAX_SOURCES)
		return rl_error(path, yaml_node_line(seq), idx, "source_labels", "too many labels: at most %d",
				RELABEL_MAX_SOURCES);
	r->source_labels = calloc(n ? n : 1, sizeof(*r->source_labels));
	if (!r->source_labels)
		return oom();
	for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++) {
		yaml_node_t *vn = yaml_document_get_node(d, *it);
		const char *name;
		int rc = scalar(path, idx, "source_labels", vn, LABEL_NAME_MAX, &name);

		if (rc < 0)
			return rc;
		if (!label_name_valid(name, strlen(name)))
			return rl_error(path, yaml_node_line(vn), idx, "source_labels",
					"'%s' is not a valid label name: use letters, digits and '_', not starting with "
					"a digit", name);
		r->source_labels[r->nsource] = strdup(name);
		if (!r->source_labels[r->nsource])
			return oom();
		r->nsource++;
	}
	return 0;
}

static bool is_word(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Prometheus's pattern for a target_label or labelmap replacement that holds
 * references: letters, digits and '_' (not starting with a digit) and $name or
 * ${name} references. */
static bool template_name_valid(const char *s)
{
	if (!*s || (*s >= '0' && *s <= '9'))
		return false;
	while (*s) {
		bool brace;
		size_t n;

		if (*s != '$') {
			if (!is_word(*s))
				return false;
			s++;
			continue;
		}
		brace = s[1] == '{';
		s += 1 + brace;
		for (n = 0; is_word(s[n]); n++)
			;
		if (!n || (brace && s[n] != '}'))
			return false;
		s += n + brace;
	}
	return true;
}

/* The checks Prometheus makes once a rule is read, in its order. */
static int check_rule(const char *path, long idx, const struct relabel_rule_config *r)
{
	enum relabel_action a = r->action;
	const char *an = action_names[a];
	bool needs_target = a == RELABEL_REPLACE || a == RELABEL_HASHMOD || a == RELABEL_LOWERCASE ||
			    a == RELABEL_UPPERCASE || a == RELABEL_KEEPEQUAL || a == RELABEL_DROPEQUAL;
	bool plain_target = a == RELABEL_HASHMOD || a == RELABEL_LOWERCASE || a == RELABEL_UPPERCASE ||
			    a == RELABEL_KEEPEQUAL || a == RELABEL_DROPEQUAL;

	if (a == RELABEL_HASHMOD && !r->modulus)
		return rl_error(path, r->line, idx, "modulus", "hashmod needs a modulus above 0, e.g. modulus: 4");
	if (needs_target && !*r->target_label)
		return rl_error(path, r->line, idx, "target_label", "the %s action needs a target_label", an);
	if (a == RELABEL_REPLACE && !strchr(r->target_label, '$') &&
	    !label_name_valid(r->target_label, strlen(r->target_label)))
		return rl_error(path, r->line, idx, "target_label",
				"'%s' is not a valid label name: use letters, digits and '_', not starting with a digit",
				r->target_label);
	if (a == RELABEL_REPLACE && strchr(r->target_label, '$') && !template_name_valid(r->target_label))
		return rl_error(path, r->line, idx, "target_label",
				"'%s' is not a valid label name template: letters, digits, '_' and $1/${name} "
				"references", r->target_label);
	if (plain_target && !label_name_valid(r->target_label, strlen(r->target_label)))
		return rl_error(path, r->line, idx, "target_label",
				"'%s' is not a valid label name for the %s action (no $ references here)",
				r->target_label, an);
	if ((a == RELABEL_LOWERCASE || a == RELABEL_UPPERCASE || a == RELABEL_KEEPEQUAL || a == RELABEL_DROPEQUAL) &&
	    strcmp(r->replacement, DEF_REPLACEMENT) != 0)
		return rl_error(path, r->line, idx, "replacement", "the %s action takes no replacement", an);
	if (a == RELABEL_LABELMAP && !template_name_valid(r->replacement))
		return rl_error(path, r->line, idx, "replacement",
				"'%s' is not a valid label name template for labelmap: letters, digits, '_' and "
				"$1/${name} references", r->replacement);
	if ((a == RELABEL_KEEPEQUAL || a == RELABEL_DROPEQUAL) &&
	    (r->has_regex || r->modulus || strcmp(r->separator, DEF_SEPARATOR) != 0))
		return rl_error(path, r->line, idx, NULL,
				"the %s action takes only source_labels and target_label, no other fields", an);
	if ((a == RELABEL_LABELDROP || a == RELABEL_LABELKEEP) &&
	    (r->has_source || *r->target_label || r->modulus || strcmp(r->separator, DEF_SEPARATOR) != 0 ||
	     strcmp(r->replacement, DEF_REPLACEMENT) != 0))
		return rl_error(path, r->line, idx, NULL,
				"the %s action takes only a regex (matched against label names), no other fields", an);
	return 0;
}

static int parse_field(const char *path, long idx, yaml_document_t *d, size_t k, yaml_node_t *vn,
		       struct relabel_rule_config *r)
{
	char err[256];
	const char *s;
	regex_t rx;
	int rc;

	if (k == 0)
		return parse_sources(path, idx, d, vn, r);
	rc = scalar(path, idx, rule_keys[k], vn, k == 2 ? RELABEL_MAX_REGEX : RELABEL_MAX_TEXT, &s);
	if (rc < 0)
		return rc;
	switch (k) {
	case 1:
		r->has_separator = true;
		return set_str(&r->separator, s);
	case 2:
		r->has_regex = true;
		r->regex_line = yaml_node_line(vn);
		rc = relabel_regex_compile(s, &rx, err, sizeof(err));
		if (rc == -ENOMEM)
			return oom();
		if (rc < 0)
			return rl_error(path, r->regex_line, idx, "regex", "bad regex '%s': %s", s, err);
		regfree(&rx);
		return set_str(&r->regex, s);
	case 3:
		r->has_modulus = true;
		if (parse_u64_range(s, 0, UINT64_MAX, &r->modulus) < 0)
			return rl_error(path, yaml_node_line(vn), idx, "modulus", "invalid modulus '%s': give a whole number",
					s);
		return 0;
	case 4:
		r->has_target = true;
		return set_str(&r->target_label, s);
	case 5:
		r->has_replacement = true;
		return set_str(&r->replacement, s);
	default:
		for (int a = 0; a < RELABEL__MAX; a++)
			if (strcasecmp(s, action_names[a]) == 0) {
				r->action = (enum relabel_action)a;
				return 0;
			}
		return rl_error(path, yaml_node_line(vn), idx, "action",
				"unknown action '%s': use replace, keep, drop, hashmod, labelmap, labeldrop, labelkeep, "
				"lowercase, uppercase, keepequal or dropequal", s);
	}
}

static int parse_rule(const char *path, long idx, yaml_document_t *d, yaml_node_t *map, void *elem)
{
	struct relabel_rule_config *r = elem;
	int rc;

	r->line = yaml_node_line(map);
	if (set_str(&r->separator, DEF_SEPARATOR) < 0 || set_str(&r->regex, DEF_REGEX) < 0 ||
	    set_str(&r->target_label, "") < 0 || set_str(&r->replacement, DEF_REPLACEMENT) < 0)
		return -ENOMEM;
	if (map->type != YAML_MAPPING_NODE)
		return rl_error(path, r->line, idx, NULL,
				"expected a mapping (source_labels, regex, action, ...), got %s", yaml_node_kind(map));
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		int k = yaml_item_key(path, "relabel_configs", idx, d, map, p, rule_keys, ARRAY_SIZE(rule_keys));

		if (k < 0)
			return k;
		rc = parse_field(path, idx, d, (size_t)k, yaml_document_get_node(d, p->value), r);
		if (rc < 0)
			return rc;
	}
	return check_rule(path, idx, r);
}

int relabel_config_parse(const char *path, yaml_document_t *d, yaml_node_t *node, struct relabel_config *ret)
{
	return yaml_parse_list(path, "relabel_configs", "- source_labels: [...] ...", d, node, RELABEL_MAX_RULES,
			       sizeof(*ret->rules), parse_rule, (void **)&ret->rules, &ret->n);
}

static void print_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

void relabel_config_print(const struct relabel_config *c, FILE *f)
{
	if (!c->n) {
		fputs(" []", f);
		return;
	}
	for (size_t i = 0; i < c->n; i++) {
		const struct relabel_rule_config *r = &c->rules[i];

		fprintf(f, "\n  - action: %s", action_names[r->action]);
		if (r->has_source) {
			fputs("\n    source_labels: [", f);
			for (size_t s = 0; s < r->nsource; s++)
				fprintf(f, "%s%s", s ? ", " : "", r->source_labels[s]);
			fputc(']', f);
		}
		if (r->has_separator) {
			fputs("\n    separator: ", f);
			print_str(f, r->separator);
		}
		if (r->has_regex) {
			fputs("\n    regex: ", f);
			print_str(f, r->regex);
		}
		if (r->has_modulus)
			fprintf(f, "\n    modulus: %" PRIu64, r->modulus);
		if (r->has_target) {
			fputs("\n    target_label: ", f);
			print_str(f, r->target_label);
		}
		if (r->has_replacement) {
			fputs("\n    replacement: ", f);
			print_str(f, r->replacement);
		}
	}
}

size_t relabel_config_targets(const struct relabel_config *c, const char **ret, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < c->n && n < max; i++) {
		const struct relabel_rule_config *r = &c->rules[i];
		const char *t = NULL;

		if ((r->action == RELABEL_REPLACE || r->action == RELABEL_HASHMOD || r->action == RELABEL_LOWERCASE ||
		     r->action == RELABEL_UPPERCASE) && !strchr(r->target_label, '$'))
			t = r->target_label;
		else if (r->action == RELABEL_LABELMAP && !strchr(r->replacement, '$'))
			t = r->replacement;
		if (!t || strncmp(t, "__", 2) == 0)
			continue;
		for (size_t k = 0; k < n && t; k++)
			if (strcmp(ret[k], t) == 0)
				t = NULL;
		if (t)
			ret[n++] = t;
	}
	return n;
}

bool relabel_config_can_drop(const struct relabel_config *c)
{
	for (size_t i = 0; i < c->n; i++) {
		enum relabel_action a = c->rules[i].action;

		if (a == RELABEL_KEEP || a == RELABEL_DROP || a == RELABEL_KEEPEQUAL || a == RELABEL_DROPEQUAL)
			return true;
	}
	return false;
}

bool relabel_config_equal(const struct relabel_config *a, const struct relabel_config *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct relabel_rule_config *x = &a->rules[i], *y = &b->rules[i];

		if (x->action != y->action || x->nsource != y->nsource || x->modulus != y->modulus ||
		    strcmp(x->separator, y->separator) || strcmp(x->regex, y->regex) ||
		    strcmp(x->target_label, y->target_label) || strcmp(x->replacement, y->replacement))
			return false;
		for (size_t s = 0; s < x->nsource; s++)
			if (strcmp(x->source_labels[s], y->source_labels[s]) != 0)
				return false;
	}
	return true;
}

void relabel_config_free(struct relabel_config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		struct relabel_rule_config *r = &c->rules[i];

		for (size_t s = 0; s < r->nsource; s++)
			free(r->source_labels[s]);
		free(r->source_labels);
		free(r->separator);
		free(r->regex);
		free(r->target_label);
		free(r->replacement);
	}
	free(c->rules);
	*c = (struct relabel_config){};
}
