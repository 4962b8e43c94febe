/* namecache.h: the names of a runtime's sampled frames (function, file, line) by a hashed
 * key, at most a fixed count (it starts over when full), with its figures for /metrics. */
#ifndef PROWL_NAMECACHE_H
#define PROWL_NAMECACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "u64map.h"

struct name_entry {
	char *function, *file; /* malloc'ed; file may be NULL */
	int line;
	uint32_t chain; /* entries right after this one that go with it (a frame's inlined
			 * functions, put in one go after name_cache_room()) */
};

/* Zero-initialized with max set is a valid empty cache. */
struct name_cache {
	uint32_t max;          /* entries kept; the cache starts over when full */
	uint32_t n;
	struct u64map index;   /* key -> entries index + 1 */
	struct name_entry *entries;
	uint64_t bytes;        /* the entries' heap */
	uint64_t hits, misses, failures;
};

/* A frame as a namer hands it out: strings live as long as the cache entry (until the
 * namer's next call). */
struct frame_name {
	const char *function;
	const char *file; /* or NULL */
	int line;         /* 0: not known */
};

/* What a cache holds and did, for /metrics. */
struct name_cache_stats {
	uint64_t hits, misses, failures; /* lookups by whether cached; reads that got a marker */
	uint64_t entries;                /* names cached now */
	uint64_t bytes;                  /* their heap */
};

/* c's figures, with extra_bytes (what its owner keeps beside the names) added. */
void name_cache_stats(const struct name_cache *c, uint64_t extra_bytes, struct name_cache_stats *ret);

/* Mixes v into hash h (the keys: process, registration, address, identity...). */
uint64_t name_key_mix(uint64_t h, uint64_t v);

/* The entry of key, counting a hit or a miss; NULL when not cached. */
const struct name_entry *name_cache_get(struct name_cache *c, uint64_t key);
/* Keeps *e (its strings now the cache's) under key; returns the kept entry, or NULL
 * (-ENOMEM: e's strings are freed). */
const struct name_entry *name_cache_put(struct name_cache *c, uint64_t key, struct name_entry *e);
/* Makes room for n entries put in a row (a chain stays whole): starts over if needed. */
void name_cache_room(struct name_cache *c, uint32_t n);
void name_cache_clear(struct name_cache *c); /* forgets every entry (keeps max and the counts) */
void name_cache_free(struct name_cache *c);

#endif
