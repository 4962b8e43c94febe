/* namecache.c: a bounded cache of frame names (Java's, JavaScript's) by hashed key: an array
 * of entries indexed by a u64map, emptied at once when full (names are cheap to read again). */
#include "namecache.h"

#include <stdlib.h>
#include <string.h>

uint64_t name_key_mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xbf58476d1ce4e5b9ull;
}

const struct name_entry *name_cache_get(struct name_cache *c, uint64_t key)
{
	uint64_t v;

	if (u64map_get(&c->index, key, &v)) {
		c->hits++;
		return &c->entries[v - 1];
	}
	c->misses++;
	return NULL;
}

void name_cache_clear(struct name_cache *c)
{
	for (uint32_t i = 0; i < c->n; i++) {
		free(c->entries[i].function);
		free(c->entries[i].file);
	}
	c->n = 0;
	c->bytes = 0;
	u64map_free(&c->index);
}

void name_cache_room(struct name_cache *c, uint32_t n)
{
	if (c->n + (uint64_t)n > c->max)
		name_cache_clear(c);
}

const struct name_entry *name_cache_put(struct name_cache *c, uint64_t key, struct name_entry *e)
{
	if (c->n >= c->max)
		name_cache_clear(c);
	if (!c->entries && !(c->entries = calloc(c->max, sizeof(*c->entries)))) {
		free(e->function);
		free(e->file);
		return NULL;
	}
	if (u64map_put(&c->index, key, c->n + 1) < 0) {
		free(e->function);
		free(e->file);
		return NULL;
	}
	c->entries[c->n] = *e;
	c->bytes += sizeof(*e) + strlen(e->function) + 1 + (e->file ? strlen(e->file) + 1 : 0);
	return &c->entries[c->n++];
}

void name_cache_stats(const struct name_cache *c, uint64_t extra_bytes, struct name_cache_stats *ret)
{
	*ret = (struct name_cache_stats){ .hits = c->hits, .misses = c->misses, .failures = c->failures,
					  .entries = c->n, .bytes = c->bytes + extra_bytes };
}

void name_cache_free(struct name_cache *c)
{
	name_cache_clear(c);
	free(c->entries);
	c->entries = NULL;
}
