/* aggregate.c: interns mappings, functions, locations, stacks and label sets and
 * counts samples per (label set, stack); memory grows with distinct keys only. */
#include "aggregate.h"
#include "profile_data.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array_size.h"
#include "escape.h"

/* Makes room for index `need` in a per-id array (so it holds need + 1 slots). */
static int array_reserve(void **arr, uint32_t *cap, size_t elem, uint32_t need)
{
	size_t ncap;
	void *a;

	if (need < *cap)
		return 0;
	if (need >= UINT32_MAX / 2)
		return -ENOMEM;
	ncap = *cap ? (size_t)*cap * 2 : 16;
	while (ncap <= need)
		ncap *= 2;
	a = realloc(*arr, ncap * elem);
	if (!a)
		return -ENOMEM;
	*arr = a;
	*cap = (uint32_t)ncap;
	return 0;
}

#define RESERVE(arr, cap, need) array_reserve((void **)&(arr), &(cap), sizeof(*(arr)), (need))

/* String id of s; NULL and "" are 0. Every string of a profile passes here, and
 * many come from other users (symbol, file and process names, paths, profiles given
 * to report): each is stored as valid UTF-8 without control characters (utf8_text),
 * which protobuf readers (OTLP, Pyroscope) require and text outputs rely on. */
static int profile_intern_str(struct profile *p, const char *s, uint32_t *ret_id)
{
	size_t n;
	char *t;
	int r;

	if (!s || !*s) {
		*ret_id = 0;
		return 0;
	}
	if (utf8_is_text(s))
		return intern_put_str(p->strings, s, ret_id);
	n = strlen(s);
	t = malloc(3 * n + 1);
	if (!t)
		return -ENOMEM;
	t[utf8_text(s, n, t)] = 0;
	r = intern_put_str(p->strings, t, ret_id);
	free(t);
	return r;
}

struct profile *profile_new(void)
{
	struct profile *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->strings = intern_new();
	p->mappings = intern_new();
	p->functions = intern_new();
	p->locations = intern_new();
	p->labelsets = intern_new();
	p->stacks = intern_new();
	p->samples = intern_new();
	if (!p->strings || !p->mappings || !p->functions || !p->locations ||
	    !p->labelsets || !p->stacks || !p->samples) {
		profile_free(p);
		return NULL;
	}
	return p;
}

void profile_free(struct profile *p)
{
	if (!p)
		return;
	intern_free(p->strings);
	intern_free(p->mappings);
	intern_free(p->functions);
	intern_free(p->locations);
	intern_free(p->labelsets);
	intern_free(p->stacks);
	intern_free(p->samples);
	free(p->maps);
	free(p->funcs);
	free(p->locs);
	free(p->lsets);
	free(p->stack_nsym);
	free(p->counts);
	free(p->off_ns);
	free(p->lines);
	free(p->labels);
	free(p->comments);
	free(p);
}

void profile_reset(struct profile *p)
{
	intern_clear(p->strings);
	intern_clear(p->mappings);
	intern_clear(p->functions);
	intern_clear(p->locations);
	intern_clear(p->labelsets);
	intern_clear(p->stacks);
	intern_clear(p->samples);
	/* Per-id arrays keep their capacity; they are rewritten as ids are reused. */
	p->nlines = 0;
	p->nlabels = 0;
	p->ncomments = 0;
	p->main_mapping = 0;
	/* The period is sampling configuration, not window data: it is kept. */
	p->time_nanos = 0;
	p->duration_nanos = 0;
	p->total_samples = 0;
	p->frames = 0;
	p->frames_symbolized = 0;
}

void profile_set_period(struct profile *p, int64_t period_ns)
{
	p->period = period_ns;
}

void profile_set_values(struct profile *p, enum prof_values values)
{
	p->values = values;
}

void profile_set_time(struct profile *p, int64_t time_nanos, int64_t duration_nanos)
{
	p->time_nanos = time_nanos;
	p->duration_nanos = duration_nanos;
}

int profile_add_comment(struct profile *p, const char *s)
{
	uint32_t id;
	int err;

	if (!s)
		return -EINVAL;
	err = RESERVE(p->comments, p->comments_cap, p->ncomments);
	if (err)
		return err;
	err = profile_intern_str(p, s, &id);
	if (err)
		return err;
	p->comments[p->ncomments++] = id;
	return 0;
}

int profile_mapping(struct profile *p, const struct prof_mapping_in *m, uint32_t *ret_id)
{
	struct prof_map map = {
		.start = m->start,
		.limit = m->limit,
		.offset = m->offset,
		.is_main = m->is_main,
		.is_kernel = m->is_kernel,
		.is_python = m->is_python,
		.is_java = m->is_java,
		.is_js = m->is_js,
	};
	uint32_t id;
	bool added;
	int err;

	id = intern_find(p->mappings, &m->key, sizeof(m->key));
	if (id) {
		*ret_id = id;
		return 0;
	}
	err = profile_intern_str(p, m->filename, &map.filename_str);
	if (!err)
		err = profile_intern_str(p, m->build_id, &map.build_id_str);
	if (!err)
		err = RESERVE(p->maps, p->maps_cap, intern_count(p->mappings) + 1);
	if (!err)
		err = intern_put(p->mappings, &m->key, sizeof(m->key), &id, &added);
	if (err)
		return err;
	p->maps[id] = map;
	if (m->is_main && !p->main_mapping)
		p->main_mapping = id;
	*ret_id = id;
	return 0;
}

uint32_t profile_find_location(const struct profile *p, uint32_t mapping_id, uint64_t addr)
{
	struct prof_loc_key k = { .addr = addr, .mapping_id = mapping_id };

	return intern_find(p->locations, &k, sizeof(k));
}

uint32_t profile_location_count(const struct profile *p)
{
	return intern_count(p->locations);
}

bool profile_location_in(const struct profile *p, uint32_t id, uint32_t mapping_id, uint64_t *ret_addr)
{
	if (id < 1 || id > intern_count(p->locations) || p->locs[id].mapping_id != mapping_id)
		return false;
	*ret_addr = p->locs[id].addr;
	return true;
}

static int profile_function(struct profile *p, const struct prof_frame *f, uint32_t *ret_id)
{
	struct prof_func fn = { .start_line = f->start_line };
	bool added;
	int err;

	if (!f->function)
		return -EINVAL;
	err = profile_intern_str(p, f->function, &fn.name_str);
	if (!err)
		err = profile_intern_str(p, f->system_name, &fn.system_name_str);
	if (!err)
		err = profile_intern_str(p, f->file, &fn.file_str);
	if (!err)
		err = RESERVE(p->funcs, p->funcs_cap, intern_count(p->functions) + 1);
	if (!err)
		err = intern_put(p->functions, &fn, sizeof(fn), ret_id, &added);
	if (err)
		return err;
	if (added)
		p->funcs[*ret_id] = fn;
	return 0;
}

/* Writes frames as lines at the end of the line table (not counted in nlines
 * yet: the caller commits them); their first index in *ret_first. */
static int put_lines(struct profile *p, const struct prof_frame *frames, size_t nframes, uint32_t *ret_first)
{
	uint32_t first = p->nlines;
	int err;

	*ret_first = first;
	if (!nframes)
		return 0;
	err = RESERVE(p->lines, p->lines_cap, (uint32_t)(first + nframes - 1));
	if (err)
		return err;
	for (size_t i = 0; i < nframes; i++) {
		uint32_t fid;

		err = profile_function(p, &frames[i], &fid);
		if (err)
			return err;
		p->lines[first + i] = (struct prof_line){ .function_id = fid, .line = frames[i].line };
	}
	return 0;
}

int profile_set_location_frames(struct profile *p, uint32_t id, const struct prof_frame *frames, size_t nframes,
				bool symbolized)
{
	uint32_t first;
	int err;

	if (id < 1 || id > intern_count(p->locations) || !nframes || !frames || nframes > UINT32_MAX / 2 - p->nlines)
		return -EINVAL;
	err = put_lines(p, frames, nframes, &first);
	if (err)
		return err;
	/* The old lines stay in the table, unreferenced: a location is redone once. */
	p->nlines += (uint32_t)nframes;
	p->locs[id].first_line = first;
	p->locs[id].nlines = (uint32_t)nframes;
	p->locs[id].symbolized = symbolized;
	return 0;
}

int profile_add_location(struct profile *p, uint32_t mapping_id, uint64_t addr,
			 const struct prof_frame *frames, size_t nframes, bool symbolized,
			 uint32_t *ret_id)
{
	return profile_add_location_variant(p, mapping_id, addr, 0, frames, nframes, symbolized, ret_id);
}

int profile_add_location_variant(struct profile *p, uint32_t mapping_id, uint64_t addr, uint32_t variant,
				 const struct prof_frame *frames, size_t nframes, bool symbolized,
				 uint32_t *ret_id)
{
	struct prof_loc_key k = { .addr = addr, .mapping_id = mapping_id, .variant = variant };
	uint32_t id, first;
	bool added;
	int err;

	if (mapping_id > intern_count(p->mappings) || (nframes && !frames) ||
	    nframes > UINT32_MAX / 2 - p->nlines)
		return -EINVAL;
	id = intern_find(p->locations, &k, sizeof(k));
	if (id) {
		*ret_id = id;
		return 0;
	}
	err = put_lines(p, frames, nframes, &first);
	if (err)
		return err;
	err = RESERVE(p->locs, p->locs_cap, intern_count(p->locations) + 1);
	if (!err)
		err = intern_put(p->locations, &k, sizeof(k), &id, &added);
	if (err)
		return err;
	p->nlines += (uint32_t)nframes;
	p->locs[id] = (struct prof_loc){
		.addr = addr,
		.mapping_id = mapping_id,
		.first_line = first,
		.nlines = (uint32_t)nframes,
		.symbolized = symbolized,
	};
	*ret_id = id;
	return 0;
}

static int label_cmp(const void *a, const void *b)
{
	const struct prof_label *x = a, *y = b;

	if (x->key_str != y->key_str)
		return x->key_str < y->key_str ? -1 : 1;
	if (x->str_str != y->str_str)
		return x->str_str < y->str_str ? -1 : 1;
	if (x->num != y->num)
		return x->num < y->num ? -1 : 1;
	if (x->num_unit_str != y->num_unit_str)
		return x->num_unit_str < y->num_unit_str ? -1 : 1;
	return 0;
}

/* Label sets are identified by their sorted labels, so order does not matter. */
int profile_labelset(struct profile *p, const struct prof_label_in *labels, size_t n, uint32_t *ret_id)
{
	struct prof_label local[16], *buf = local;
	uint32_t id;
	bool added;
	int err = 0;

	if ((n && !labels) || n > UINT32_MAX / 2 - p->nlabels)
		return -EINVAL;
	if (n > ARRAY_SIZE(local)) {
		buf = calloc(n, sizeof(*buf));
		if (!buf)
			return -ENOMEM;
	}
	for (size_t i = 0; i < n && !err; i++) {
		const struct prof_label_in *l = &labels[i];

		buf[i] = (struct prof_label){ .num = l->str ? 0 : l->num };
		if (!l->key || !*l->key) {
			err = -EINVAL;
			break;
		}
		err = profile_intern_str(p, l->key, &buf[i].key_str);
		if (!err && l->str)
			err = profile_intern_str(p, l->str, &buf[i].str_str);
		if (!err && !l->str)
			err = profile_intern_str(p, l->num_unit, &buf[i].num_unit_str);
	}
	if (err)
		goto out;
	if (n > 1)
		qsort(buf, n, sizeof(*buf), label_cmp);
	if (n) {
		err = RESERVE(p->labels, p->labels_cap, (uint32_t)(p->nlabels + n - 1));
		if (err)
			goto out;
	}
	err = RESERVE(p->lsets, p->lsets_cap, intern_count(p->labelsets) + 1);
	if (!err)
		err = intern_put(p->labelsets, buf, n * sizeof(*buf), &id, &added);
	if (err)
		goto out;
	if (added) {
		if (n) /* p->labels may still be NULL */
			memcpy(p->labels + p->nlabels, buf, n * sizeof(*buf));
		p->lsets[id] = (struct prof_lset){ .first_label = p->nlabels, .nlabels = (uint32_t)n };
		p->nlabels += (uint32_t)n;
	}
	*ret_id = id;
out:
	if (buf != local)
		free(buf);
	return err;
}

static int add_weighted(struct profile *p, uint32_t labelset_id, const uint32_t *loc_ids, size_t n, int64_t count,
			int64_t off_ns)
{
	uint32_t nlocs = intern_count(p->locations);
	struct prof_sample_key k = { .labelset_id = labelset_id };
	uint32_t sid;
	bool added;
	int err;

	if (count < 0 || off_ns < 0 || labelset_id > intern_count(p->labelsets) || (n && !loc_ids) ||
	    n > UINT32_MAX / sizeof(*loc_ids))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (loc_ids[i] == 0 || loc_ids[i] > nlocs)
			return -EINVAL;

	err = RESERVE(p->stack_nsym, p->stacks_cap, intern_count(p->stacks) + 1);
	if (!err)
		err = intern_put(p->stacks, loc_ids, n * sizeof(*loc_ids), &k.stack_id, &added);
	if (err)
		return err;
	if (added) {
		uint32_t nsym = 0;

		for (size_t i = 0; i < n; i++)
			nsym += p->locs[loc_ids[i]].symbolized;
		p->stack_nsym[k.stack_id] = nsym;
	}

	err = RESERVE(p->counts, p->counts_cap, intern_count(p->samples) + 1);
	if (!err && (off_ns || p->off_ns)) {
		uint32_t old = p->off_ns ? p->off_cap : 0;

		err = RESERVE(p->off_ns, p->off_cap, intern_count(p->samples) + 1);
		if (!err && p->off_cap > old)
			memset(p->off_ns + old, 0, (p->off_cap - old) * sizeof(*p->off_ns));
	}
	if (!err)
		err = intern_put(p->samples, &k, sizeof(k), &sid, &added);
	if (err)
		return err;
	if (added) {
		p->counts[sid] = 0;
		if (p->off_ns)
			p->off_ns[sid] = 0;
	}
	p->counts[sid] += count;
	if (off_ns)
		p->off_ns[sid] += off_ns;
	p->total_samples += (uint64_t)count;
	p->frames += (uint64_t)count * n;
	p->frames_symbolized += (uint64_t)count * p->stack_nsym[k.stack_id];
	return 0;
}

int profile_add_sample(struct profile *p, uint32_t labelset_id, const uint32_t *loc_ids, size_t n, int64_t count)
{
	return add_weighted(p, labelset_id, loc_ids, n, count, 0);
}

int profile_add_offcpu(struct profile *p, uint32_t labelset_id, const uint32_t *loc_ids, size_t n, int64_t off_ns)
{
	return add_weighted(p, labelset_id, loc_ids, n, p->values == PROF_VALUES_OFFCPU, off_ns);
}

void profile_get_stats(const struct profile *p, struct profile_stats *ret)
{
	*ret = (struct profile_stats){
		.samples = p->total_samples,
		.stacks = intern_count(p->samples),
		.locations = intern_count(p->locations),
		.functions = intern_count(p->functions),
		.mappings = intern_count(p->mappings),
		.strings = intern_count(p->strings),
		.labelsets = intern_count(p->labelsets),
		.frames = p->frames,
		.frames_symbolized = p->frames_symbolized,
	};
	ret->mem_bytes = sizeof(*p) +
		intern_mem_bytes(p->strings) + intern_mem_bytes(p->mappings) +
		intern_mem_bytes(p->functions) + intern_mem_bytes(p->locations) +
		intern_mem_bytes(p->labelsets) + intern_mem_bytes(p->stacks) +
		intern_mem_bytes(p->samples) +
		(size_t)p->maps_cap * sizeof(*p->maps) +
		(size_t)p->funcs_cap * sizeof(*p->funcs) +
		(size_t)p->locs_cap * sizeof(*p->locs) +
		(size_t)p->lsets_cap * sizeof(*p->lsets) +
		(size_t)p->stacks_cap * sizeof(*p->stack_nsym) +
		(size_t)p->counts_cap * sizeof(*p->counts) +
		(size_t)p->off_cap * sizeof(*p->off_ns) +
		(size_t)p->lines_cap * sizeof(*p->lines) +
		(size_t)p->labels_cap * sizeof(*p->labels) +
		(size_t)p->comments_cap * sizeof(*p->comments);
}

/* profile_top: functions are keyed by (name, file) string ids. */
struct top_key {
	uint32_t name_str, file_str;
};

struct top_acc {
	int64_t self, total;
	uint32_t name_str, file_str;
	uint32_t seen; /* last sample id that counted this entry's total */
};

struct top_sort {
	const struct profile *p;
	bool by_total;
};

static int top_cmp(const void *a, const void *b, void *arg)
{
	const struct top_acc *x = a, *y = b;
	const struct top_sort *ts = arg;
	int64_t xa = ts->by_total ? x->total : x->self, ya = ts->by_total ? y->total : y->self;
	int64_t xb = ts->by_total ? x->self : x->total, yb = ts->by_total ? y->self : y->total;
	int c;

	if (xa != ya)
		return xa > ya ? -1 : 1;
	if (xb != yb)
		return xb > yb ? -1 : 1;
	c = strcmp(profile_str(ts->p, x->name_str), profile_str(ts->p, y->name_str));
	if (c)
		return c;
	return strcmp(profile_str(ts->p, x->file_str), profile_str(ts->p, y->file_str));
}

int profile_top(const struct profile *p, bool by_total, struct prof_top_entry *ret, size_t max)
{
	uint32_t nfuncs = intern_count(p->functions), nsamples = intern_count(p->samples);
	uint32_t *func_top = NULL; /* function id -> top entry id */
	struct top_acc *acc = NULL;
	struct intern *keys = NULL;
	uint32_t nacc;
	int err = 0;

	if (max && !ret)
		return -EINVAL;
	if (!max || !nsamples)
		return 0;
	keys = intern_new();
	func_top = calloc((size_t)nfuncs + 1, sizeof(*func_top));
	acc = calloc((size_t)nfuncs + 1, sizeof(*acc));
	if (!keys || !func_top || !acc) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t f = 1; f <= nfuncs; f++) {
		struct top_key k = { .name_str = p->funcs[f].name_str, .file_str = p->funcs[f].file_str };

		err = intern_put(keys, &k, sizeof(k), &func_top[f], NULL);
		if (err)
			goto out;
		acc[func_top[f]].name_str = k.name_str;
		acc[func_top[f]].file_str = k.file_str;
	}
	nacc = intern_count(keys);

	for (uint32_t s = 1; s <= nsamples; s++) {
		struct prof_sample_key sk = profile_sample_key(p, s);
		int64_t count = p->counts[s];
		const unsigned char *raw;
		size_t n;

		raw = profile_stack(p, sk.stack_id, &n);
		for (size_t i = 0; i < n; i++) {
			const struct prof_loc *loc = &p->locs[stack_loc(raw, i)];

			for (uint32_t l = 0; l < loc->nlines; l++) {
				struct top_acc *a = &acc[func_top[p->lines[loc->first_line + l].function_id]];

				if (i == 0 && l == 0)
					a->self += count;
				if (a->seen != s) {
					a->seen = s;
					a->total += count;
				}
			}
		}
	}

	/* acc[0] is unused; sort entries 1..nacc. Functions in no sample sort last
	 * (total 0) and are left out. */
	qsort_r(acc + 1, nacc, sizeof(*acc), top_cmp, &(struct top_sort){ .p = p, .by_total = by_total });
	while (nacc && acc[nacc].total == 0)
		nacc--;
	if (max > nacc)
		max = nacc;
	for (size_t i = 0; i < max; i++) {
		const struct top_acc *a = &acc[i + 1];

		ret[i] = (struct prof_top_entry){
			.function = profile_str(p, a->name_str),
			.file = a->file_str ? profile_str(p, a->file_str) : NULL,
			.self = a->self,
			.total = a->total,
		};
	}
	err = (int)max;
out:
	intern_free(keys);
	free(func_top);
	free(acc);
	return err;
}
