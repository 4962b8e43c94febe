/* view.h: what report and diff show: a call tree merged by function name from one
 * or two profiles (sides), and per-function self and total samples on each side. */
#ifndef PROWL_VIEW_H
#define PROWL_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct profile;
struct intern;

enum { VIEW_BASE = 0, VIEW_NEW = 1 };

/* Frames that say nothing about the program's code (docs/report.md, "Left out of the gate"). */
enum view_apart {
	VIEW_CODE = 0,        /* a function of the program, the libraries or the kernel's work for it */
	VIEW_MARKER,          /* prowl's marker frames, in the PROF_MARKER_MAPPING mapping */
	VIEW_KERNEL_EXIT,     /* the kernel in an interrupt or on its way back to user mode */
};

struct view_func {
	uint32_t name, file;   /* string ids (view_str); file 0 when unknown */
	bool is_process;       /* a process pseudo-frame, not a function */
	int64_t self[2], total[2]; /* total counts a sample once however often the function recurs */
	int64_t code[2];       /* samples with it in a VIEW_CODE frame (the rest: in `apart` frames) */
	uint8_t apart;         /* enum view_apart of its other frames */
	uint64_t seen, seen_code; /* internal: last sample that counted total, code */
};

/* Node 0 is the root; a node is a function called from its parent's path. */
struct view_node {
	uint32_t parent, func;
	int64_t total[2], self[2];
	int64_t line;          /* the line most samples in this node were at (0: unknown) */
	int64_t line_weight;   /* internal */
	uint32_t first_child, next_sibling; /* after view_finish(): by function name */
};

struct view {
	struct intern *strs;
	struct intern *func_keys;
	struct intern *child_keys;
	struct view_func *funcs;   /* 1..nfuncs */
	struct view_node *nodes;   /* 0..nnodes-1 */
	uint32_t nfuncs, nnodes, funcs_cap, nodes_cap;
	int64_t total[2];
	int nsides;
	bool process_roots;
	uint64_t serial;
	uint32_t max_depth;
};

/* process_roots: put each sample under a frame named after its process_name label. */
int view_new(bool process_roots, struct view **ret);
void view_free(struct view *v); /* accepts NULL */
/* True when the samples of these profiles come from more than one process. */
bool view_profiles_multiprocess(const struct profile *const *p, size_t n);
/* Adds every sample of p to side (VIEW_BASE or VIEW_NEW). */
int view_add_profile(struct view *v, const struct profile *p, int side);
/* Links children in name order and computes max_depth; call once, after adding. */
int view_finish(struct view *v);
const char *view_str(const struct view *v, uint32_t id);
/* VIEW_CODE when some sample of either side has f in a frame of the program's code,
 * else why all its frames are apart. */
enum view_apart view_func_apart(const struct view_func *f);

/* Calls fn for each node with self samples on some side: its path (function ids,
 * root first, without the root) and the node. Stops at fn's first non-zero return. */
int view_foreach_stack(const struct view *v, int (*fn)(void *ctx, const uint32_t *path, size_t n,
						      const struct view_node *node), void *ctx);

#endif
