/* pymerge.h: puts a sample's Python frames into its native stack, where the interpreter's
 * eval loop ran them; the resolve stage supplies the locations (struct py_sink). */
#ifndef PROWL_PYMERGE_H
#define PROWL_PYMERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include "prowl.h"
#include "pyresolve.h"

/* The resolve stage's side: location ids for what the merge puts in a stack. */
struct py_sink {
	void *ctx;
	/* A Python frame named name; key names its (code object, line) for the
	 * resolver's life, so one key is one location. */
	int (*frame)(void *ctx, const struct py_frame_name *name, uint64_t key, uint32_t *ret);
	/* A marker frame with text why: a Python stack that stops short. */
	int (*marker)(void *ctx, const char *why, uint32_t *ret);
};

/* Whether a native function is the interpreter's eval loop, whose activations
 * the Python frames take the place of. */
bool py_is_eval_function(const char *function);

/* Native user frame loc of sample s (is_eval: its function is the eval loop),
 * with the Python frames merged in: an eval-loop frame becomes the Python
 * frames its activation ran (up to the entry frame), s->pystack from *py_i on.
 * Appends to locs at *n; *stop when the stack ends here (a marker took the
 * place of frames that are missing). */
int py_merge_frame(struct py_resolver *r, const struct py_sink *k, const struct prowl_sample *s, uint32_t loc,
		   bool is_eval, unsigned int *py_i, uint32_t *locs, size_t *n, bool *stop);
/* After the native frames: the Python frames from py_i on that no eval-loop
 * activation was left for (the native stack was cut short), appended at *n;
 * then, when the Python stack was cut short too, its marker, and *stop. */
int py_merge_rest(struct py_resolver *r, const struct py_sink *k, const struct prowl_sample *s, unsigned int py_i,
		  uint32_t *locs, size_t *n, bool *stop);

#endif
