/* intern.h: an interning table that maps byte strings to dense ids 1..n, one of the
 * containers every stage shares: strings, functions, stacks, label sets, keys. */
#ifndef PROWL_INTERN_H
#define PROWL_INTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct intern;

/* Returns NULL on allocation failure. */
struct intern *intern_new(void);
void intern_free(struct intern *t); /* accepts NULL */
/* Drops every entry; ids restart at 1. Keeps allocated capacity. */
void intern_clear(struct intern *t);

/* Finds or adds key. On success returns 0, sets *ret_id (>= 1) and, if
 * ret_new is non-NULL, whether the key was added. -ENOMEM on failure. */
int intern_put(struct intern *t, const void *key, size_t len, uint32_t *ret_id, bool *ret_new);
/* Looks key up without adding; returns its id or 0. */
uint32_t intern_find(const struct intern *t, const void *key, size_t len);
/* Key bytes of id (1..count); valid until intern_clear/intern_free. */
const void *intern_key(const struct intern *t, uint32_t id, size_t *ret_len);
/* Number of entries; ids run 1..intern_count(). */
uint32_t intern_count(const struct intern *t);
/* Bytes of memory held (keys, index and bookkeeping). */
size_t intern_mem_bytes(const struct intern *t);

/* Convenience for NUL-terminated strings; the key excludes the NUL but one is
 * stored after it, so intern_str() returns a C string. */
int intern_put_str(struct intern *t, const char *s, uint32_t *ret_id);
const char *intern_str(const struct intern *t, uint32_t id);

uint64_t hash_bytes(const void *p, size_t len);

#endif
