/* yamlnode.h: small readers of libyaml document nodes shared by the config
 * sections that parse their own YAML (recording rules, relabeling). */
#ifndef PROWL_YAMLNODE_H
#define PROWL_YAMLNODE_H

#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

/* The 1-based line a node starts on. */
static inline unsigned long yaml_node_line(const yaml_node_t *n)
{
	return (unsigned long)n->start_mark.line + 1;
}

/* "a mapping", "a list" or "a single value", for messages. */
static inline const char *yaml_node_kind(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_MAPPING_NODE: return "a mapping";
	case YAML_SEQUENCE_NODE: return "a list";
	default: return "a single value";
	}
}

/* A plain ~, null or empty value. */
static inline bool yaml_node_is_null(const yaml_node_t *n)
{
	const char *s;

	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	s = (const char *)n->data.scalar.value;
	return !*s || strcmp(s, "~") == 0 || strcasecmp(s, "null") == 0;
}

/* Logs "path:line: section[idx].key: message" (just "section" when idx < 0, no
 * ".key" when key is NULL) as one error line and returns -EINVAL. */
int yaml_list_error(const char *path, unsigned long line, const char *section, long idx, const char *key,
		    const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* The index in keys[0..n) of the key of pair p in mapping map, an item of the
 * list section; logs one line and returns -EINVAL for a key that is not a word,
 * unknown (naming the known ones) or given twice. */
int yaml_item_key(const char *path, const char *section, long idx, yaml_document_t *d, yaml_node_t *map,
		  yaml_node_pair_t *p, const char *const *keys, size_t n);

/* Parses node, the value of section (a list, or null for none), into a calloc'ed
 * array of elem_size items (*ret_items, *ret_n), calling fn for each. what shows
 * the expected shape in the error, e.g. "- metric: ...". An item fn failed on is
 * still counted, so the caller frees it. Returns 0, fn's error, -EINVAL or -ENOMEM. */
typedef int (*yaml_item_fn)(const char *path, long idx, yaml_document_t *d, yaml_node_t *item, void *elem);
int yaml_parse_list(const char *path, const char *section, const char *what, yaml_document_t *d,
		    yaml_node_t *node, size_t max, size_t elem_size, yaml_item_fn fn, void **ret_items,
		    size_t *ret_n);

#endif
