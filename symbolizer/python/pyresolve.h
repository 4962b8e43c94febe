/* pyresolve.h: names sampled Python frames: a (code object, instruction) pair becomes a
 * qualified name, file and line, read once per code object (pycode.c) and cached. */
#ifndef PROWL_PYRESOLVE_H
#define PROWL_PYRESOLVE_H

#include <stdint.h>

#include <linux/types.h>
#include "prowl.h"
#include "maps_io.h"
#include "pycode.h"

struct py_resolver;

/* A Python frame as named. Strings live until the next py_resolver_frame(). */
struct py_frame_name {
	const char *function; /* qualified name */
	const char *file;
	int line, start_line;
};

int py_resolver_new(struct py_resolver **ret);
void py_resolver_free(struct py_resolver *r); /* accepts NULL */
/* Frames are read from the processes the sampler registered in its py_procs map,
 * read through io (maps_io.h); NULL, or no io->py_proc_get, turns them off. io
 * must outlive r's use of it. */
void py_resolver_set_io(struct py_resolver *r, const struct maps_io *io);
/* The name of Python frame f of process pid (registration gen, from the sample).
 * *ret_key names the (code object, line) pair for the life of r. On failure
 * returns a negative errno and *ret_why says why in a marker frame's words. */
int py_resolver_frame(struct py_resolver *r, uint32_t pid, uint32_t gen, const struct prowl_pyframe *f,
		      struct py_frame_name *ret, uint64_t *ret_key, const char **ret_why);
/* The code object cache's figures (all 0 before the first frame). */
void py_resolver_stats(const struct py_resolver *r, struct pycode_stats *ret);

#endif
