/* yamlnode.c: what the config sections that parse their own YAML lists (recording
 * rules, relabeling) share: the list walk, key checks and the "file:line: key: what" line. */
#include "yamlnode.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

int yaml_list_error(const char *path, unsigned long line, const char *section, long idx, const char *key,
		    const char *fmt, ...)
{
	char msg[768], where[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (idx < 0)
		snprintf(where, sizeof(where), "%s", section);
	else
		snprintf(where, sizeof(where), "%s[%ld]%s%s", section, idx, key ? "." : "", key ? key : "");
	log_error("%s:%lu: %s: %s", path, line, where, msg);
	return -EINVAL;
}

int yaml_item_key(const char *path, const char *section, long idx, yaml_document_t *d, yaml_node_t *map,
		  yaml_node_pair_t *p, const char *const *keys, size_t n)
{
	yaml_node_t *kn = yaml_document_get_node(d, p->key);
	char known[256] = "";
	const char *name;

	if (kn->type != YAML_SCALAR_NODE)
		return yaml_list_error(path, yaml_node_line(kn), section, idx, NULL, "a key must be a single word, not %s",
				       yaml_node_kind(kn));
	name = (const char *)kn->data.scalar.value;
	for (size_t k = 0; k < n; k++) {
		if (strcmp(keys[k], name) != 0)
			continue;
		for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
			yaml_node_t *prev = yaml_document_get_node(d, q->key);

			if (prev->type == YAML_SCALAR_NODE && strcmp((const char *)prev->data.scalar.value, name) == 0)
				return yaml_list_error(path, yaml_node_line(kn), section, idx, name,
						       "duplicate key (first at line %lu)", yaml_node_line(prev));
		}
		return (int)k;
	}
	for (size_t i = 0; i < n; i++)
		snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s", i ? ", " : "", keys[i]);
	return yaml_list_error(path, yaml_node_line(kn), section, idx, NULL, "unknown key '%.64s' (known: %s)", name,
			       known);
}

int yaml_parse_list(const char *path, const char *section, const char *what, yaml_document_t *d,
		    yaml_node_t *node, size_t max, size_t elem_size, yaml_item_fn fn, void **ret_items,
		    size_t *ret_n)
{
	size_t n;
	char *items;

	if (yaml_node_is_null(node))
		return 0;
	if (node->type != YAML_SEQUENCE_NODE)
		return yaml_list_error(path, yaml_node_line(node), section, -1, NULL, "expected a list of rules (%s), got %s",
				       what, yaml_node_kind(node));
	n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
	if (n > max)
		return yaml_list_error(path, yaml_node_line(node), section, -1, NULL, "too many rules: at most %zu", max);
	items = calloc(n ? n : 1, elem_size);
	if (!items)
		return log_error_errno(-ENOMEM, "cannot load the configuration");
	*ret_items = items;
	for (yaml_node_item_t *it = node->data.sequence.items.start; it < node->data.sequence.items.top; it++) {
		int rc = fn(path, (long)*ret_n, d, yaml_document_get_node(d, *it), items + *ret_n * elem_size);

		(*ret_n)++; /* counted even when half parsed, so that it is freed */
		if (rc < 0)
			return rc;
	}
	return 0;
}
