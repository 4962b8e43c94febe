/* intern.c: open-addressing hash index over an append-only key arena.
 * Memory grows with the number of distinct keys, never with lookups. */
#include "intern.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Arena chunks start small and double up to ARENA_CHUNK_MAX, so that the many
 * small tables of a quiet series cost a few KiB, not a quarter MiB each. */
#define ARENA_CHUNK_MIN (1u * 1024u)
#define ARENA_CHUNK_MAX (256u * 1024u)

struct entry {
	const unsigned char *key; /* points into an arena chunk; NUL stored after it */
	uint32_t len;
	uint32_t hash32;
};

struct chunk {
	struct chunk *next;
	size_t used, cap;
	unsigned char data[];
};

struct intern {
	struct entry *entries; /* entries[0] unused; ids index this */
	uint32_t count, entries_cap;
	uint32_t *slots; /* 0 = empty, else id */
	uint32_t nslots; /* power of two */
	struct chunk *chunks;
	size_t arena_bytes;
};

uint64_t hash_bytes(const void *p, size_t len)
{
	/* FNV-1a over 8-byte words with a final avalanche; fast and good enough for
	 * an index whose keys are not chosen by an adversary. */
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ull ^ (len * 0x9e3779b97f4a7c15ull);
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, b + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

struct intern *intern_new(void)
{
	struct intern *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->nslots = 16;
	t->slots = calloc(t->nslots, sizeof(*t->slots));
	t->entries_cap = 8;
	t->entries = calloc(t->entries_cap, sizeof(*t->entries));
	if (!t->slots || !t->entries) {
		intern_free(t);
		return NULL;
	}
	return t;
}

static void free_chunks(struct chunk *c)
{
	while (c) {
		struct chunk *n = c->next;
		free(c);
		c = n;
	}
}

void intern_free(struct intern *t)
{
	if (!t)
		return;
	free_chunks(t->chunks);
	free(t->slots);
	free(t->entries);
	free(t);
}

void intern_clear(struct intern *t)
{
	/* Keep the first chunk to avoid churn at every export window. */
	if (t->chunks) {
		free_chunks(t->chunks->next);
		t->chunks->next = NULL;
		t->chunks->used = 0;
		t->arena_bytes = t->chunks->cap;
	}
	/* Shrink an index that the last round used less than an eighth of, so one
	 * busy window does not pin its memory for the table's whole life. */
	if (t->nslots > 64 && (uint64_t)t->count * 8 < t->nslots) {
		uint32_t n = 16;
		uint32_t *s;

		while ((uint64_t)n * 3 < (uint64_t)t->count * 4 * 2)
			n *= 2;
		s = calloc(n, sizeof(*s));
		if (s) {
			free(t->slots);
			t->slots = s;
			t->nslots = n;
		}
		if (t->entries_cap > 2 * n) {
			struct entry *e = realloc(t->entries, n * sizeof(*e));

			if (e) {
				t->entries = e;
				t->entries_cap = n;
			}
		}
	}
	memset(t->slots, 0, t->nslots * sizeof(*t->slots));
	t->count = 0;
}

static unsigned char *arena_alloc(struct intern *t, size_t n)
{
	struct chunk *c = t->chunks;

	if (!c || c->cap - c->used < n) {
		size_t cap = c ? c->cap * 2 : ARENA_CHUNK_MIN;

		if (cap > ARENA_CHUNK_MAX)
			cap = ARENA_CHUNK_MAX;
		if (cap < n)
			cap = n;

		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->cap = cap;
		c->used = 0;
		c->next = t->chunks;
		t->chunks = c;
		t->arena_bytes += cap;
	}
	c->used += n;
	return c->data + c->used - n;
}

static int grow_slots(struct intern *t)
{
	uint32_t n = t->nslots * 2, mask = n - 1;
	uint32_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (uint32_t id = 1; id <= t->count; id++) {
		uint32_t i = t->entries[id].hash32 & mask;

		while (s[i])
			i = (i + 1) & mask;
		s[i] = id;
	}
	free(t->slots);
	t->slots = s;
	t->nslots = n;
	return 0;
}

static uint32_t lookup(const struct intern *t, const void *key, size_t len, uint32_t h, uint32_t *ret_slot)
{
	uint32_t mask = t->nslots - 1, i = h & mask;

	for (;;) {
		uint32_t id = t->slots[i];

		if (!id) {
			*ret_slot = i;
			return 0;
		}
		const struct entry *e = &t->entries[id];
		if (e->hash32 == h && e->len == len && memcmp(e->key, key, len) == 0)
			return id;
		i = (i + 1) & mask;
	}
}

int intern_put(struct intern *t, const void *key, size_t len, uint32_t *ret_id, bool *ret_new)
{
	uint32_t h, slot, id;
	unsigned char *copy;

	if (len > UINT32_MAX - 1)
		return -EINVAL; /* checked before hash_bytes() reads len bytes */
	h = (uint32_t)hash_bytes(key, len);
	id = lookup(t, key, len, h, &slot);
	if (id) {
		*ret_id = id;
		if (ret_new)
			*ret_new = false;
		return 0;
	}
	if ((uint64_t)(t->count + 1) * 4 >= (uint64_t)t->nslots * 3) {
		if (grow_slots(t) < 0)
			return -ENOMEM;
		lookup(t, key, len, h, &slot);
	}
	if (t->count + 1 >= t->entries_cap) {
		uint32_t cap = t->entries_cap * 2;
		struct entry *e = realloc(t->entries, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		t->entries = e;
		t->entries_cap = cap;
	}
	copy = arena_alloc(t, len + 1);
	if (!copy)
		return -ENOMEM;
	if (len)
		memcpy(copy, key, len);
	copy[len] = 0;
	id = ++t->count;
	t->entries[id] = (struct entry){ .key = copy, .len = (uint32_t)len, .hash32 = h };
	t->slots[slot] = id;
	*ret_id = id;
	if (ret_new)
		*ret_new = true;
	return 0;
}

uint32_t intern_find(const struct intern *t, const void *key, size_t len)
{
	uint32_t slot;

	return lookup(t, key, len, (uint32_t)hash_bytes(key, len), &slot);
}

const void *intern_key(const struct intern *t, uint32_t id, size_t *ret_len)
{
	if (id == 0 || id > t->count)
		return NULL;
	if (ret_len)
		*ret_len = t->entries[id].len;
	return t->entries[id].key;
}

uint32_t intern_count(const struct intern *t) { return t->count; }

size_t intern_mem_bytes(const struct intern *t)
{
	return sizeof(*t) + t->arena_bytes + (size_t)t->nslots * sizeof(*t->slots) +
	       (size_t)t->entries_cap * sizeof(*t->entries);
}

int intern_put_str(struct intern *t, const char *s, uint32_t *ret_id)
{
	return intern_put(t, s, strlen(s), ret_id, NULL);
}

const char *intern_str(const struct intern *t, uint32_t id)
{
	return intern_key(t, id, NULL);
}
