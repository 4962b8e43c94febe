/* table_cache.h: an object's unwind table kept in the on-disk cache across restarts
 * (only for trusted files: object_disk_key()). */
#ifndef PROWL_TABLE_CACHE_H
#define PROWL_TABLE_CACHE_H

#include "unwind_table.h"

struct diskcache;
struct object;

/* o's table from dc: 0 with *ret filled (free it with unwind_table_free()),
 * -ENOENT when there is none or it does not check out (build it), -ENOMEM. */
int unwind_table_cached(struct diskcache *dc, const struct object *o, struct unwind_table *ret);
/* Stores t as o's table in dc, when o may be cached; errors leave no entry. */
void unwind_table_keep(struct diskcache *dc, const struct object *o, const struct unwind_table *t);

#endif
