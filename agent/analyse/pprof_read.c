/* pprof_read.c: decodes a pprof Profile with protobuf-c, checks every string index
 * and id before use, and re-interns its locations and samples into an aggregate profile. */
#include "analyse/pprof_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "profile_data.h"
#include "window.h"
#include "gzip.h"
#include "intern.h"
#include "profile.pb-c.h"
#include "u64map.h"

typedef Perftools__Profiles__Profile pb_profile;

/* Stacks deeper than this are refused: prowl itself never writes more than a few
 * hundred frames, and the bound keeps a hostile file's per-sample work small. */
#define MAX_STACK_DEPTH 65536
/* The sum of a file's sample counts; far above any real capture, far below overflow. */
#define MAX_FILE_SAMPLES (1ll << 50)

/* An id -> index table: dense ids 1..n need no map. */
struct id_index {
	struct u64map map;
	size_t n;
	bool dense;
};

struct pprof_msg {
	pb_profile *pb;
	size_t count_idx; /* the samples/count value */
	struct id_index funcs, maps, locs;
	uint64_t samples;
	const char **series; /* "NAME=VALUE", pointing into the string table */
	size_t nseries;
};

static bool str_ok(const pb_profile *pb, int64_t idx)
{
	return idx >= 0 && (uint64_t)idx < pb->n_string_table;
}

static const char *str_at(const pb_profile *pb, int64_t idx)
{
	return pb->string_table[idx];
}

/* Builds the index of ids[i] (i < n); -EBADMSG for a 0 or repeated id. */
static int id_index_build(struct id_index *ix, size_t n, uint64_t (*id_of)(const pb_profile *, size_t),
			  const pb_profile *pb)
{
	ix->n = n;
	ix->dense = true;
	for (size_t i = 0; i < n; i++) {
		if (id_of(pb, i) != i + 1) {
			ix->dense = false;
			break;
		}
	}
	if (ix->dense)
		return 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t id = id_of(pb, i);

		if (id == 0 || u64map_get(&ix->map, id, NULL))
			return -EBADMSG;
		if (u64map_put(&ix->map, id, i) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Index of id, or -1 when there is none. */
static ssize_t id_index_get(const struct id_index *ix, uint64_t id)
{
	uint64_t v;

	if (ix->dense)
		return id >= 1 && id <= ix->n ? (ssize_t)(id - 1) : -1;
	return u64map_get(&ix->map, id, &v) ? (ssize_t)v : -1;
}

static uint64_t func_id(const pb_profile *pb, size_t i) { return pb->function[i]->id; }
static uint64_t map_id(const pb_profile *pb, size_t i) { return pb->mapping[i]->id; }
static uint64_t loc_id(const pb_profile *pb, size_t i) { return pb->location[i]->id; }

void pprof_msg_free(struct pprof_msg *m)
{
	if (!m)
		return;
	if (m->pb)
		perftools__profiles__profile__free_unpacked(m->pb, NULL);
	u64map_free(&m->funcs.map);
	u64map_free(&m->maps.map);
	u64map_free(&m->locs.map);
	free(m->series);
	free(m);
}

static bool is_str(const pb_profile *pb, int64_t idx, const char *want)
{
	return str_ok(pb, idx) && strcmp(str_at(pb, idx), want) == 0;
}

/* Checks every reference in the message. Returns NULL or what is wrong. */
static const char *validate(struct pprof_msg *m)
{
	const pb_profile *pb = m->pb;
	bool found = false;
	uint64_t sum = 0;
	int r;

	if (pb->n_string_table == 0 || pb->string_table[0][0] != 0)
		return "its string table does not start with the empty string";
	if (pb->n_sample_type == 0)
		return "it has no sample types";
	for (size_t i = 0; i < pb->n_sample_type; i++) {
		const Perftools__Profiles__ValueType *vt = pb->sample_type[i];

		if (!str_ok(pb, vt->type) || !str_ok(pb, vt->unit))
			return "a sample type names a string that is not in the string table";
		if (!found && is_str(pb, vt->type, "samples") && is_str(pb, vt->unit, "count")) {
			m->count_idx = i;
			found = true;
		}
	}
	if (!found)
		return "it is not a CPU sample profile: none of its sample types is samples/count";
	if (pb->period_type && (!str_ok(pb, pb->period_type->type) || !str_ok(pb, pb->period_type->unit)))
		return "its period type names a string that is not in the string table";
	if (pb->period < 0 || pb->duration_nanos < 0)
		return "its period or duration is negative";
	for (size_t i = 0; i < pb->n_comment; i++)
		if (!str_ok(pb, pb->comment[i]))
			return "a comment names a string that is not in the string table";

	r = id_index_build(&m->funcs, pb->n_function, func_id, pb);
	if (!r)
		r = id_index_build(&m->maps, pb->n_mapping, map_id, pb);
	if (!r)
		r = id_index_build(&m->locs, pb->n_location, loc_id, pb);
	if (r == -ENOMEM)
		return "out of memory";
	if (r)
		return "a function, mapping or location id is 0 or used twice";
	for (size_t i = 0; i < pb->n_function; i++) {
		const Perftools__Profiles__Function *f = pb->function[i];

		if (!str_ok(pb, f->name) || !str_ok(pb, f->system_name) || !str_ok(pb, f->filename))
			return "a function names a string that is not in the string table";
	}
	for (size_t i = 0; i < pb->n_mapping; i++)
		if (!str_ok(pb, pb->mapping[i]->filename) || !str_ok(pb, pb->mapping[i]->build_id))
			return "a mapping names a string that is not in the string table";
	for (size_t i = 0; i < pb->n_location; i++) {
		const Perftools__Profiles__Location *l = pb->location[i];

		if (l->mapping_id && id_index_get(&m->maps, l->mapping_id) < 0)
			return "a location refers to a mapping that does not exist";
		for (size_t j = 0; j < l->n_line; j++)
			if (id_index_get(&m->funcs, l->line[j]->function_id) < 0)
				return "a location's line refers to a function that does not exist";
	}
	for (size_t i = 0; i < pb->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pb->sample[i];
		int64_t v;

		if (s->n_value != pb->n_sample_type)
			return "a sample has a different number of values than there are sample types";
		v = s->value[m->count_idx];
		if (v < 0)
			return "a sample has a negative count (a diff of two profiles cannot be read)";
		if ((uint64_t)v > MAX_FILE_SAMPLES - sum)
			return "its sample counts add up to more than 2^50";
		sum += (uint64_t)v;
		if (s->n_location_id > MAX_STACK_DEPTH)
			return "a sample's stack is deeper than 65536 frames";
		for (size_t j = 0; j < s->n_location_id; j++)
			if (id_index_get(&m->locs, s->location_id[j]) < 0)
				return "a sample refers to a location that does not exist";
		for (size_t j = 0; j < s->n_label; j++) {
			const Perftools__Profiles__Label *l = s->label[j];

			if (!str_ok(pb, l->key) || l->key == 0 || !str_ok(pb, l->str) || !str_ok(pb, l->num_unit))
				return "a sample label names a string that is not in the string table";
		}
	}
	m->samples = sum;
	return NULL;
}

static int collect_series_labels(struct pprof_msg *m)
{
	static const char prefix[] = PROWL_SERIES_LABEL_COMMENT;
	const pb_profile *pb = m->pb;

	m->series = calloc(pb->n_comment ? pb->n_comment : 1, sizeof(*m->series));
	if (!m->series)
		return -ENOMEM;
	for (size_t i = 0; i < pb->n_comment; i++) {
		const char *c = str_at(pb, pb->comment[i]);

		if (strncmp(c, prefix, sizeof(prefix) - 1) == 0 && strchr(c + sizeof(prefix) - 1, '=') &&
		    c[sizeof(prefix) - 1] != '=')
			m->series[m->nseries++] = c + sizeof(prefix) - 1;
	}
	return 0;
}

int pprof_decode(const void *buf, size_t len, struct pprof_msg **ret, const char **ret_why)
{
	const uint8_t *b = buf;
	uint8_t *raw = NULL;
	struct pprof_msg *m;
	const char *why;
	int r;

	*ret_why = NULL;
	if (len > PPROF_MAX_BYTES) {
		*ret_why = "it is larger than 256 MiB";
		return -EFBIG;
	}
	if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b) {
		r = gzip_decompress(buf, len, PPROF_MAX_BYTES, &raw, &len);
		if (r < 0) {
			*ret_why = r == -EFBIG ? "it inflates to more than 256 MiB"
				 : r == -ENOMEM ? "out of memory" : "its gzip stream is corrupt or truncated";
			return r;
		}
		b = raw;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		free(raw);
		*ret_why = "out of memory";
		return -ENOMEM;
	}
	m->pb = len ? perftools__profiles__profile__unpack(NULL, len, b) : NULL;
	free(raw);
	if (!m->pb) {
		pprof_msg_free(m);
		*ret_why = len ? "it is not a pprof profile (protobuf decoding failed)" : "it is empty";
		return -EBADMSG;
	}
	why = validate(m);
	if (!why && collect_series_labels(m) < 0)
		why = "out of memory";
	if (why) {
		pprof_msg_free(m);
		*ret_why = why;
		return strcmp(why, "out of memory") == 0 ? -ENOMEM : -EBADMSG;
	}
	*ret = m;
	return 0;
}

void pprof_msg_info(const struct pprof_msg *m, struct pprof_info *ret)
{
	const pb_profile *pb = m->pb;
	size_t off = 0;

	*ret = (struct pprof_info){
		.time_nanos = pb->time_nanos,
		.duration_nanos = pb->duration_nanos,
		.period = pb->period,
		.period_type = "",
		.samples = m->samples,
		.value_type = str_at(pb, pb->sample_type[m->count_idx]->type),
	};
	for (size_t i = 0; i < pb->n_sample_type && off < sizeof(ret->sample_types); i++) {
		int n = snprintf(ret->sample_types + off, sizeof(ret->sample_types) - off, "%s%s/%s", i ? "," : "",
				 str_at(pb, pb->sample_type[i]->type), str_at(pb, pb->sample_type[i]->unit));

		off += n > 0 ? (size_t)n : 0;
	}
	if (pb->period_type)
		ret->period_type = str_at(pb, pb->period_type->type);
}

int pprof_msg_select(struct pprof_msg *m, const char *type, const char **ret_why)
{
	const pb_profile *pb = m->pb;
	uint64_t sum = 0;
	size_t idx;

	*ret_why = NULL;
	if (!type) {
		if (!is_str(pb, pb->default_sample_type, PROF_TYPE_OFFCPU))
			return 0;
		type = PROF_TYPE_OFFCPU;
	}
	for (idx = 0; idx < pb->n_sample_type; idx++)
		if (is_str(pb, pb->sample_type[idx]->type, type))
			break;
	if (idx == pb->n_sample_type) {
		*ret_why = strcmp(type, PROF_TYPE_OFFCPU) == 0
				   ? "it has no sample type 'off_cpu' (record it with prowl record --off-cpu or --wall)"
				   : "it has no sample type of that name (prowl's are samples, cpu and off_cpu)";
		return -EBADMSG;
	}
	for (size_t i = 0; i < pb->n_sample; i++) {
		int64_t v = pb->sample[i]->value[idx];

		if (v < 0) {
			*ret_why = "a sample has a negative value (a diff of two profiles cannot be read)";
			return -EBADMSG;
		}
		if ((uint64_t)v > MAX_FILE_SAMPLES - sum) {
			*ret_why = "its values of that sample type add up to more than 2^50";
			return -EBADMSG;
		}
		sum += (uint64_t)v;
	}
	m->count_idx = idx;
	m->samples = sum;
	return 0;
}

const char *pprof_msg_series_label_at(const struct pprof_msg *m, size_t i)
{
	return i < m->nseries ? m->series[i] : NULL;
}

const char *pprof_msg_series_label(const struct pprof_msg *m, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < m->nseries; i++)
		if (strncmp(m->series[i], name, n) == 0 && m->series[i][n] == '=')
			return m->series[i] + n + 1;
	return NULL;
}

/* Per-message state of a merge: message index -> profile id. */
struct merge {
	const struct pprof_msg *m;
	struct profile *p;
	uint32_t *map_ids, *loc_ids;
	struct prof_frame *frames;
	size_t frames_cap;
};

static int merge_mapping(struct merge *g, size_t i, bool is_main)
{
	const pb_profile *pb = g->m->pb;
	const Perftools__Profiles__Mapping *pm = pb->mapping[i];
	const char *file = str_at(pb, pm->filename), *bid = str_at(pb, pm->build_id);
	uint64_t h[5] = { pm->memory_start, pm->memory_limit, pm->file_offset,
			  hash_bytes(file, strlen(file)), hash_bytes(bid, strlen(bid)) };
	struct prof_mapping_in in = {
		.key = hash_bytes(h, sizeof(h)),
		.start = pm->memory_start,
		.limit = pm->memory_limit,
		.offset = pm->file_offset,
		.filename = file,
		.build_id = bid,
		.is_main = is_main,
		.is_kernel = strncmp(file, "[kernel", 7) == 0,
		.is_python = strcmp(file, "[python]") == 0,
		.is_java = strcmp(file, "[java]") == 0,
		.is_js = strcmp(file, "[js]") == 0,
	};

	return profile_mapping(g->p, &in, &g->map_ids[i]);
}

static uint64_t hash_mix(uint64_t h, const void *p, size_t n)
{
	return (h ^ hash_bytes(p, n)) * 0x100000001b3ull;
}

static int merge_location(struct merge *g, size_t i)
{
	const pb_profile *pb = g->m->pb;
	const Perftools__Profiles__Location *l = pb->location[i];
	uint32_t map = 0;
	uint64_t h = 0;

	if (l->n_line > g->frames_cap) {
		struct prof_frame *f = realloc(g->frames, l->n_line * sizeof(*f));

		if (!f)
			return -ENOMEM;
		g->frames = f;
		g->frames_cap = l->n_line;
	}
	if (l->mapping_id)
		map = g->map_ids[id_index_get(&g->m->maps, l->mapping_id)];
	for (size_t j = 0; j < l->n_line; j++) {
		const Perftools__Profiles__Function *f = pb->function[id_index_get(&g->m->funcs, l->line[j]->function_id)];
		struct prof_frame *fr = &g->frames[j];

		*fr = (struct prof_frame){
			.function = str_at(pb, f->name),
			.system_name = str_at(pb, f->system_name),
			.file = str_at(pb, f->filename),
			.line = l->line[j]->line,
			.start_line = f->start_line,
		};
		if (!fr->function[0])
			fr->function = fr->system_name[0] ? fr->system_name : "[unknown]";
		h = hash_mix(h, fr->function, strlen(fr->function));
		h = hash_mix(h, fr->file, strlen(fr->file));
		h = hash_mix(h, &fr->line, sizeof(fr->line));
	}
	/* Locations of one address in one mapping that name different frames (foreign
	 * files without addresses, kernels of different boots) are kept apart. */
	return profile_add_location_variant(g->p, map, l->address, (uint32_t)(h ^ h >> 32), g->frames,
					    l->n_line, l->n_line > 0, &g->loc_ids[i]);
}

static bool label_matches(const pb_profile *pb, const Perftools__Profiles__Sample *s, const struct pprof_filter *f)
{
	for (size_t j = 0; j < s->n_label; j++) {
		const Perftools__Profiles__Label *l = s->label[j];
		char num[32];

		if (strcmp(str_at(pb, l->key), f->key) != 0)
			continue;
		if (l->str)
			return strcmp(str_at(pb, l->str), f->value) == 0;
		snprintf(num, sizeof(num), "%lld", (long long)l->num);
		return strcmp(num, f->value) == 0;
	}
	return false;
}

static int merge_sample(struct merge *g, const Perftools__Profiles__Sample *s, uint32_t *stack, uint64_t *sum)
{
	const pb_profile *pb = g->m->pb;
	struct prof_label_in local[8], *labels = local;
	int64_t count = s->value[g->m->count_idx];
	uint32_t ls = 0; /* no labels */
	int r = 0;

	if (count == 0)
		return 0;
	if (s->n_label > 8) {
		labels = calloc(s->n_label, sizeof(*labels));
		if (!labels)
			return -ENOMEM;
	}
	for (size_t j = 0; j < s->n_label; j++) {
		const Perftools__Profiles__Label *l = s->label[j];

		labels[j] = (struct prof_label_in){
			.key = str_at(pb, l->key),
			.str = l->str ? str_at(pb, l->str) : NULL,
			.num = l->num,
			.num_unit = str_at(pb, l->num_unit),
		};
	}
	if (s->n_label)
		r = profile_labelset(g->p, labels, s->n_label, &ls);
	if (labels != local)
		free(labels);
	if (r < 0)
		return r;
	for (size_t j = 0; j < s->n_location_id; j++)
		stack[j] = g->loc_ids[id_index_get(&g->m->locs, s->location_id[j])];
	r = profile_add_sample(g->p, ls, stack, s->n_location_id, count);
	if (r == 0)
		*sum += (uint64_t)count;
	return r;
}

int pprof_msg_merge(const struct pprof_msg *m, struct profile *p, const struct pprof_filter *f, size_t nf,
		    bool main_mapping, uint64_t *ret_samples)
{
	const pb_profile *pb = m->pb;
	struct merge g = { .m = m, .p = p };
	uint32_t *stack = NULL;
	size_t depth = 1;
	uint64_t sum = 0;
	int r = -ENOMEM;

	for (size_t i = 0; i < pb->n_sample; i++)
		if (pb->sample[i]->n_location_id > depth)
			depth = pb->sample[i]->n_location_id;
	g.map_ids = calloc(pb->n_mapping + 1, sizeof(*g.map_ids));
	g.loc_ids = calloc(pb->n_location + 1, sizeof(*g.loc_ids));
	stack = calloc(depth, sizeof(*stack));
	if (!g.map_ids || !g.loc_ids || !stack)
		goto out;
	for (size_t i = 0; i < pb->n_mapping; i++) {
		r = merge_mapping(&g, i, main_mapping && i == 0);
		if (r < 0)
			goto out;
	}
	for (size_t i = 0; i < pb->n_location; i++) {
		r = merge_location(&g, i);
		if (r < 0)
			goto out;
	}
	r = 0;
	for (size_t i = 0; i < pb->n_sample && !r; i++) {
		const Perftools__Profiles__Sample *s = pb->sample[i];
		bool keep = true;

		for (size_t k = 0; k < nf && keep; k++)
			keep = label_matches(pb, s, &f[k]);
		if (keep)
			r = merge_sample(&g, s, stack, &sum);
	}
	if (!r)
		*ret_samples = sum;
out:
	free(g.map_ids);
	free(g.loc_ids);
	free(g.frames);
	free(stack);
	return r;
}
