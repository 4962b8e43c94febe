/* extent.h: an allocator of contiguous index ranges ("extents") in a fixed-size array,
 * whose freed extents wait a grace period before reuse (a reader may still be on them). */
#ifndef PROWL_EXTENT_H
#define PROWL_EXTENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct extent {
	uint32_t start, len;
	uint64_t freed_ns; /* limbo only: CLOCK_MONOTONIC time of extent_defer() */
};

/* The unwinder's BPF arrays are carved with it: a BPF program may still read an
 * extent for a moment after user space dropped it, so a dropped extent is
 * deferred (limbo) and becomes free only grace_ns later. */
struct extent_space {
	struct extent *free;  /* sorted by start, coalesced: no two touch */
	size_t nfree, capfree;
	struct extent *limbo; /* deferred, in the order they were deferred */
	size_t nlimbo, caplimbo;
	uint64_t total, used; /* used counts allocated and deferred extents */
	uint64_t grace_ns;
};

/* [0, total) free. Returns 0 or -ENOMEM. */
int extent_init(struct extent_space *s, uint32_t total, uint64_t grace_ns);
void extent_fini(struct extent_space *s);
/* The first free extent of len (> 0) entries: its start in *ret. -ENOSPC when
 * no free extent is that long (limbo extents do not count). */
int extent_alloc(struct extent_space *s, uint32_t len, uint32_t *ret);
/* Frees [start, start + len) now, merging it with free neighbours. -ENOMEM
 * when the free list cannot grow: the range is then lost, nothing corrupted. */
int extent_release(struct extent_space *s, uint32_t start, uint32_t len);
/* Frees [start, start + len) after the grace period (at once when the limbo
 * list cannot grow: the race is tiny). len 0 does nothing. */
void extent_defer(struct extent_space *s, uint32_t start, uint32_t len);
/* Frees the deferred extents whose grace period is over; with wait, first
 * sleeps until all are. Returns how many were freed. */
size_t extent_reclaim(struct extent_space *s, bool wait);

#endif
