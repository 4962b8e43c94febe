/* encode_pprof.c: serialises an aggregated profile to a pprof Profile message
 * (protobuf-c) and gzips it (zlib). Ids and string indices are the profile's own. */
#include "encode.h"
#include "aggregate.h"
#include "profile_data.h"

#include "profile.pb-c.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "window.h"
#include "gzip.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__ValueType pb_value_type;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;

/* Strings the encoder needs beyond those interned by the profile. */
enum { EXTRA_SAMPLES, EXTRA_COUNT, EXTRA_CPU, EXTRA_NANOSECONDS, EXTRA_OFFCPU, EXTRA__MAX };
static const char *const extra_strs[EXTRA__MAX] = { "samples", "count", PROF_TYPE_CPU, "nanoseconds",
						    PROF_TYPE_OFFCPU };

/* Everything the message points to; owned here, freed by pb_build_free(). */
struct pb_build {
	char **strtab;
	pb_value_type vt[4]; /* samples/count, cpu/nanoseconds, off_cpu/nanoseconds, period type */
	pb_value_type *vt_ptrs[3];
	pb_mapping *maps;
	pb_mapping **map_ptrs;
	pb_function *funcs;
	pb_function **func_ptrs;
	pb_location *locs;
	pb_location **loc_ptrs;
	pb_line *lines;
	pb_line **line_ptrs;
	pb_label *labels;
	pb_label **label_ptrs;
	size_t *stack_off; /* stack id -> first index in stack_ids */
	uint64_t *stack_ids;
	pb_sample *samples;
	pb_sample **sample_ptrs;
	int64_t *values;
	int64_t *comments;
	/* Labels added to every sample (encode_pprof_labeled): string ids, and each
	 * sample's label list when there are any. */
	const struct series_label *xl;
	size_t nxl;
	pb_label *xlabels;
	pb_label **sample_labels;
};

static void pb_build_free(struct pb_build *b)
{
	free(b->strtab);
	free(b->maps);
	free(b->map_ptrs);
	free(b->funcs);
	free(b->func_ptrs);
	free(b->locs);
	free(b->loc_ptrs);
	free(b->lines);
	free(b->line_ptrs);
	free(b->labels);
	free(b->label_ptrs);
	free(b->stack_off);
	free(b->stack_ids);
	free(b->samples);
	free(b->sample_ptrs);
	free(b->values);
	free(b->comments);
	free(b->xlabels);
	free(b->sample_labels);
}

/* calloc(n, size) that also succeeds (non-NULL) for n == 0. */
static void *alloc_n(size_t n, size_t size)
{
	return calloc(n ? n : 1, size);
}

/* The string id of s: the profile's own, else a new entry at the end of strtab. */
static int64_t strtab_id(const struct profile *p, struct pb_build *b, size_t *n, const char *s)
{
	uint32_t id = intern_find(p->strings, s, strlen(s));

	if (id)
		return id;
	b->strtab[*n] = (char *)s;
	return (int64_t)(*n)++;
}

/* Builds the string table: index i is string id i, then the extra strings that
 * the profile does not hold already (the encoder's, then the added labels'). */
static int build_strings(const struct profile *p, struct pb_build *b, size_t *ret_n, int64_t *ret_extra)
{
	static char empty[] = "";
	uint32_t nstr = intern_count(p->strings);
	size_t n = (size_t)nstr + 1;

	b->strtab = alloc_n(n + EXTRA__MAX + 2 * b->nxl, sizeof(*b->strtab));
	b->xlabels = alloc_n(b->nxl, sizeof(*b->xlabels));
	if (!b->strtab || !b->xlabels)
		return -ENOMEM;
	b->strtab[0] = empty;
	for (uint32_t i = 1; i <= nstr; i++)
		b->strtab[i] = (char *)intern_str(p->strings, i);
	for (int e = 0; e < EXTRA__MAX; e++) {
		uint32_t id = intern_find(p->strings, extra_strs[e], strlen(extra_strs[e]));

		if (!id) {
			b->strtab[n] = (char *)extra_strs[e];
			id = (uint32_t)n++;
		}
		ret_extra[e] = id;
	}
	for (size_t i = 0; i < b->nxl; i++) {
		b->xlabels[i] = (pb_label)PERFTOOLS__PROFILES__LABEL__INIT;
		b->xlabels[i].key = strtab_id(p, b, &n, b->xl[i].name);
		b->xlabels[i].str = strtab_id(p, b, &n, b->xl[i].value);
	}
	*ret_n = n;
	return 0;
}

struct map_flags {
	bool any, functions, filenames, line_numbers;
};

static int build_mappings(const struct profile *p, struct pb_build *b, pb_profile *msg)
{
	uint32_t nmaps = intern_count(p->mappings), nlocs = intern_count(p->locations);
	struct map_flags *fl = alloc_n((size_t)nmaps + 1, sizeof(*fl));
	size_t out = 0;
	int err = 0;

	b->maps = alloc_n(nmaps, sizeof(*b->maps));
	b->map_ptrs = alloc_n(nmaps, sizeof(*b->map_ptrs));
	if (!fl || !b->maps || !b->map_ptrs) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t m = 1; m <= nmaps; m++)
		fl[m] = (struct map_flags){ .functions = true, .filenames = true, .line_numbers = true };
	for (uint32_t l = 1; l <= nlocs; l++) {
		const struct prof_loc *loc = &p->locs[l];
		struct map_flags *f = &fl[loc->mapping_id];

		if (!loc->mapping_id)
			continue;
		f->any = true;
		if (!loc->symbolized)
			f->functions = false;
		if (!loc->nlines)
			f->filenames = f->line_numbers = false;
		for (uint32_t i = 0; i < loc->nlines; i++) {
			const struct prof_line *ln = &p->lines[loc->first_line + i];

			if (!p->funcs[ln->function_id].file_str)
				f->filenames = false;
			if (ln->line <= 0)
				f->line_numbers = false;
		}
	}
	for (uint32_t m = 1; m <= nmaps; m++) {
		const struct prof_map *pm = &p->maps[m];
		bool any = fl[m].any;

		b->maps[m - 1] = (pb_mapping)PERFTOOLS__PROFILES__MAPPING__INIT;
		b->maps[m - 1].id = m;
		b->maps[m - 1].memory_start = pm->start;
		b->maps[m - 1].memory_limit = pm->limit;
		b->maps[m - 1].file_offset = pm->offset;
		b->maps[m - 1].filename = pm->filename_str;
		b->maps[m - 1].build_id = pm->build_id_str;
		b->maps[m - 1].has_functions = any && fl[m].functions;
		b->maps[m - 1].has_filenames = any && fl[m].filenames;
		b->maps[m - 1].has_line_numbers = any && fl[m].line_numbers;
		b->maps[m - 1].has_inline_frames = any && fl[m].line_numbers;
	}
	/* The main binary goes first, the rest in id order. */
	if (p->main_mapping)
		b->map_ptrs[out++] = &b->maps[p->main_mapping - 1];
	for (uint32_t m = 1; m <= nmaps; m++)
		if (m != p->main_mapping)
			b->map_ptrs[out++] = &b->maps[m - 1];
	msg->n_mapping = nmaps;
	msg->mapping = b->map_ptrs;
out:
	free(fl);
	return err;
}

static int build_functions(const struct profile *p, struct pb_build *b, pb_profile *msg)
{
	uint32_t n = intern_count(p->functions);

	b->funcs = alloc_n(n, sizeof(*b->funcs));
	b->func_ptrs = alloc_n(n, sizeof(*b->func_ptrs));
	if (!b->funcs || !b->func_ptrs)
		return -ENOMEM;
	for (uint32_t i = 1; i <= n; i++) {
		const struct prof_func *f = &p->funcs[i];
		pb_function *pf = &b->funcs[i - 1];

		*pf = (pb_function)PERFTOOLS__PROFILES__FUNCTION__INIT;
		pf->id = i;
		pf->name = f->name_str;
		pf->system_name = f->system_name_str;
		pf->filename = f->file_str;
		pf->start_line = f->start_line;
		b->func_ptrs[i - 1] = pf;
	}
	msg->n_function = n;
	msg->function = b->func_ptrs;
	return 0;
}

static int build_locations(const struct profile *p, struct pb_build *b, pb_profile *msg)
{
	uint32_t n = intern_count(p->locations);

	/* Lines mirror profile.lines one to one, so a location's Line pointers are
	 * a slice of line_ptrs. */
	b->lines = alloc_n(p->nlines, sizeof(*b->lines));
	b->line_ptrs = alloc_n(p->nlines, sizeof(*b->line_ptrs));
	b->locs = alloc_n(n, sizeof(*b->locs));
	b->loc_ptrs = alloc_n(n, sizeof(*b->loc_ptrs));
	if (!b->lines || !b->line_ptrs || !b->locs || !b->loc_ptrs)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->nlines; i++) {
		b->lines[i] = (pb_line)PERFTOOLS__PROFILES__LINE__INIT;
		b->lines[i].function_id = p->lines[i].function_id;
		b->lines[i].line = p->lines[i].line;
		b->line_ptrs[i] = &b->lines[i];
	}
	for (uint32_t i = 1; i <= n; i++) {
		const struct prof_loc *l = &p->locs[i];
		pb_location *pl = &b->locs[i - 1];

		*pl = (pb_location)PERFTOOLS__PROFILES__LOCATION__INIT;
		pl->id = i;
		pl->mapping_id = l->mapping_id;
		pl->address = l->addr;
		pl->n_line = l->nlines;
		pl->line = l->nlines ? &b->line_ptrs[l->first_line] : NULL;
		b->loc_ptrs[i - 1] = pl;
	}
	msg->n_location = n;
	msg->location = b->loc_ptrs;
	return 0;
}

/* Gives ps its own label list at b->sample_labels[off]: its label set, then each
 * added label whose key the set does not have already. Returns the next offset. */
static size_t add_sample_labels(struct pb_build *b, pb_sample *ps, size_t off)
{
	pb_label **out = &b->sample_labels[off];
	size_t n = ps->n_label;

	if (n)
		memcpy(out, ps->label, n * sizeof(*out));
	for (size_t x = 0; x < b->nxl; x++) {
		bool dup = false;

		for (size_t j = 0; j < ps->n_label && !dup; j++)
			dup = ps->label[j]->key == b->xlabels[x].key;
		if (!dup)
			out[n++] = &b->xlabels[x];
	}
	ps->n_label = n;
	ps->label = out;
	return off + n;
}

static int build_samples(const struct profile *p, struct pb_build *b, pb_profile *msg)
{
	uint32_t nstacks = intern_count(p->stacks), nsamples = intern_count(p->samples);
	size_t total = 0, nxl_ptrs = 0, xl_off = 0;

	/* Labels mirror profile.labels; a label set is a slice of label_ptrs. */
	b->labels = alloc_n(p->nlabels, sizeof(*b->labels));
	b->label_ptrs = alloc_n(p->nlabels, sizeof(*b->label_ptrs));
	b->stack_off = alloc_n((size_t)nstacks + 1, sizeof(*b->stack_off));
	b->samples = alloc_n(nsamples, sizeof(*b->samples));
	b->sample_ptrs = alloc_n(nsamples, sizeof(*b->sample_ptrs));
	b->values = alloc_n((size_t)nsamples * 3, sizeof(*b->values));
	if (!b->labels || !b->label_ptrs || !b->stack_off || !b->samples || !b->sample_ptrs || !b->values)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->nlabels; i++) {
		const struct prof_label *l = &p->labels[i];

		b->labels[i] = (pb_label)PERFTOOLS__PROFILES__LABEL__INIT;
		b->labels[i].key = l->key_str;
		b->labels[i].str = l->str_str;
		b->labels[i].num = l->num;
		b->labels[i].num_unit = l->num_unit_str;
		b->label_ptrs[i] = &b->labels[i];
	}

	/* Each distinct stack's location ids are converted once and shared by
	 * every sample (label set) that has it. */
	for (uint32_t s = 1; s <= nstacks; s++) {
		size_t n;

		profile_stack(p, s, &n);
		b->stack_off[s] = total;
		total += n;
	}
	b->stack_ids = alloc_n(total, sizeof(*b->stack_ids));
	for (uint32_t i = 1; b->nxl && i <= nsamples; i++) {
		struct prof_sample_key k = profile_sample_key(p, i);

		nxl_ptrs += (k.labelset_id ? p->lsets[k.labelset_id].nlabels : 0) + b->nxl;
	}
	b->sample_labels = b->nxl ? alloc_n(nxl_ptrs, sizeof(*b->sample_labels)) : NULL;
	if (!b->stack_ids || (b->nxl && !b->sample_labels))
		return -ENOMEM;
	for (uint32_t s = 1; s <= nstacks; s++) {
		size_t n;
		const unsigned char *raw = profile_stack(p, s, &n);

		for (size_t i = 0; i < n; i++)
			b->stack_ids[b->stack_off[s] + i] = stack_loc(raw, i);
	}

	for (uint32_t i = 1; i <= nsamples; i++) {
		struct prof_sample_key k = profile_sample_key(p, i);
		pb_sample *ps = &b->samples[i - 1];
		int64_t *v = &b->values[(size_t)(i - 1) * 3];
		size_t n;

		profile_stack(p, k.stack_id, &n);
		*ps = (pb_sample)PERFTOOLS__PROFILES__SAMPLE__INIT;
		ps->n_location_id = n;
		ps->location_id = n ? &b->stack_ids[b->stack_off[k.stack_id]] : NULL;
		/* The value types of encode_raw(): samples, then cpu and/or off_cpu. */
		v[0] = p->counts[i];
		v[1] = p->values == PROF_VALUES_OFFCPU ? profile_off_ns(p, i) : p->counts[i] * p->period;
		v[2] = profile_off_ns(p, i);
		ps->n_value = p->values == PROF_VALUES_WALL ? 3 : 2;
		ps->value = v;
		if (k.labelset_id) {
			const struct prof_lset *ls = &p->lsets[k.labelset_id];

			ps->n_label = ls->nlabels;
			ps->label = ls->nlabels ? &b->label_ptrs[ls->first_label] : NULL;
		}
		if (b->nxl)
			xl_off = add_sample_labels(b, ps, xl_off);
		b->sample_ptrs[i - 1] = ps;
	}
	msg->n_sample = nsamples;
	msg->sample = b->sample_ptrs;
	return 0;
}

static int encode_raw(const struct profile *p, const struct series_label *xl, size_t nxl, uint8_t **ret_buf,
		      size_t *ret_len)
{
	pb_profile msg = PERFTOOLS__PROFILES__PROFILE__INIT;
	struct pb_build b = { .xl = xl, .nxl = nxl };
	int64_t extra[EXTRA__MAX];
	uint8_t *buf = NULL;
	size_t nstr, len;
	int err;

	err = build_strings(p, &b, &nstr, extra);
	if (!err)
		err = build_mappings(p, &b, &msg);
	if (!err)
		err = build_functions(p, &b, &msg);
	if (!err)
		err = build_locations(p, &b, &msg);
	if (!err)
		err = build_samples(p, &b, &msg);
	if (err)
		goto out;
	b.comments = alloc_n(p->ncomments, sizeof(*b.comments));
	if (!b.comments) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < p->ncomments; i++)
		b.comments[i] = p->comments[i];

	for (int i = 0; i < 4; i++)
		b.vt[i] = (pb_value_type)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	b.vt[0].type = extra[EXTRA_SAMPLES];
	b.vt[0].unit = extra[EXTRA_COUNT];
	b.vt[1].type = extra[p->values == PROF_VALUES_OFFCPU ? EXTRA_OFFCPU : EXTRA_CPU];
	b.vt[1].unit = extra[EXTRA_NANOSECONDS];
	b.vt[2].type = extra[EXTRA_OFFCPU];
	b.vt[2].unit = extra[EXTRA_NANOSECONDS];
	b.vt[3] = b.vt[1]; /* the period: an on-CPU sample's, or (off-CPU alone) the threshold */
	for (int i = 0; i < 3; i++)
		b.vt_ptrs[i] = &b.vt[i];

	msg.n_sample_type = p->values == PROF_VALUES_WALL ? 3 : 2;
	msg.sample_type = b.vt_ptrs;
	msg.n_string_table = nstr;
	msg.string_table = b.strtab;
	msg.time_nanos = p->time_nanos;
	msg.duration_nanos = p->duration_nanos;
	msg.period_type = &b.vt[3];
	msg.period = p->period;
	msg.n_comment = p->ncomments;
	msg.comment = b.comments;
	msg.default_sample_type = b.vt[1].type;

	len = perftools__profiles__profile__get_packed_size(&msg);
	buf = malloc(len ? len : 1);
	if (!buf) {
		err = -ENOMEM;
		goto out;
	}
	perftools__profiles__profile__pack(&msg, buf);
	*ret_buf = buf;
	*ret_len = len;
out:
	pb_build_free(&b);
	return err;
}

int encode_pprof_raw(const struct profile *p, uint8_t **ret_buf, size_t *ret_len)
{
	return encode_raw(p, NULL, 0, ret_buf, ret_len);
}

int encode_pprof_labeled(const struct profile *p, const struct series_label *labels, size_t n, uint8_t **ret_buf,
			 size_t *ret_len)
{
	uint8_t *raw = NULL;
	size_t len;
	int err;

	err = encode_raw(p, labels, n, &raw, &len);
	if (!err)
		err = gzip_compress(raw, len, ret_buf, ret_len);
	free(raw);
	return err;
}

int encode_pprof(const struct profile *p, uint8_t **ret_buf, size_t *ret_len)
{
	return encode_pprof_labeled(p, NULL, 0, ret_buf, ret_len);
}
