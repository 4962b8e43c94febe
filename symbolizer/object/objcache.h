/* objcache.h: the one cache of object files that the symbolizer and the unwinder share:
 * found by file identity, shared by copies with the same build id and content hash. */
#ifndef PROWL_OBJCACHE_H
#define PROWL_OBJCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lru.h"
#include "object.h"

/* One object: a file (or the vdso image) with its facts. Files that are
 * copies of each other (other paths, other containers' layers: same build id,
 * same content hash, same size) are one object with several identities.
 * Everything but the bookkeeping is fixed once the cache hands it out, so
 * users on any thread read it without a lock. */
struct object {
	uint32_t id;               /* dense, >= 1, never reused while the cache lives */
	char *path;                /* the path first seen, for messages */
	uint64_t size;             /* of its files (copies have the same), or of the image */
	bool image;                /* read from memory (the vdso), not from a file */
	/* Its files are trusted (trust.h): mapped, and shared by copies found by
	 * build id and content. An untrusted object is one file (one identity)
	 * read with pread(), found again only by opening it. */
	bool trusted;
	/* Set once (objcache_mark_broken()) when its file changed while it was
	 * read: nothing more is read from it, by any stage. Read it with
	 * object_broken(). */
	bool broken;
	struct obj_facts f;
	/* Under the cache's lock: */
	uint32_t refs;
	struct lru_link idle;      /* on the cache's idle list while refs == 0 */
	struct obj_ident *idents;  /* the files that are this object, first read first */
	uint32_t nidents, capidents;
	uint64_t *mkeys;           /* its keys in the index of mappings (dev, inode, path) */
	uint32_t nmkeys, capmkeys;
};

/* The cache holds every object somebody references, and up to
 * max_idle_bytes of objects nobody does (evicted least recently released
 * first). */
struct objcache_opts {
	size_t max_idle_bytes;     /* 0: 1 MiB */
};

struct objcache_stats {
	uint32_t objects, idle;    /* held; of those, referenced by nobody */
	uint64_t bytes;            /* memory they hold (structs, paths, loads, identities, index) */
	uint64_t lookups, hits;    /* objcache_get_*() calls; answered without opening a file */
	uint64_t reads;            /* files and images whose facts were read (copies too) */
	uint64_t copies;           /* files found to be copies of a known object */
	uint64_t evictions;        /* idle objects dropped for the budget */
	uint64_t broken;           /* objects whose file changed while they were read */
};

struct objcache;

int objcache_new(const struct objcache_opts *opts, struct objcache **ret);
/* The process-wide cache, created on first use; every caller gets a reference
 * and gives it back with objcache_unref(). NULL when out of memory. */
struct objcache *objcache_shared(void);
/* Another reference to c, for one more user (a symbolizer, an unwinder). */
struct objcache *objcache_ref(struct objcache *c);
void objcache_unref(struct objcache *c); /* accepts NULL */

/* The object of a file mapping (src names the process and the mapping). A
 * mapping of a (dev, ino, path) seen before of a trusted object is answered
 * from the cache without a system call; else the file is opened (obj_open()),
 * and read unless its identity (dev, ino, size, mtime, owner, mode) is known. The path is part of the key
 * because an inode number is reused once its file is deleted. When file is not NULL and the
 * file had to be opened, *file holds it open with its Elf begun (the caller
 * may take the Elf, and closes it with obj_file_close()); otherwise it is
 * OBJ_FILE_NONE. Returns 0 with a reference in *ret, or a negative errno
 * (the file cannot be opened: -ENOENT, -EACCES, -ESTALE...; -ENOMEM). */
int objcache_get(struct objcache *c, const struct obj_source *src, struct object **ret, struct obj_file *file);
/* The object of an ELF image in memory (the vdso), found by its content. */
int objcache_get_image(struct objcache *c, const void *image, size_t size, struct object **ret);
/* Opens o's file again through src for reading it: a file that is o (one of
 * its identities, or for a trusted o a trusted copy with its build id and
 * content hash, which then becomes one). Returns 0 with *file open and its Elf begun, -ESTALE when the
 * file at src is another one, or the error of opening it. */
int objcache_open(struct objcache *c, struct object *o, const struct obj_source *src, struct obj_file *file);
void object_unref(struct objcache *c, struct object *o); /* accepts NULL */
/* Marks o broken: its file changed (truncated, rewritten) while a stage read
 * it, so neither stage reads it again; its frames show as addresses. The
 * first call logs one warning naming the file and returns true. The cache
 * itself marks an untrusted object broken when it opens its file (same
 * device and inode) and finds another size or mtime. A file that changed has
 * another identity: a process that maps it anew gets a new object, read
 * afresh; the broken one stays what it was when read. */
bool objcache_mark_broken(struct objcache *c, struct object *o);
static inline bool object_broken(const struct object *o)
{
	return __atomic_load_n(&o->broken, __ATOMIC_ACQUIRE);
}

/* Gives c the on-disk cache d (freed with c, or when another replaces it). */
struct diskcache;
void objcache_set_disk(struct objcache *c, struct diskcache *d);
/* c's on-disk cache, or NULL. */
struct diskcache *objcache_disk(struct objcache *c);
/* The key of o's product of that kind in the on-disk cache; false when o may
 * not be cached: only a trusted file's identity (trust.h) cannot be forged by
 * another user. */
struct diskcache_key;
bool object_disk_key(const struct object *o, uint32_t kind, struct diskcache_key *ret);
void objcache_get_stats(struct objcache *c, struct objcache_stats *ret);

#endif
