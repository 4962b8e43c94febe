/* frame_cache.h: the bounded (module id, normalized address) -> frames cache with
 * exact LRU eviction; each entry owns one allocation holding its frames and strings. */
#ifndef PROWL_FRAME_CACHE_H
#define PROWL_FRAME_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sym_frame.h"

/* Decision: exact LRU through an intrusive doubly linked list of entry indexes
 * (O(1) touch on a hit, O(1) victim choice) rather than CLOCK: 8 bytes per
 * entry buy predictable behaviour, and a hit already costs a hash probe. */
struct fc_entry {
	uint64_t addr;
	uint32_t mod;             /* module id, >= 1 */
	uint32_t hnext;           /* next entry of the hash chain, 0 = end */
	uint32_t prev, next;      /* LRU order; index 0 is the sentinel (head) */
	struct sym_frame *frames; /* owned: frames[n], then their strings */
	uint32_t bytes;           /* size of that allocation */
	uint16_t n;
	bool symbolized;
};

/* Zero-initialized plus frame_cache_init() is a valid empty cache. */
struct frame_cache {
	struct fc_entry *e;       /* e[0] is the LRU sentinel; entries are 1..count */
	uint32_t count, alloc;    /* alloc counts the sentinel */
	uint32_t max;
	uint32_t *buckets;        /* entry index, 0 = empty */
	uint32_t nbuckets;        /* power of two, or 0 */
	uint64_t evictions;
	size_t blob_bytes;        /* sum of the entries' allocations */
};

void frame_cache_init(struct frame_cache *c, uint32_t max);
/* The entry of (mod, addr), now the most recently used, or NULL. The pointer
 * is valid until the next frame_cache_put(). */
const struct fc_entry *frame_cache_get(struct frame_cache *c, uint32_t mod, uint64_t addr);
/* Adds (mod, addr), which must not be present, copying frames[0..n) and their
 * strings; evicts the least recently used entry when the cache is full (its
 * strings are freed). n is 1..SYM_MAX_INLINE. On failure the cache is
 * unchanged. Returns 0 or -ENOMEM/-EINVAL. */
int frame_cache_put(struct frame_cache *c, uint32_t mod, uint64_t addr, const struct sym_frame *frames, size_t n,
		    bool symbolized, const struct fc_entry **ret);
size_t frame_cache_mem_bytes(const struct frame_cache *c);
void frame_cache_free(struct frame_cache *c);

#endif
