/* rules_config.h: the `recording_rules:` section of the agent's YAML: parsed with
 * the line of every value, validated, printed back for --check, and freed. */
#ifndef PROWL_RULES_CONFIG_H
#define PROWL_RULES_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <yaml.h>

#define RULES_MAX          256  /* rules per configuration */
#define RULES_MAX_MATCHERS 32   /* label matchers per rule */
#define RULES_MAX_GROUP_BY 16   /* group_by labels per rule */
#define RULES_MAX_REGEX    1024 /* bytes of one regex */
#define RULES_MAX_METRIC   200  /* bytes of a metric name */
#define RULES_MAX_PROBLEMS 20   /* problems printed for one file; the rest wait for the next run */

/* The built-in counter every agent serves, with the series labels. */
#define RULES_BUILTIN_METRIC "prowl_profile_cpu_seconds_total"
/* The group_by name of the matched function. */
#define RULES_FUNCTION_LABEL "function"

enum rule_match_op {
	RULE_MATCH_EQ = 0, /* "value" or "=value" */
	RULE_MATCH_NE,     /* "!=value" */
	RULE_MATCH_RE,     /* "=~regex", anchored at both ends as in Prometheus */
	RULE_MATCH_NRE,    /* "!~regex" */
};

struct rule_matcher_config {
	char *label;
	enum rule_match_op op;
	char *value;         /* without its operator prefix */
	unsigned long line;
};

struct recording_rule_config {
	char *metric;
	struct rule_matcher_config *match;
	size_t nmatch;
	char *function;      /* POSIX extended regex on function names, unanchored; NULL: whole CPU */
	bool self;           /* match the leaf frame only */
	char **group_by;     /* as written; unique names */
	unsigned long *group_by_lines;
	size_t ngroup;
	unsigned long line, metric_line, function_line, self_line;
	bool function_bad;   /* a function value was given but refused */
	unsigned problems;   /* found by rules_config_parse (each one logged, up to the cap) */
};

struct recording_rules_config {
	struct recording_rule_config *rules;
	size_t n;
};

/* Parses the value node of `recording_rules` (a list of mappings, or null) in d
 * into *ret, which must be empty. path names the file in messages. Checks everything
 * that needs no other setting: metric names, regexes, operators, types and unknown
 * keys. Each problem is one "path:line: recording_rules[i].key: what" line, and
 * parsing goes on past it, so that one run names every problem (up to
 * RULES_MAX_PROBLEMS); the problems are counted in the rules, and rules_config_check,
 * which must follow, fails on them. Returns 0, -EINVAL when the section is not a
 * list of rules at all, or -ENOMEM. */
int rules_config_parse(const char *path, yaml_document_t *d, yaml_node_t *node, struct recording_rules_config *ret);

/* Checks the rules against the series labels that exist (labels[0..n)): every
 * match and group_by label must be one of them (or "function" in group_by, for a
 * rule with a function regex), and rules that share a metric must keep the same
 * labels. Logs one "path:line: key: what" line per problem (up to the cap, counting
 * those of rules_config_parse) and returns -EINVAL when it or rules_config_parse
 * found any. */
int rules_config_check(const char *path, const struct recording_rules_config *c, const char *const *labels,
		       size_t n);

/* Writes the rules as YAML block lines after a "recording_rules:" key (" []"
 * when there are none), in a form rules_config_parse reads back. */
void rules_config_print(const struct recording_rules_config *c, FILE *f);

/* Frees what c owns and zeroes it; accepts a zeroed struct. */
void rules_config_free(struct recording_rules_config *c);

#endif
