/* profile_data.h: the layout of an aggregated profile (aggregate.c builds it), the
 * read-only interface of the stages that take profiles apart: the encoders and read back. */
#ifndef PROWL_PROFILE_DATA_H
#define PROWL_PROFILE_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "intern.h"

#include <string.h>

/* All *_str fields are ids in profile.strings; 0 means "" (never interned), so
 * a string id is also its index in the pprof string table. Every per-id array
 * below is indexed by the id (1..n) of the matching intern table; slot 0 unused. */

struct prof_map {
	uint64_t start, limit, offset;
	uint32_t filename_str, build_id_str;
	bool is_main, is_kernel, is_python, is_java, is_js;
};

/* Also the interning key of a function, hence the explicit padding. */
struct prof_func {
	uint32_t name_str, system_name_str, file_str, _pad;
	int64_t start_line;
};

struct prof_line {
	uint32_t function_id;
	int64_t line;
};

struct prof_loc {
	uint64_t addr;
	uint32_t mapping_id; /* 0 when the address is in no known mapping */
	uint32_t first_line; /* index into profile.lines */
	uint32_t nlines;     /* innermost first */
	bool symbolized;
};

/* Also the interning key of a label set (a sorted array of these). */
struct prof_label {
	uint32_t key_str, str_str, num_unit_str, _pad;
	int64_t num;
};

struct prof_lset {
	uint32_t first_label; /* index into profile.labels */
	uint32_t nlabels;
};

/* The sample types of the encoded profiles (pprof, OTLP) and of --sample-type:
 * each measured in nanoseconds beside "samples" of unit "count". */
#define PROF_TYPE_CPU    "cpu"
#define PROF_TYPE_OFFCPU "off_cpu"

/* What a profile's samples measure (profile_set_values). */
enum prof_values {
	PROF_VALUES_CPU = 0, /* counts: on-CPU samples of period ns each */
	PROF_VALUES_OFFCPU,  /* off_ns: off-CPU time; counts: the waits kept */
	PROF_VALUES_WALL,    /* both: counts on-CPU samples, off_ns off-CPU time */
};

struct profile {
	struct intern *strings;
	struct intern *mappings;  /* key: the caller's uint64_t mapping key */
	struct intern *functions; /* key: struct prof_func */
	struct intern *locations; /* key: struct prof_loc_key */
	struct intern *labelsets; /* key: sorted struct prof_label[] */
	struct intern *stacks;    /* key: uint32_t loc_ids[], leaf first */
	struct intern *samples;   /* key: struct prof_sample_key */

	struct prof_map *maps;
	struct prof_func *funcs;
	struct prof_loc *locs;
	struct prof_lset *lsets;
	uint32_t *stack_nsym; /* symbolized locations in each stack */
	int64_t *counts;      /* per sample (label set, stack) id */
	int64_t *off_ns;      /* the same, off-CPU nanoseconds (NULL until one is added) */
	uint32_t maps_cap, funcs_cap, locs_cap, lsets_cap, stacks_cap, counts_cap, off_cap;
	enum prof_values values; /* which values the samples carry (configuration, like period) */

	struct prof_line *lines;
	struct prof_label *labels;
	uint32_t *comments; /* string ids */
	uint32_t nlines, lines_cap, nlabels, labels_cap, ncomments, comments_cap;

	uint32_t main_mapping; /* 0 when no mapping was added with is_main */
	int64_t period, time_nanos, duration_nanos;
	uint64_t total_samples, frames, frames_symbolized;
};

struct prof_loc_key {
	uint64_t addr;
	uint32_t mapping_id, variant;
};

struct prof_sample_key {
	uint32_t labelset_id; /* 0 for no labels */
	uint32_t stack_id;
};

/* Interned keys are not aligned, so they are read through memcpy. */
static inline struct prof_sample_key profile_sample_key(const struct profile *p, uint32_t sample_id)
{
	struct prof_sample_key k;

	memcpy(&k, intern_key(p->samples, sample_id, NULL), sizeof(k));
	return k;
}

/* Raw location ids of a stack (leaf first) and their number; see stack_loc(). */
static inline const unsigned char *profile_stack(const struct profile *p, uint32_t stack_id, size_t *ret_n)
{
	size_t len;
	const unsigned char *raw = intern_key(p->stacks, stack_id, &len);

	*ret_n = len / sizeof(uint32_t);
	return raw;
}

static inline uint32_t stack_loc(const unsigned char *raw, size_t i)
{
	uint32_t id;

	memcpy(&id, raw + i * sizeof(id), sizeof(id));
	return id;
}

/* Sample sid's off-CPU nanoseconds (0 when it has none). */
static inline int64_t profile_off_ns(const struct profile *p, uint32_t sid)
{
	return p->off_ns && sid < p->off_cap ? p->off_ns[sid] : 0;
}

/* Sample sid's one value for the formats that show one (folded, HTML, the
 * views): on-CPU samples; off-CPU ns; or for --wall both in ns. */
static inline int64_t profile_value(const struct profile *p, uint32_t sid)
{
	if (p->values == PROF_VALUES_OFFCPU)
		return profile_off_ns(p, sid);
	if (p->values == PROF_VALUES_WALL)
		return p->counts[sid] * p->period + profile_off_ns(p, sid);
	return p->counts[sid];
}

/* The C string of a string id; "" for 0. */
static inline const char *profile_str(const struct profile *p, uint32_t str_id)
{
	return str_id ? intern_str(p->strings, str_id) : "";
}

#endif
