/* u64map.c: linear probing over a power-of-two slot array with backward-shift
 * deletion, so lookups never wade through tombstones. */
#include "u64map.h"

#include <errno.h>
#include <stdlib.h>

static uint32_t slot_of(uint64_t key, uint32_t mask)
{
	/* splitmix64 finalizer: keys are pids and code addresses, both clustered. */
	key ^= key >> 30;
	key *= 0xbf58476d1ce4e5b9ull;
	key ^= key >> 27;
	key *= 0x94d049bb133111ebull;
	key ^= key >> 31;
	return (uint32_t)key & mask;
}

static int grow(struct u64map *m)
{
	uint32_t ncap = m->cap ? m->cap * 2 : 16, mask = ncap - 1;
	struct u64map_slot *ns;

	if (ncap == 0)
		return -ENOMEM;
	ns = calloc(ncap, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->cap; i++) {
		uint32_t j;

		if (!m->slots[i].used)
			continue;
		j = slot_of(m->slots[i].key, mask);
		while (ns[j].used)
			j = (j + 1) & mask;
		ns[j] = m->slots[i];
	}
	free(m->slots);
	m->slots = ns;
	m->cap = ncap;
	return 0;
}

static bool find(const struct u64map *m, uint64_t key, uint32_t *ret_slot)
{
	uint32_t mask = m->cap - 1, i = slot_of(key, mask);

	for (;;) {
		if (!m->slots[i].used) {
			*ret_slot = i;
			return false;
		}
		if (m->slots[i].key == key) {
			*ret_slot = i;
			return true;
		}
		i = (i + 1) & mask;
	}
}

int u64map_put(struct u64map *m, uint64_t key, uint64_t val)
{
	uint32_t i;
	int r;

	if ((uint64_t)(m->count + 1) * 4 > (uint64_t)m->cap * 3) {
		r = grow(m);
		if (r < 0)
			return r;
	}
	if (!find(m, key, &i)) {
		m->slots[i].used = true;
		m->slots[i].key = key;
		m->count++;
	}
	m->slots[i].val = val;
	return 0;
}

bool u64map_get(const struct u64map *m, uint64_t key, uint64_t *ret_val)
{
	uint32_t i;

	if (!m->cap || !find(m, key, &i))
		return false;
	if (ret_val)
		*ret_val = m->slots[i].val;
	return true;
}

bool u64map_del(struct u64map *m, uint64_t key)
{
	uint32_t mask = m->cap - 1, i, j;

	if (!m->cap || !find(m, key, &i))
		return false;
	/* Shift later members of the probe run back into the hole when their home
	 * slot is not between the hole and their current position. */
	j = i;
	for (;;) {
		uint32_t home;

		j = (j + 1) & mask;
		if (!m->slots[j].used)
			break;
		home = slot_of(m->slots[j].key, mask);
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->slots[i] = m->slots[j];
			i = j;
		}
	}
	m->slots[i].used = false;
	m->count--;
	return true;
}

bool u64map_next(const struct u64map *m, uint32_t *pos, uint64_t *ret_key, uint64_t *ret_val)
{
	for (uint32_t i = *pos; i < m->cap; i++) {
		if (!m->slots[i].used)
			continue;
		if (ret_key)
			*ret_key = m->slots[i].key;
		if (ret_val)
			*ret_val = m->slots[i].val;
		*pos = i + 1;
		return true;
	}
	*pos = m->cap;
	return false;
}

size_t u64map_mem_bytes(const struct u64map *m)
{
	return (size_t)m->cap * sizeof(*m->slots);
}

void u64map_free(struct u64map *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->count = 0;
}
