/* relabel_config.h: the `relabel_configs:` section of the agent's YAML, with
 * Prometheus's fields, defaults and checks; parsed with the line of every value. */
#ifndef PROWL_RELABEL_CONFIG_H
#define PROWL_RELABEL_CONFIG_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <yaml.h>

#define RELABEL_MAX_RULES   256  /* rules per configuration */
#define RELABEL_MAX_SOURCES 32   /* source_labels per rule */
#define RELABEL_MAX_REGEX   1024 /* bytes of one regex */
#define RELABEL_MAX_TEXT    1024 /* bytes of a separator, replacement or target_label */

enum relabel_action {
	RELABEL_REPLACE = 0,
	RELABEL_KEEP,
	RELABEL_DROP,
	RELABEL_HASHMOD,
	RELABEL_LABELMAP,
	RELABEL_LABELDROP,
	RELABEL_LABELKEEP,
	RELABEL_LOWERCASE,
	RELABEL_UPPERCASE,
	RELABEL_KEEPEQUAL,
	RELABEL_DROPEQUAL,
	RELABEL__MAX,
};

/* One rule. Every string is set after parsing (defaults filled in); the has_*
 * flags say which fields the file gave, for the per-action checks and --check. */
struct relabel_rule_config {
	enum relabel_action action;
	char **source_labels;
	size_t nsource;
	char *separator;    /* default ";" */
	char *regex;        /* the file's text, default "(.*)" */
	char *target_label; /* "" when unset */
	char *replacement;  /* default "$1" */
	uint64_t modulus;
	bool has_source, has_separator, has_regex, has_target, has_replacement, has_modulus;
	unsigned long line, regex_line;
};

struct relabel_config {
	struct relabel_rule_config *rules;
	size_t n;
};

/* Compiles the regex re as relabeling uses it: RE2's \d \D \s \S translated to
 * POSIX classes, then anchored as ^(re)$ with REG_EXTENDED, so the user's group
 * N is group N + 1. Returns 0, -EINVAL with a reason in err (e.g. RE2 syntax
 * POSIX ERE lacks), or -ENOMEM. */
int relabel_regex_compile(const char *re, regex_t *ret, char *err, size_t errsz);

/* The name of an action, as written in the file. */
const char *relabel_action_name(enum relabel_action a);

/* Parses the value node of `relabel_configs` (a list of mappings, or null) in d
 * into *ret, which must be empty. Checks everything Prometheus checks (unknown
 * action or key, missing target_label or modulus, fields an action does not
 * take, label names, regexes). Returns 0, or -EINVAL after logging one
 * "path:line: relabel_configs[i].key: what" line, or -ENOMEM. */
int relabel_config_parse(const char *path, yaml_document_t *d, yaml_node_t *node, struct relabel_config *ret);

/* Writes the rules as YAML block lines after a "relabel_configs:" key (" []"
 * when there are none), in a form relabel_config_parse reads back. */
void relabel_config_print(const struct relabel_config *c, FILE *f);

/* The label names the rules may create that are known ahead: target_label of
 * replace (without '$'), hashmod, lowercase and uppercase, and a labelmap
 * replacement without '$'. Up to max into ret; returns the number. */
size_t relabel_config_targets(const struct relabel_config *c, const char **ret, size_t max);

/* Whether any rule can drop a process (keep, drop, keepequal, dropequal). */
bool relabel_config_can_drop(const struct relabel_config *c);

/* Whether both lists hold the same rules. */
bool relabel_config_equal(const struct relabel_config *a, const struct relabel_config *b);

/* Frees what c owns and zeroes it; accepts a zeroed struct. */
void relabel_config_free(struct relabel_config *c);

#endif
