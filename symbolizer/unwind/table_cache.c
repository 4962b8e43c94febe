/* table_cache.c: an object's unwind table kept in the on-disk cache (diskcache.h), so that
 * a restart loads the rows instead of reading the CFI again; checked before it is used. */
#include "table_cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "diskcache.h"
#include "objcache.h"

/* The entry: n rows, then this trailer (rows first: the buffer read from the
 * cache is the table itself, with no second copy). */
struct cached_table {
	uint64_t base, n;
	struct unwind_table_stats st;
};

int unwind_table_cached(struct diskcache *dc, const struct object *o, struct unwind_table *ret)
{
	struct diskcache_key k;
	struct cached_table h;
	struct prowl_unwind_row *rows;
	void *data;
	size_t len;
	int r;

	if (!dc || !object_disk_key(o, DISKCACHE_UNWIND, &k))
		return -ENOENT;
	r = diskcache_get(dc, &k, &data, &len);
	if (r < 0)
		return r;
	memset(ret, 0, sizeof(*ret));
	if (len < sizeof(h))
		goto bad;
	memcpy(&h, (char *)data + len - sizeof(h), sizeof(h));
	if (h.n > (len - sizeof(h)) / sizeof(*rows) || len != sizeof(h) + h.n * sizeof(*rows))
		goto bad;
	rows = data;
	/* BPF's binary search needs rows sorted by pc. */
	for (uint64_t i = 1; i < h.n; i++)
		if (rows[i].pc <= rows[i - 1].pc)
			goto bad;
	ret->rows = rows;
	ret->n = ret->cap = h.n;
	ret->base = h.base;
	ret->st = h.st;
	return 0;
bad:
	free(data);
	return -ENOENT;
}

void unwind_table_keep(struct diskcache *dc, const struct object *o, const struct unwind_table *t)
{
	struct diskcache_key k;
	struct cached_table h = { .base = t->base, .n = t->n, .st = t->st };
	size_t rows = t->n * sizeof(*t->rows);
	char *buf;

	if (!dc || !object_disk_key(o, DISKCACHE_UNWIND, &k))
		return;
	buf = malloc(rows + sizeof(h));
	if (!buf)
		return;
	if (rows)
		memcpy(buf, t->rows, rows);
	memcpy(buf + rows, &h, sizeof(h));
	diskcache_put(dc, &k, buf, rows + sizeof(h));
	free(buf);
}
