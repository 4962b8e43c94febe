/* pymerge.c: puts a sample's Python frames into its native stack, where the interpreter's
 * eval loop ran them, and says with a marker where a Python stack stops short. */
#include "pymerge.h"

#include <errno.h>
#include <string.h>

bool py_is_eval_function(const char *function)
{
	return strcmp(function, "_PyEval_EvalFrameDefault") == 0;
}

static unsigned int py_frames(const struct prowl_sample *s)
{
	return s->pystack_len < PROWL_MAX_PY ? s->pystack_len : PROWL_MAX_PY;
}

/* The location of Python frame f of s: its name, or a marker saying why not. */
static int py_location(struct py_resolver *r, const struct py_sink *k, const struct prowl_sample *s,
		       const struct prowl_pyframe *f, uint32_t *ret)
{
	struct py_frame_name name;
	const char *why = NULL;
	uint64_t key;
	int e;

	e = py_resolver_frame(r, s->pid, s->pygen, f, &name, &key, &why);
	if (e == -ENOMEM)
		return e;
	if (e < 0)
		return k->marker(k->ctx, why, ret);
	return k->frame(k->ctx, &name, key, ret);
}

static const char *python_cut(unsigned int reason)
{
	switch (reason) {
	case PROWL_PY_DEPTH:
		return "[truncated: Python stack deeper than 128 frames]";
	case PROWL_PY_NO_THREAD:
		return "[truncated: no Python thread state for this thread (starting or tearing down)]";
	case PROWL_PY_READ:
		return "[truncated: Python frames unreadable]";
	default:
		return "[truncated: Python frames missing]";
	}
}

int py_merge_frame(struct py_resolver *r, const struct py_sink *k, const struct prowl_sample *s, uint32_t loc,
		   bool is_eval, unsigned int *py_i, uint32_t *locs, size_t *n, bool *stop)
{
	unsigned int pn = py_frames(s);
	size_t before = *n;
	bool ended = false;
	int e;

	if (!is_eval || (!pn && !s->pyreason)) {
		locs[(*n)++] = loc;
		return 0;
	}
	while (*py_i < pn) {
		const struct prowl_pyframe *f = &s->pystack[(*py_i)++];

		e = py_location(r, k, s, f, &locs[*n]);
		if (e < 0)
			return e;
		(*n)++;
		if (f->lasti & PROWL_PYF_ENTRY) {
			ended = true;
			break;
		}
	}
	if (*n > before && (ended || !s->pyreason))
		return 0;
	/* No Python frames left for this activation. */
	if (*n == before && !s->pyreason) {
		locs[(*n)++] = loc;
		return 0;
	}
	e = k->marker(k->ctx, python_cut(s->pyreason), &locs[*n]);
	if (e < 0)
		return e;
	(*n)++;
	*stop = true;
	return 0;
}

int py_merge_rest(struct py_resolver *r, const struct py_sink *k, const struct prowl_sample *s, unsigned int py_i,
		  uint32_t *locs, size_t *n, bool *stop)
{
	unsigned int pn = py_frames(s);
	int e;

	for (; py_i < pn; py_i++) {
		e = py_location(r, k, s, &s->pystack[py_i], &locs[*n]);
		if (e < 0)
			return e;
		(*n)++;
	}
	/* The Python stack was cut short too (3.6-3.10's deep recursion fills the
	 * native stack first): its own marker says where and why. */
	if (!pn || !s->pyreason)
		return 0;
	e = k->marker(k->ctx, python_cut(s->pyreason), &locs[*n]);
	if (e < 0)
		return e;
	(*n)++;
	*stop = true;
	return 0;
}
