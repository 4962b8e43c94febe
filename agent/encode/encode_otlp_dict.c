/* encode_otlp_dict.c: interns a batch's series into the OTLP request's one shared
 * dictionary (strings, attributes, mappings, functions, locations, stacks, samples). */
#include "encode_otlp_priv.h"

#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "label_names.h"

/* Per-series translation of the profile's ids to dictionary indices; 0 means
 * "not translated yet" since every translated id is at least 1. */
struct series_map {
	const struct profile *p;
	int32_t *str_of, *map_of, *func_of, *loc_of, *stack_of;
	struct {
		uint32_t res, attrset;
	} *lset_of;
};

void *otlp_arena_alloc(struct otlp_build *b, size_t n, size_t count)
{
	const size_t align = alignof(max_align_t);
	struct arena_chunk *c = b->arena;
	size_t size;
	void *ret;

	if (count && n > SIZE_MAX / count)
		return NULL;
	size = (n * count + align - 1) & ~(align - 1);
	if (!size)
		size = align;
	if (!c || c->cap - c->used < size) {
		size_t cap = size > 65536 ? size : 65536;

		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->cap = cap;
		c->used = 0;
		c->next = b->arena;
		b->arena = c;
	}
	ret = c->data + c->used;
	c->used += size;
	memset(ret, 0, size);
	return ret;
}


void otlp_build_free(struct otlp_build *b)
{
	intern_free(b->strs);
	intern_free(b->attrs);
	intern_free(b->maps);
	intern_free(b->funcs);
	intern_free(b->locs);
	intern_free(b->stacks);
	intern_free(b->attrsets);
	intern_free(b->res);
	intern_free(b->samples);
	free(b->counts);
	free(b->off_ns);
	free(b->scratch);
	while (b->arena) {
		struct arena_chunk *n = b->arena->next;

		free(b->arena);
		b->arena = n;
	}
}

/* Dictionary index of a string; NULL and "" are 0. */
int otlp_dict_str(struct otlp_build *b, const char *s, int32_t *ret)
{
	uint32_t id;
	int err;

	if (!s || !*s) {
		*ret = 0;
		return 0;
	}
	err = intern_put_str(b->strs, s, &id);
	if (err)
		return err;
	if (id > INT32_MAX)
		return -E2BIG;
	*ret = (int32_t)id;
	return 0;
}

static int dict_put(struct intern *t, const void *key, size_t len, int32_t *ret)
{
	uint32_t id;
	int err = intern_put(t, key, len, &id, NULL);

	if (err)
		return err;
	if (id > INT32_MAX)
		return -E2BIG;
	*ret = (int32_t)id;
	return 0;
}

static int dict_attr_str(struct otlp_build *b, const char *key, const char *val, int32_t *ret)
{
	struct attr_key k = { .kind = ATTR_STR };
	int err = otlp_dict_str(b, key, &k.key_str);

	if (!err)
		err = otlp_dict_str(b, val, &k.str);
	if (!err)
		err = dict_put(b->attrs, &k, sizeof(k), ret);
	return err;
}

static int dict_attr_int(struct otlp_build *b, const char *key, int64_t val, const char *unit, int32_t *ret)
{
	struct attr_key k = { .kind = ATTR_INT, .num = val };
	int err = otlp_dict_str(b, key, &k.key_str);

	if (!err)
		err = otlp_dict_str(b, unit, &k.unit_str);
	if (!err)
		err = dict_put(b->attrs, &k, sizeof(k), ret);
	return err;
}

static int series_str(struct otlp_build *b, struct series_map *m, uint32_t id, int32_t *ret)
{
	int err = 0;

	if (id && !m->str_of[id])
		err = otlp_dict_str(b, profile_str(m->p, id), &m->str_of[id]);
	*ret = id ? m->str_of[id] : 0;
	return err;
}

static int series_mapping(struct otlp_build *b, struct series_map *m, uint32_t id, int32_t *ret)
{
	const struct prof_map *pm;
	struct map_key k = {};
	int err;

	if (!id || m->map_of[id]) {
		*ret = id ? m->map_of[id] : 0;
		return 0;
	}
	pm = &m->p->maps[id];
	k.start = pm->start;
	k.limit = pm->limit;
	k.offset = pm->offset;
	err = series_str(b, m, pm->filename_str, &k.filename_str);
	if (!err && pm->build_id_str)
		err = dict_attr_str(b, "process.executable.build_id.gnu", profile_str(m->p, pm->build_id_str), &k.attr);
	if (!err)
		err = dict_put(b->maps, &k, sizeof(k), &m->map_of[id]);
	*ret = m->map_of[id];
	return err;
}

static int series_function(struct otlp_build *b, struct series_map *m, uint32_t id, int32_t *ret)
{
	const struct prof_func *f = &m->p->funcs[id];
	struct func_key k = { .start_line = f->start_line };
	int err = 0;

	if (!m->func_of[id]) {
		err = series_str(b, m, f->name_str, &k.name_str);
		if (!err)
			err = series_str(b, m, f->system_name_str, &k.system_name_str);
		if (!err)
			err = series_str(b, m, f->file_str, &k.filename_str);
		if (!err)
			err = dict_put(b->funcs, &k, sizeof(k), &m->func_of[id]);
	}
	*ret = m->func_of[id];
	return err;
}

static int series_location(struct otlp_build *b, struct series_map *m, uint32_t id, int32_t *ret)
{
	const struct prof_loc *l = &m->p->locs[id];
	struct loc_head h = { .addr = l->addr, .nlines = l->nlines };
	size_t len = sizeof(h) + (size_t)l->nlines * sizeof(struct line_key);
	int err;

	if (m->loc_of[id]) {
		*ret = m->loc_of[id];
		return 0;
	}
	if (len > b->scratch_cap) {
		unsigned char *s = realloc(b->scratch, len);

		if (!s)
			return -ENOMEM;
		b->scratch = s;
		b->scratch_cap = len;
	}
	err = series_mapping(b, m, l->mapping_id, &h.mapping);
	if (err)
		return err;
	if (l->mapping_id && m->p->maps[l->mapping_id].is_kernel) {
		if (!b->frame_kernel)
			err = dict_attr_str(b, "profile.frame.type", "kernel", &b->frame_kernel);
		h.attr = b->frame_kernel;
	} else if (l->mapping_id && m->p->maps[l->mapping_id].is_python) {
		if (!b->frame_python)
			err = dict_attr_str(b, "profile.frame.type", "python", &b->frame_python);
		h.attr = b->frame_python;
	} else if (l->mapping_id && m->p->maps[l->mapping_id].is_java) {
		if (!b->frame_java)
			err = dict_attr_str(b, "profile.frame.type", "java", &b->frame_java);
		h.attr = b->frame_java;
	} else if (l->mapping_id && m->p->maps[l->mapping_id].is_js) {
		if (!b->frame_js) /* OpenTelemetry's name for V8's JavaScript frames */
			err = dict_attr_str(b, "profile.frame.type", "v8js", &b->frame_js);
		h.attr = b->frame_js;
	} else {
		if (!b->frame_native)
			err = dict_attr_str(b, "profile.frame.type", "native", &b->frame_native);
		h.attr = b->frame_native;
	}
	if (err)
		return err;
	for (uint32_t i = 0; i < l->nlines; i++) {
		const struct prof_line *pl = &m->p->lines[l->first_line + i];
		struct line_key lk = { .line = pl->line };

		err = series_function(b, m, pl->function_id, &lk.function);
		if (err)
			return err;
		memcpy(b->scratch + sizeof(h) + i * sizeof(lk), &lk, sizeof(lk));
	}
	memcpy(b->scratch, &h, sizeof(h));
	err = dict_put(b->locs, b->scratch, len, &m->loc_of[id]);
	*ret = m->loc_of[id];
	return err;
}

/* An empty stack is the zero Stack, index 0. */
static int series_stack(struct otlp_build *b, struct series_map *m, uint32_t id, int32_t *ret)
{
	const unsigned char *raw;
	int32_t *idx;
	size_t n;
	int err = 0;

	if (m->stack_of[id]) {
		*ret = m->stack_of[id];
		return 0;
	}
	raw = profile_stack(m->p, id, &n);
	if (!n) {
		*ret = 0;
		return 0;
	}
	idx = malloc(n * sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < n && !err; i++)
		err = series_location(b, m, stack_loc(raw, i), &idx[i]);
	if (!err)
		err = dict_put(b->stacks, idx, n * sizeof(*idx), &m->stack_of[id]);
	free(idx);
	*ret = m->stack_of[id];
	return err;
}

static int int32_cmp(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

/* Splits a label set into its resource (pid, process name) and the sample's
 * attributes (thread.id, thread.name and any other label under its own key). */
static int series_labelset(struct otlp_build *b, struct series_map *m, uint32_t series, uint32_t id,
			   uint32_t *ret_res, uint32_t *ret_attrset)
{
	const struct prof_lset *ls = id ? &m->p->lsets[id] : NULL;
	uint32_t nlabels = ls ? ls->nlabels : 0;
	struct res_key rk = { .series = series };
	int32_t *attrs = NULL;
	size_t nattrs = 0;
	int err = 0;

	if (m->lset_of[id].res) {
		*ret_res = m->lset_of[id].res;
		*ret_attrset = m->lset_of[id].attrset;
		return 0;
	}
	attrs = malloc((nlabels ? nlabels : 1) * sizeof(*attrs));
	if (!attrs)
		return -ENOMEM;
	for (uint32_t i = 0; i < nlabels && !err; i++) {
		const struct prof_label *l = &m->p->labels[ls->first_label + i];
		const char *key = profile_str(m->p, l->key_str);
		const char *str = l->str_str ? profile_str(m->p, l->str_str) : NULL;

		if (!strcmp(key, LABEL_PID) && !str) {
			rk.has_pid = 1;
			rk.pid = l->num;
		} else if (!strcmp(key, LABEL_PROCESS_NAME) && str) {
			err = otlp_dict_str(b, str, &rk.pname_str);
		} else if (!strcmp(key, LABEL_TID) && !str) {
			err = dict_attr_int(b, "thread.id", l->num, NULL, &attrs[nattrs++]);
		} else if (!strcmp(key, LABEL_THREAD_NAME) && str) {
			err = dict_attr_str(b, "thread.name", str, &attrs[nattrs++]);
		} else if (str) {
			err = dict_attr_str(b, key, str, &attrs[nattrs++]);
		} else {
			err = dict_attr_int(b, key, l->num, profile_str(m->p, l->num_unit_str), &attrs[nattrs++]);
		}
	}
	if (err)
		goto out;
	qsort(attrs, nattrs, sizeof(*attrs), int32_cmp);
	err = intern_put(b->res, &rk, sizeof(rk), ret_res, NULL);
	if (!err)
		err = intern_put(b->attrsets, attrs, nattrs * sizeof(*attrs), ret_attrset, NULL);
	if (err)
		goto out;
	m->lset_of[id].res = *ret_res;
	m->lset_of[id].attrset = *ret_attrset;
out:
	free(attrs);
	return err;
}

int otlp_add_series(struct otlp_build *b, uint32_t series, const struct profile *p)
{
	uint32_t nsamples = intern_count(p->samples);
	struct series_map m = { .p = p };
	int err = 0;

	m.str_of = calloc((size_t)intern_count(p->strings) + 1, sizeof(*m.str_of));
	m.map_of = calloc((size_t)intern_count(p->mappings) + 1, sizeof(*m.map_of));
	m.func_of = calloc((size_t)intern_count(p->functions) + 1, sizeof(*m.func_of));
	m.loc_of = calloc((size_t)intern_count(p->locations) + 1, sizeof(*m.loc_of));
	m.stack_of = calloc((size_t)intern_count(p->stacks) + 1, sizeof(*m.stack_of));
	m.lset_of = calloc((size_t)intern_count(p->labelsets) + 1, sizeof(*m.lset_of));
	if (!m.str_of || !m.map_of || !m.func_of || !m.loc_of || !m.stack_of || !m.lset_of) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 1; i <= nsamples; i++) {
		struct prof_sample_key pk = profile_sample_key(p, i);
		struct sample_key k = {};
		uint32_t sid;
		bool added;

		if (p->counts[i] <= 0 && profile_off_ns(p, i) <= 0)
			continue;
		err = series_labelset(b, &m, series, pk.labelset_id, &k.res, &k.attrset);
		if (!err)
			err = series_stack(b, &m, pk.stack_id, &k.stack);
		if (!err)
			err = intern_put(b->samples, &k, sizeof(k), &sid, &added);
		if (err)
			goto out;
		if (sid >= b->counts_cap) {
			uint32_t cap = b->counts_cap ? b->counts_cap * 2 : 256;
			int64_t *c;

			if (cap <= sid || cap > UINT32_MAX / 4) {
				err = -E2BIG;
				goto out;
			}
			c = realloc(b->counts, (size_t)cap * sizeof(*c));
			if (c)
				b->counts = c;
			c = c ? realloc(b->off_ns, (size_t)cap * sizeof(*c)) : NULL;
			if (!c) {
				err = -ENOMEM;
				goto out;
			}
			b->off_ns = c;
			b->counts_cap = cap;
		}
		if (added)
			b->counts[sid] = b->off_ns[sid] = 0;
		b->counts[sid] += p->counts[i];
		b->off_ns[sid] += profile_off_ns(p, i);
	}
out:
	free(m.str_of);
	free(m.map_of);
	free(m.func_of);
	free(m.loc_of);
	free(m.stack_of);
	free(m.lset_of);
	return err;
}
