/* rules_fcache.c: the recording rules' function cache: name -> bits of the function
 * rules that match it, bounded in names and bytes, the least recently used name evicted
 * first, but never one used in the current window (so a flood of names cannot flush it). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rules_priv.h"

struct fentry {
	struct lru_link lru;
	struct fentry *next;   /* same hash */
	uint64_t hash;
	uint64_t used;         /* the window it was last used in */
	uint32_t len;
	uint64_t bits[];       /* nwords words, then the name's len bytes */
};

static size_t entry_size(const struct rules_fcache *c, size_t len)
{
	return sizeof(struct fentry) + c->nwords * sizeof(uint64_t) + len;
}

static const char *entry_name(const struct rules_fcache *c, const struct fentry *e)
{
	return (const char *)(e->bits + c->nwords);
}

void rules_fcache_init(struct rules_fcache *c, size_t nwords, uint32_t max_names, size_t max_bytes)
{
	*c = (struct rules_fcache){ .nwords = nwords, .max_names = max_names, .max_bytes = max_bytes };
	lru_init(&c->lru);
}

static void drop(struct rules_fcache *c, struct fentry *e)
{
	uint64_t head = 0;
	struct fentry *first;

	u64map_get(&c->index, e->hash, &head);
	first = (struct fentry *)(uintptr_t)head;
	if (first == e) {
		first = e->next;
	} else {
		struct fentry *q = first;

		while (q->next != e)
			q = q->next;
		q->next = e->next;
	}
	if (first)
		u64map_put(&c->index, e->hash, (uint64_t)(uintptr_t)first); /* replaces: cannot fail */
	else
		u64map_del(&c->index, e->hash);
	lru_unlink(&e->lru);
	c->bytes -= entry_size(c, e->len);
	c->count--;
	free(e);
}

void rules_fcache_free(struct rules_fcache *c)
{
	while (!lru_empty(&c->lru))
		drop(c, lru_entry(lru_tail(&c->lru), struct fentry, lru));
	u64map_free(&c->index);
}

const uint64_t *rules_fcache_find(struct rules_fcache *c, const char *name, size_t len)
{
	uint64_t v;

	if (!u64map_get(&c->index, hash_bytes(name, len), &v))
		return NULL;
	for (struct fentry *e = (struct fentry *)(uintptr_t)v; e; e = e->next)
		if (e->len == len && memcmp(entry_name(c, e), name, len) == 0) {
			lru_touch(&c->lru, &e->lru);
			e->used = c->window;
			return e->bits;
		}
	return NULL;
}

int rules_fcache_add(struct rules_fcache *c, const char *name, size_t len, const uint64_t *bits)
{
	size_t size = entry_size(c, len);
	uint64_t head = 0, hash = hash_bytes(name, len);
	struct fentry *e;

	while (c->count && (c->count >= c->max_names || c->bytes + size > c->max_bytes)) {
		struct fentry *victim = lru_entry(lru_tail(&c->lru), struct fentry, lru);

		/* Every name left was used in this window: this one is not kept, rather
		 * than have names that come every window push each other out. */
		if (victim->used == c->window) {
			c->refused++;
			return 0;
		}
		drop(c, victim);
		c->evictions++;
	}
	if (size > c->max_bytes) {
		c->refused++;
		return 0;
	}
	e = malloc(size);
	if (!e)
		return -ENOMEM;
	*e = (struct fentry){ .hash = hash, .used = c->window, .len = (uint32_t)len };
	memcpy(e->bits, bits, c->nwords * sizeof(uint64_t));
	memcpy(e->bits + c->nwords, name, len);
	u64map_get(&c->index, hash, &head);
	e->next = (struct fentry *)(uintptr_t)head;
	if (u64map_put(&c->index, hash, (uint64_t)(uintptr_t)e) < 0) {
		free(e);
		return -ENOMEM;
	}
	lru_touch(&c->lru, &e->lru);
	c->bytes += size;
	c->count++;
	return 0;
}

size_t rules_fcache_mem_bytes(const struct rules_fcache *c)
{
	return c->bytes + u64map_mem_bytes(&c->index);
}
