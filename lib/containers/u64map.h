/* u64map.h: a small open-addressing hash map from 64-bit keys to 64-bit values (pids,
 * object ids, hashed keys -> pointers), one of the containers every stage shares. */
#ifndef PROWL_U64MAP_H
#define PROWL_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct u64map_slot {
	uint64_t key;
	uint64_t val;
	bool used;
};

/* Zero-initialized is a valid empty map. */
struct u64map {
	struct u64map_slot *slots;
	uint32_t cap; /* power of two, or 0 */
	uint32_t count;
};

/* Inserts or replaces. Returns 0 or -ENOMEM. */
int u64map_put(struct u64map *m, uint64_t key, uint64_t val);
/* Returns true and sets *ret_val (if non-NULL) when key is present. */
bool u64map_get(const struct u64map *m, uint64_t key, uint64_t *ret_val);
/* Returns true when key was present and is now removed. */
bool u64map_del(struct u64map *m, uint64_t key);
/* Iteration: returns the next used slot index >= *pos, or false at the end. */
bool u64map_next(const struct u64map *m, uint32_t *pos, uint64_t *ret_key, uint64_t *ret_val);
size_t u64map_mem_bytes(const struct u64map *m);
void u64map_free(struct u64map *m);

#endif
