/* labelset.h: a small mutable set of name=value labels with Prometheus's rules
 * (setting "" deletes, a missing label reads as ""), used by discovery and relabeling. */
#ifndef PROWL_LABELSET_H
#define PROWL_LABELSET_H

#include <stdbool.h>
#include <stddef.h>

#define LABEL_NAME_MAX  128  /* bytes of a label name prowl keeps */
#define LABEL_VALUE_MAX 1024 /* bytes of a label value prowl keeps */

struct label {
	char *name;
	char *value;
};

/* Zero-initialized is an empty set. Insertion order is kept. */
struct labelset {
	struct label *v;
	size_t n, cap;
};

/* The value of name, or NULL when absent. */
const char *labelset_get(const struct labelset *s, const char *name);
/* The value of name, or "" when absent (Prometheus's reading). */
const char *labelset_value(const struct labelset *s, const char *name);
/* Sets name to value; an empty value deletes the label. Returns 0 or -ENOMEM. */
int labelset_set(struct labelset *s, const char *name, const char *value);
int labelset_setn(struct labelset *s, const char *name, const char *value, size_t vlen);
void labelset_del(struct labelset *s, const char *name);
/* Removes every label whose name starts with "__". */
void labelset_drop_internal(struct labelset *s);
/* Copies src into *ret (emptied first). */
int labelset_copy(struct labelset *ret, const struct labelset *src);
/* Sorts by name, so that equal sets compare and hash alike. */
void labelset_sort(struct labelset *s);
void labelset_clear(struct labelset *s);
void labelset_free(struct labelset *s); /* accepts an empty set */
size_t labelset_mem_bytes(const struct labelset *s);

/* Whether s is a legacy Prometheus label name: [a-zA-Z_][a-zA-Z0-9_]*. */
bool label_name_valid(const char *s, size_t len);

#endif
