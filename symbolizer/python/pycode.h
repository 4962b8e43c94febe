/* pycode.h: the resolve stage for Python frames. Reads a CPython code object (qualified
 * name, file, first line, line table) from its process and caches it, bounded. */
#ifndef PROWL_PYCODE_H
#define PROWL_PYCODE_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include "prowl.h"

struct pycode_cache;

/* One code object as read. Valid until the next pycode_get() (which may evict it). */
struct pycode {
	uint64_t id;          /* unique for the cache's life: never reused by another code object */
	const char *qualname; /* "Class.method", "<module>", "outer.<locals>.inner" */
	const char *filename;
	int firstlineno;
	const uint8_t *linetable; /* co_linetable (co_lnotab before 3.10) */
	size_t linetable_len;
	uint8_t lines;            /* its format: enum py_lines (pyversions.h) */
};

struct pycode_stats {
	uint64_t hits, misses, evictions;
	uint64_t read_errors; /* code objects that could not be read (gone, garbled) */
	uint32_t entries;
	uint64_t bytes;       /* heap held by the entries */
};

/* max_entries / max_bytes: 0 picks 16384 entries / 16 MiB. */
int pycode_cache_new(uint32_t max_entries, uint64_t max_bytes, struct pycode_cache **ret);
void pycode_cache_free(struct pycode_cache *c); /* accepts NULL */

/* The code object at `code` in process pid, registered as pp (gen: its
 * registration, which an exec changes), that BPF saw with co_firstlineno
 * firstlineno. Returns 0, -ESRCH (the process is gone), -EFAULT (unreadable
 * memory) or -EBADMSG (not a code object of that interpreter, or it changed).
 * pp NULL: only the cache is looked at (-EAGAIN on a miss). */
int pycode_get(struct pycode_cache *c, uint32_t pid, uint32_t gen, const struct prowl_py_proc *pp, uint64_t code,
	       int32_t firstlineno, const struct pycode **ret);

/* The source line of instruction index lasti (code units from the first
 * instruction) per the code object's line table; 0 when it has none. */
int pycode_line(const struct pycode *co, uint32_t lasti);

void pycode_get_stats(const struct pycode_cache *c, struct pycode_stats *ret);

#endif
