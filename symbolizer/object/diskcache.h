/* diskcache.h: products derived from an object's content (unwind tables, inflated debug
 * files) kept on disk across restarts: root-only, bounded, every entry checked on load. */
#ifndef PROWL_DISKCACHE_H
#define PROWL_DISKCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "object.h"

/* What an entry holds; part of its key. */
enum diskcache_kind {
	/* 1: an unwind table with its header first (before the rows moved ahead) */
	DISKCACHE_INFLATED = 2, /* an object file with its debug sections inflated (inflate.h) */
	DISKCACHE_UNWIND = 3,   /* an unwind table's rows, then its header (table_cache.c) */
	DISKCACHE_KALLSYMS = 4, /* the kernel's symbol index (kallsyms_cache.c) */
};

/* Content identity of a trusted file as the object layer read it from the
 * file prowl opened (object_disk_key(): only root can have written it), never
 * a path. */
struct diskcache_key {
	uint32_t kind;
	uint32_t build_id_len;
	uint8_t build_id[OBJ_BUILD_ID_MAX];
	uint64_t content_hash, size;
};

struct diskcache_stats {
	uint64_t hits, misses, stores;
	uint64_t corrupt;   /* lookups whose entry failed its checks: removed (not misses) */
	uint64_t evicted;   /* entries removed to keep under the size bound */
	uint64_t bytes;     /* on disk now */
};

struct diskcache;

/* Opens (creating it 0700) the cache directory dir, of at most max_bytes.
 * -EPERM when dir is not a directory owned by this user (a symbolic link
 * included): nothing is cached then. */
int diskcache_open(const char *dir, uint64_t max_bytes, struct diskcache **ret);
void diskcache_free(struct diskcache *c);
/* The entry of k: 0 with *ret_data (malloc'ed) and *ret_len; -ENOENT when
 * there is none (or it failed its checks: it is removed, counted corrupt). */
int diskcache_get(struct diskcache *c, const struct diskcache_key *k, void **ret_data, size_t *ret_len);
/* Stores data as k's entry (replacing one), evicting the least recently
 * used entries beyond the bound. 0 or -errno (nothing stored). */
int diskcache_put(struct diskcache *c, const struct diskcache_key *k, const void *data, size_t len);
/* A descriptor of k's file entry (its bytes from offset 0, then a trailer that
 * ELF readers ignore), checked in full (crc32); -ENOENT when there is none or
 * it failed its checks (removed, counted corrupt). */
int diskcache_open_file(struct diskcache *c, const struct diskcache_key *k);
/* Keeps the unnamed file fd (O_TMPFILE, on the cache's filesystem) as k's
 * entry: appends the trailer and links it in. fd stays usable. */
int diskcache_keep_file(struct diskcache *c, const struct diskcache_key *k, int fd);
void diskcache_get_stats(struct diskcache *c, struct diskcache_stats *ret);

#endif
