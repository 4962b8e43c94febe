/* v8name.h: names sampled JavaScript frames: a (SharedFunctionInfo, bytecode offset) pair
 * becomes function, script and line, read from the node process's heap, checked, cached. */
#ifndef PROWL_V8NAME_H
#define PROWL_V8NAME_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include "prowl.h"
#include "maps_io.h"
#include "namecache.h"

struct v8_namer;

#define V8_NAME_CACHE_MAX 16384 /* names kept; the cache starts over when full */
/* Names one frame gives at most: an optimized frame's inlined functions and its own
 * (v8inline.h's V8_INLINE_MAX; v8name.c checks that they agree). */
#define V8_FRAME_NAMES_MAX 16

int v8_namer_new(struct v8_namer **ret);
void v8_namer_free(struct v8_namer *r); /* accepts NULL */
/* Processes are looked up in the sampler's v8_procs map through io (NULL, or no
 * io->v8_proc_get, turns naming off). */
void v8_namer_set_io(struct v8_namer *r, const struct maps_io *io);
/* The names of JavaScript frame f of process pid (registration gen, from the sample)
 * into ret[0..*ret_n) (at most cap): a frame of optimized code at pc (its instruction; a
 * caller's return address minus one) gets the functions inlined there innermost first,
 * its own function last; other frames one name (the function's, "(anonymous)" when it has
 * none; the script's; the line). *ret_key names the result for the namer's life. On
 * failure returns a negative errno and *ret_why is a marker frame's text. */
int v8_namer_frame(struct v8_namer *r, uint32_t pid, uint32_t gen, const struct prowl_jframe *f, uint64_t pc,
		   struct frame_name *ret, size_t cap, size_t *ret_n, uint64_t *ret_key, const char **ret_why);
/* Its figures; bytes include the scripts' line tables. */
void v8_namer_stats(const struct v8_namer *r, struct name_cache_stats *ret);

#endif
