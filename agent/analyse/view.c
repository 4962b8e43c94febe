/* view.c: folds the samples of aggregated profiles into a call tree keyed by function
 * name (inlined frames expanded) and counts each function's self and total samples. */
#include "analyse/view.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "profile_data.h"
#include "array_size.h"
#include "intern.h"
#include "label_names.h"

/* Process pseudo-frames are interned under a name no function has. */
#define PROCESS_TAG '\x01'

struct child_key {
	uint32_t parent, func;
};

static int grow(void **arr, uint32_t *cap, size_t elem, uint32_t need)
{
	uint32_t ncap;
	void *a;

	if (need < *cap)
		return 0;
	if (need >= UINT32_MAX / 4)
		return -ENOMEM;
	ncap = *cap ? *cap * 2 : 1024;
	while (ncap <= need)
		ncap *= 2;
	a = realloc(*arr, (size_t)ncap * elem);
	if (!a)
		return -ENOMEM;
	memset((char *)a + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
	*arr = a;
	*cap = ncap;
	return 0;
}

int view_new(bool process_roots, struct view **ret)
{
	struct view *v = calloc(1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	v->process_roots = process_roots;
	v->strs = intern_new();
	v->func_keys = intern_new();
	v->child_keys = intern_new();
	if (!v->strs || !v->func_keys || !v->child_keys || grow((void **)&v->nodes, &v->nodes_cap, sizeof(*v->nodes), 0)) {
		view_free(v);
		return -ENOMEM;
	}
	v->nnodes = 1; /* the root */
	*ret = v;
	return 0;
}

void view_free(struct view *v)
{
	if (!v)
		return;
	intern_free(v->strs);
	intern_free(v->func_keys);
	intern_free(v->child_keys);
	free(v->funcs);
	free(v->nodes);
	free(v);
}

const char *view_str(const struct view *v, uint32_t id)
{
	return id ? intern_str(v->strs, id) : "";
}

/* The view function of name (a process pseudo-frame when is_process). */
static int view_func(struct view *v, const char *name, const char *file, bool is_process, uint32_t *ret)
{
	char local[256], *key = local;
	size_t n = strlen(name) + 1;
	bool added;
	int r;

	if (n > sizeof(local)) {
		key = malloc(n);
		if (!key)
			return -ENOMEM;
	}
	key[0] = is_process ? PROCESS_TAG : ' ';
	memcpy(key + 1, name, n - 1);
	r = intern_put(v->func_keys, key, n, ret, &added);
	if (key != local)
		free(key);
	if (r < 0)
		return r;
	if (!added)
		return 0;
	r = grow((void **)&v->funcs, &v->funcs_cap, sizeof(*v->funcs), *ret);
	if (!r)
		r = intern_put_str(v->strs, name, &v->funcs[*ret].name);
	if (!r && file && *file)
		r = intern_put_str(v->strs, file, &v->funcs[*ret].file);
	v->funcs[*ret].is_process = is_process;
	v->nfuncs = *ret;
	return r;
}

bool view_profiles_multiprocess(const struct profile *const *p, size_t n)
{
	const char *first = NULL;

	for (size_t i = 0; i < n; i++) {
		uint32_t key = intern_find(p[i]->strings, LABEL_PROCESS_NAME, strlen(LABEL_PROCESS_NAME));

		for (uint32_t ls = 1; key && ls <= intern_count(p[i]->labelsets); ls++) {
			const struct prof_lset *s = &p[i]->lsets[ls];

			for (uint32_t l = 0; l < s->nlabels; l++) {
				const struct prof_label *lb = &p[i]->labels[s->first_label + l];
				const char *name = profile_str(p[i], lb->str_str);

				if (lb->key_str != key)
					continue;
				if (first && strcmp(first, name) != 0)
					return true;
				first = name;
			}
		}
	}
	return false;
}

/* Profile ids -> view function ids, for one profile. */
struct xlate {
	uint32_t *func;      /* profile function id -> view function */
	uint32_t *loc;       /* profile location id -> view function for locations without lines */
	uint32_t *lset_proc; /* label set -> process pseudo-frame (0: none) */
	uint8_t *loc_kind;   /* profile location id -> enum loc_kind */
};

enum loc_kind { LOC_CODE = 0, LOC_MARKER, LOC_KERNEL, LOC_KERNEL_EXIT };

/* Where the kernel stops working for the program: an interrupt's entry (timer, IPIs,
 * devices: asynchronous to the code that ran) and the return to user mode (reschedule,
 * signals, task work). A sample's kernel frames from the first of these to the leaf
 * are VIEW_KERNEL_EXIT; the syscall or page fault below them stays the program's.
 * Names from 5.8 (asm_sysvec_*) to 6.18; see docs/decisions.md. */
static bool kernel_exit_start(const char *fn)
{
	static const char *const exits[] = {
		"asm_common_interrupt", "irqentry_exit_to_user_mode", "irqentry_exit", "exit_to_user_mode_loop",
		"exit_to_user_mode_prepare", "syscall_exit_to_user_mode", "syscall_exit_to_user_mode_prepare",
		"prepare_exit_to_usermode", "exit_to_usermode_loop",
	};

	if (strncmp(fn, "asm_sysvec_", 11) == 0)
		return true;
	for (size_t i = 0; i < ARRAY_SIZE(exits); i++)
		if (strcmp(fn, exits[i]) == 0)
			return true;
	return false;
}

static void xlate_free(struct xlate *x)
{
	free(x->func);
	free(x->loc);
	free(x->lset_proc);
	free(x->loc_kind);
}

static uint8_t loc_kind(const struct view *v, const struct profile *p, const struct xlate *x, uint32_t l)
{
	const struct prof_loc *loc = &p->locs[l];
	const struct prof_map *m = loc->mapping_id ? &p->maps[loc->mapping_id] : NULL;

	const char *file = m ? profile_str(p, m->filename_str) : "";

	if (strcmp(file, PROF_MARKER_MAPPING) == 0 || strcmp(file, PROF_UNKNOWN_MAPPING) == 0)
		return LOC_MARKER;
	if (!m || !m->is_kernel)
		return LOC_CODE;
	for (uint32_t i = 0; i < loc->nlines; i++)
		if (kernel_exit_start(view_str(v, v->funcs[x->func[p->lines[loc->first_line + i].function_id]].name)))
			return LOC_KERNEL_EXIT;
	return LOC_KERNEL;
}

static int xlate_build(struct view *v, const struct profile *p, struct xlate *x)
{
	uint32_t nf = intern_count(p->functions), nl = intern_count(p->locations), ns = intern_count(p->labelsets);
	uint32_t key = intern_find(p->strings, LABEL_PROCESS_NAME, strlen(LABEL_PROCESS_NAME));
	int r = 0;

	x->func = calloc((size_t)nf + 1, sizeof(*x->func));
	x->loc = calloc((size_t)nl + 1, sizeof(*x->loc));
	x->lset_proc = calloc((size_t)ns + 1, sizeof(*x->lset_proc));
	x->loc_kind = calloc((size_t)nl + 1, 1);
	if (!x->func || !x->loc || !x->lset_proc || !x->loc_kind)
		return -ENOMEM;
	for (uint32_t f = 1; f <= nf && !r; f++)
		r = view_func(v, profile_str(p, p->funcs[f].name_str), profile_str(p, p->funcs[f].file_str), false,
			      &x->func[f]);
	for (uint32_t l = 1; l <= nl && !r; l++) {
		const struct prof_loc *loc = &p->locs[l];
		const char *file, *base;
		char name[300];

		if (loc->nlines)
			continue;
		/* No symbol: the object's name and the address, as the symbolizer does. */
		file = loc->mapping_id ? profile_str(p, p->maps[loc->mapping_id].filename_str) : "";
		base = strrchr(file, '/');
		base = base ? base + 1 : file;
		if (*base)
			snprintf(name, sizeof(name), "%s+0x%" PRIx64, base, loc->addr);
		else
			snprintf(name, sizeof(name), "0x%" PRIx64, loc->addr);
		r = view_func(v, name, file, false, &x->loc[l]);
	}
	for (uint32_t l = 1; l <= nl && !r; l++)
		x->loc_kind[l] = loc_kind(v, p, x, l);
	for (uint32_t s = 1; s <= ns && !r && v->process_roots; s++) {
		const struct prof_lset *ls = &p->lsets[s];
		const char *name = "unknown";

		for (uint32_t i = 0; i < ls->nlabels; i++) {
			const struct prof_label *lb = &p->labels[ls->first_label + i];

			if (key && lb->key_str == key && lb->str_str)
				name = profile_str(p, lb->str_str);
		}
		r = view_func(v, name, NULL, true, &x->lset_proc[s]);
	}
	if (!r && v->process_roots)
		r = view_func(v, "unknown", NULL, true, &x->lset_proc[0]);
	return r;
}

static int child(struct view *v, uint32_t parent, uint32_t func, uint32_t *ret)
{
	struct child_key k = { .parent = parent, .func = func };
	bool added;
	int r;

	r = intern_put(v->child_keys, &k, sizeof(k), ret, &added);
	if (r < 0 || !added)
		return r;
	r = grow((void **)&v->nodes, &v->nodes_cap, sizeof(*v->nodes), *ret);
	if (r < 0)
		return r;
	v->nodes[*ret] = (struct view_node){ .parent = parent, .func = func };
	v->nnodes = *ret + 1;
	return 0;
}

/* The weighted majority vote: the line that holds most of the node's samples
 * wins whenever one holds more than half. */
static void vote_line(struct view_node *n, int64_t line, int64_t c)
{
	if (n->line == line) {
		n->line_weight += c;
	} else if (n->line_weight >= c) {
		n->line_weight -= c;
	} else {
		n->line = line;
		n->line_weight = c - n->line_weight;
	}
}

struct frame {
	uint32_t func;
	int64_t line;
	uint8_t apart; /* enum view_apart */
};

static int add_sample(struct view *v, const struct profile *p, const struct xlate *x, uint32_t sid, int side,
		      struct frame **buf, size_t *cap)
{
	struct prof_sample_key k = profile_sample_key(p, sid);
	int64_t c = profile_value(p, sid);
	const unsigned char *raw;
	size_t n, nf = 0, need;
	uint32_t node = 0;
	uint64_t serial = ++v->serial;
	uint8_t kernel = VIEW_CODE; /* VIEW_KERNEL_EXIT from the first exit frame leafward */

	raw = profile_stack(p, k.stack_id, &n);
	need = 1;
	for (size_t i = 0; i < n; i++)
		need += p->locs[stack_loc(raw, i)].nlines + 1;
	if (need > *cap) {
		struct frame *f = realloc(*buf, need * sizeof(*f));

		if (!f)
			return -ENOMEM;
		*buf = f;
		*cap = need;
	}
	if (v->process_roots)
		(*buf)[nf++] = (struct frame){ .func = x->lset_proc[k.labelset_id] };
	for (size_t i = n; i-- > 0;) {
		uint32_t lid = stack_loc(raw, i);
		const struct prof_loc *loc = &p->locs[lid];
		uint8_t apart;

		if (x->loc_kind[lid] == LOC_KERNEL_EXIT)
			kernel = VIEW_KERNEL_EXIT;
		apart = x->loc_kind[lid] == LOC_MARKER ? VIEW_MARKER : x->loc_kind[lid] >= LOC_KERNEL ? kernel : VIEW_CODE;
		if (!loc->nlines)
			(*buf)[nf++] = (struct frame){ .func = x->loc[lid], .apart = apart };
		for (uint32_t l = loc->nlines; l-- > 0;) {
			const struct prof_line *ln = &p->lines[loc->first_line + l];

			(*buf)[nf++] = (struct frame){ .func = x->func[ln->function_id], .line = ln->line, .apart = apart };
		}
	}
	v->nodes[0].total[side] += c;
	v->total[side] += c;
	for (size_t i = 0; i < nf; i++) {
		struct view_func *f = &v->funcs[(*buf)[i].func];
		int r = child(v, node, (*buf)[i].func, &node);

		if (r < 0)
			return r;
		v->nodes[node].total[side] += c;
		vote_line(&v->nodes[node], (*buf)[i].line, c);
		if (f->seen != serial) {
			f->seen = serial;
			f->total[side] += c;
		}
		if ((*buf)[i].apart)
			f->apart = (*buf)[i].apart;
		else if (f->seen_code != serial) {
			f->seen_code = serial;
			f->code[side] += c;
		}
	}
	v->nodes[node].self[side] += c;
	if (nf)
		v->funcs[(*buf)[nf - 1].func].self[side] += c;
	return 0;
}

enum view_apart view_func_apart(const struct view_func *f)
{
	return f->code[0] || f->code[1] || f->is_process ? VIEW_CODE : (enum view_apart)f->apart;
}

int view_add_profile(struct view *v, const struct profile *p, int side)
{
	struct xlate x = {};
	struct frame *buf = NULL;
	size_t cap = 0;
	int r;

	if (side != VIEW_BASE && side != VIEW_NEW)
		return -EINVAL;
	r = xlate_build(v, p, &x);
	for (uint32_t s = 1; s <= intern_count(p->samples) && !r; s++)
		r = add_sample(v, p, &x, s, side, &buf, &cap);
	if (side + 1 > v->nsides)
		v->nsides = side + 1;
	free(buf);
	xlate_free(&x);
	return r;
}

struct sort_ctx {
	const struct view *v;
	const uint32_t *rank;
};

static int cmp_name(const void *a, const void *b, void *arg)
{
	const struct view *v = arg;
	const struct view_func *x = &v->funcs[*(const uint32_t *)a], *y = &v->funcs[*(const uint32_t *)b];
	int c = strcmp(view_str(v, x->name), view_str(v, y->name));

	return c ? c : (int)x->is_process - (int)y->is_process;
}

static int cmp_sibling(const void *a, const void *b, void *arg)
{
	const struct sort_ctx *s = arg;
	const struct view_node *x = &s->v->nodes[*(const uint32_t *)a], *y = &s->v->nodes[*(const uint32_t *)b];

	if (x->parent != y->parent)
		return x->parent < y->parent ? -1 : 1;
	return s->rank[x->func] < s->rank[y->func] ? -1 : s->rank[x->func] > s->rank[y->func];
}

int view_finish(struct view *v)
{
	uint32_t *order = calloc((size_t)v->nfuncs + v->nnodes + 1, sizeof(*order));
	uint32_t *rank = calloc((size_t)v->nfuncs + 1, sizeof(*rank));
	uint32_t *depth = calloc(v->nnodes, sizeof(*depth));
	int r = -ENOMEM;

	if (!order || !rank || !depth)
		goto out;
	for (uint32_t f = 0; f < v->nfuncs; f++)
		order[f] = f + 1;
	qsort_r(order, v->nfuncs, sizeof(*order), cmp_name, v);
	for (uint32_t i = 0; i < v->nfuncs; i++)
		rank[order[i]] = i;
	/* Children sorted by (parent, name), then linked back to front. */
	for (uint32_t i = 1; i < v->nnodes; i++)
		order[i - 1] = i;
	qsort_r(order, v->nnodes - 1, sizeof(*order), cmp_sibling, &(struct sort_ctx){ .v = v, .rank = rank });
	for (uint32_t i = 0; i < v->nnodes; i++)
		v->nodes[i].first_child = v->nodes[i].next_sibling = 0;
	for (uint32_t i = v->nnodes - 1; i-- > 0;) {
		struct view_node *n = &v->nodes[order[i]];

		n->next_sibling = v->nodes[n->parent].first_child;
		v->nodes[n->parent].first_child = order[i];
	}
	/* A parent is always made before its children, so ids are in depth order. */
	v->max_depth = 0;
	for (uint32_t i = 1; i < v->nnodes; i++) {
		depth[i] = depth[v->nodes[i].parent] + 1;
		if (depth[i] > v->max_depth)
			v->max_depth = depth[i];
	}
	r = 0;
out:
	free(order);
	free(rank);
	free(depth);
	return r;
}

int view_foreach_stack(const struct view *v, int (*fn)(void *ctx, const uint32_t *path, size_t n,
						      const struct view_node *node), void *ctx)
{
	uint32_t *path = calloc((size_t)v->max_depth + 1, sizeof(*path));
	int r = 0;

	if (!path)
		return -ENOMEM;
	for (uint32_t i = 1; i < v->nnodes && !r; i++) {
		const struct view_node *n = &v->nodes[i];
		size_t len = 0;

		if (!n->self[0] && !n->self[1])
			continue;
		for (uint32_t a = i; a && len <= v->max_depth; a = v->nodes[a].parent)
			len++;
		for (uint32_t a = i, k = (uint32_t)len; a && k; a = v->nodes[a].parent)
			path[--k] = v->nodes[a].func;
		r = fn(ctx, path, len, n);
	}
	free(path);
	return r;
}
