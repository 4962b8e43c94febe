/* frame_cache.c: chained hash index over a slot array that grows up to the cap;
 * once full, every insert reuses the least recently used slot. */
#include "frame_cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define STRS_PER_FRAME 3

/* malloc's own per-allocation overhead, for the memory estimate. */
#define MALLOC_OVERHEAD 16

static uint32_t hash_key(uint32_t mod, uint64_t addr)
{
	uint64_t k = addr ^ ((uint64_t)mod * 0x9e3779b97f4a7c15ull);

	k ^= k >> 30;
	k *= 0xbf58476d1ce4e5b9ull;
	k ^= k >> 27;
	k *= 0x94d049bb133111ebull;
	k ^= k >> 31;
	return (uint32_t)k;
}

void frame_cache_init(struct frame_cache *c, uint32_t max)
{
	*c = (struct frame_cache){ .max = max ? max : 1 };
}

static void lru_unlink_idx(struct frame_cache *c, uint32_t i)
{
	struct fc_entry *x = &c->e[i];

	c->e[x->prev].next = x->next;
	c->e[x->next].prev = x->prev;
}

static void lru_push_head(struct frame_cache *c, uint32_t i)
{
	struct fc_entry *x = &c->e[i];

	x->prev = 0;
	x->next = c->e[0].next;
	c->e[x->next].prev = i;
	c->e[0].next = i;
}

const struct fc_entry *frame_cache_get(struct frame_cache *c, uint32_t mod, uint64_t addr)
{
	uint32_t i;

	if (!c->nbuckets)
		return NULL;
	for (i = c->buckets[hash_key(mod, addr) & (c->nbuckets - 1)]; i; i = c->e[i].hnext) {
		if (c->e[i].addr == addr && c->e[i].mod == mod) {
			if (c->e[0].next != i) {
				lru_unlink_idx(c, i);
				lru_push_head(c, i);
			}
			return &c->e[i];
		}
	}
	return NULL;
}

static void hash_insert(struct frame_cache *c, uint32_t i)
{
	uint32_t *b = &c->buckets[hash_key(c->e[i].mod, c->e[i].addr) & (c->nbuckets - 1)];

	c->e[i].hnext = *b;
	*b = i;
}

static void hash_remove(struct frame_cache *c, uint32_t i)
{
	uint32_t *p = &c->buckets[hash_key(c->e[i].mod, c->e[i].addr) & (c->nbuckets - 1)];

	while (*p != i)
		p = &c->e[*p].hnext;
	*p = c->e[i].hnext;
}

/* Makes room for one more entry below the cap: slots, and a bucket array at
 * least as large (load factor <= 1). On failure nothing that matters changed. */
static int grow(struct frame_cache *c)
{
	uint32_t alloc = c->alloc ? (c->alloc - 1) * 2 : 64, nb = c->nbuckets ? c->nbuckets : 64;
	struct fc_entry *e;

	if (alloc > c->max || alloc < c->alloc)
		alloc = c->max;
	alloc++; /* the sentinel */
	while (nb < alloc && nb < (1u << 31))
		nb *= 2;
	if (nb != c->nbuckets) {
		/* Buckets first: a failure after this only leaves them larger. */
		uint32_t *b = calloc(nb, sizeof(*b));

		if (!b)
			return -ENOMEM;
		free(c->buckets);
		c->buckets = b;
		c->nbuckets = nb;
		for (uint32_t i = 1; i <= c->count; i++)
			hash_insert(c, i);
	}
	e = realloc(c->e, (size_t)alloc * sizeof(*e));
	if (!e)
		return -ENOMEM;
	if (!c->alloc)
		e[0] = (struct fc_entry){ 0 }; /* prev = next = 0: an empty circle */
	c->e = e;
	c->alloc = alloc;
	return 0;
}

/* Copies frames and their strings into one allocation; equal strings (inlined
 * frames mostly share a file) are stored once. */
static int pack(const struct sym_frame *frames, size_t n, struct sym_frame **ret, uint32_t *ret_bytes)
{
	const char *src[SYM_MAX_INLINE * STRS_PER_FRAME];
	const char **dst[SYM_MAX_INLINE * STRS_PER_FRAME];
	int same[SYM_MAX_INLINE * STRS_PER_FRAME];
	size_t ns = 0, bytes = n * sizeof(*frames), pos;
	struct sym_frame *out;

	for (size_t i = 0; i < n; i++) {
		const char *f[STRS_PER_FRAME] = { frames[i].function, frames[i].system_name, frames[i].file };

		for (size_t k = 0; k < STRS_PER_FRAME; k++) {
			if (!f[k])
				continue;
			src[ns] = f[k];
			same[ns] = -1;
			for (size_t j = 0; j < ns && same[ns] < 0; j++)
				if (src[j] == f[k] || strcmp(src[j], f[k]) == 0)
					same[ns] = same[j] >= 0 ? same[j] : (int)j;
			if (same[ns] < 0)
				bytes += strlen(f[k]) + 1;
			ns++;
		}
	}
	if (bytes > UINT32_MAX)
		return -ENOMEM;
	out = malloc(bytes);
	if (!out)
		return -ENOMEM;
	memcpy(out, frames, n * sizeof(*frames));
	ns = 0;
	for (size_t i = 0; i < n; i++) {
		const char **f[STRS_PER_FRAME] = { &out[i].function, &out[i].system_name, &out[i].file };

		for (size_t k = 0; k < STRS_PER_FRAME; k++)
			if (*f[k])
				dst[ns++] = f[k];
	}
	pos = n * sizeof(*frames);
	for (size_t j = 0; j < ns; j++) {
		if (same[j] >= 0) {
			*dst[j] = *dst[same[j]];
			continue;
		}
		size_t len = strlen(src[j]) + 1;

		memcpy((char *)out + pos, src[j], len);
		*dst[j] = (char *)out + pos;
		pos += len;
	}
	*ret = out;
	*ret_bytes = (uint32_t)bytes;
	return 0;
}

int frame_cache_put(struct frame_cache *c, uint32_t mod, uint64_t addr, const struct sym_frame *frames, size_t n,
		    bool symbolized, const struct fc_entry **ret)
{
	struct sym_frame *blob;
	uint32_t bytes, i;
	int r;

	if (n == 0 || n > SYM_MAX_INLINE)
		return -EINVAL;
	if (c->count < c->max && c->count + 1 >= c->alloc) {
		r = grow(c);
		if (r < 0)
			return r;
	}
	r = pack(frames, n, &blob, &bytes);
	if (r < 0)
		return r;
	if (c->count < c->max) {
		i = ++c->count;
	} else {
		/* Full: reuse the least recently used slot. */
		i = c->e[0].prev;
		hash_remove(c, i);
		lru_unlink_idx(c, i);
		c->blob_bytes -= c->e[i].bytes;
		free(c->e[i].frames);
		c->evictions++;
	}
	c->e[i] = (struct fc_entry){
		.addr = addr,
		.mod = mod,
		.frames = blob,
		.bytes = bytes,
		.n = (uint16_t)n,
		.symbolized = symbolized,
	};
	c->blob_bytes += bytes;
	hash_insert(c, i);
	lru_push_head(c, i);
	if (ret)
		*ret = &c->e[i];
	return 0;
}

size_t frame_cache_mem_bytes(const struct frame_cache *c)
{
	return (size_t)c->alloc * sizeof(*c->e) + (size_t)c->nbuckets * sizeof(*c->buckets) + c->blob_bytes +
	       (size_t)c->count * MALLOC_OVERHEAD;
}

void frame_cache_free(struct frame_cache *c)
{
	for (uint32_t i = 1; i <= c->count; i++)
		free(c->e[i].frames);
	free(c->e);
	free(c->buckets);
	frame_cache_init(c, c->max);
}
