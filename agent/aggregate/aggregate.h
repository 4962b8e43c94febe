/* aggregate.h: the aggregate stage. Interns mappings, functions, locations, stacks
 * and label sets, and keeps one count per (label set, stack) pair. */
#ifndef PROWL_AGGREGATE_H
#define PROWL_AGGREGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct profile;

/* The pseudo-mappings of the frames prowl makes up: its markers ("[truncated: ...]",
 * "[python: ...]") and "[unknown]+0xADDR" for an address no mapping covers. No process
 * can name a mapping so (paths are absolute, anonymous names "[anon:...]"), so readers
 * tell these from functions of the same text by the mapping. */
#define PROF_MARKER_MAPPING  "[prowl]"
#define PROF_UNKNOWN_MAPPING "[unknown]"

/* A mapping as the caller knows it. `key` is the caller's stable identity for
 * it (the symbolizer's module id); a second call with the same key returns the
 * same id and ignores the other fields. */
struct prof_mapping_in {
	uint64_t key;
	uint64_t start, limit, offset; /* the range Location addresses fall in */
	const char *filename;
	const char *build_id;          /* hex, or NULL/"" */
	bool is_main;                  /* encoded as mapping[0] (first one wins) */
	bool is_kernel;
	bool is_python;                /* CPython frames (the [python] mapping) */
	bool is_java;                  /* Java frames (the [java] mapping) */
	bool is_js;                    /* node's JavaScript frames (the [js] mapping) */
};

/* One frame of a location, innermost (inlined callee) first. */
struct prof_frame {
	const char *function;    /* never NULL; a fallback like "libfoo.so+0x1a2b" when unknown */
	const char *system_name; /* mangled/linkage name, or NULL */
	const char *file;        /* source file, or NULL */
	int64_t line;            /* 0 when unknown */
	int64_t start_line;      /* the function's declaration line, 0 when unknown */
};

struct prof_label_in {
	const char *key;
	const char *str;      /* string label, or NULL for a numeric one */
	int64_t num;
	const char *num_unit; /* optional, numeric labels only */
};

struct profile_stats {
	uint64_t samples;   /* sum of counts */
	uint32_t stacks;    /* distinct (label set, stack) pairs */
	uint32_t locations, functions, mappings, strings, labelsets;
	uint64_t frames, frames_symbolized; /* over all samples, weighted by count */
	size_t mem_bytes;
};

struct profile *profile_new(void); /* NULL on ENOMEM */
void profile_free(struct profile *p); /* accepts NULL */
/* Forgets everything (samples, stacks, locations, strings, metadata). */
void profile_reset(struct profile *p);

void profile_set_period(struct profile *p, int64_t period_ns);
enum prof_values;
/* What the samples measure (profile_data.h): CPU by default. */
void profile_set_values(struct profile *p, enum prof_values values);
void profile_set_time(struct profile *p, int64_t time_nanos, int64_t duration_nanos);
int profile_add_comment(struct profile *p, const char *s);

int profile_mapping(struct profile *p, const struct prof_mapping_in *m, uint32_t *ret_id);
/* Returns the location id for (mapping, address) or 0 if not added yet. */
uint32_t profile_find_location(const struct profile *p, uint32_t mapping_id, uint64_t addr);
/* Location ids are 1..profile_location_count(). */
uint32_t profile_location_count(const struct profile *p);
/* Whether location id is in mapping_id; its address in *ret_addr. */
bool profile_location_in(const struct profile *p, uint32_t id, uint32_t mapping_id, uint64_t *ret_addr);
/* Gives location id new frames (its module got debug info meanwhile). */
int profile_set_location_frames(struct profile *p, uint32_t id, const struct prof_frame *frames, size_t nframes,
				bool symbolized);
/* Adds a location. `symbolized` is false when frames hold only a fallback name. */
int profile_add_location(struct profile *p, uint32_t mapping_id, uint64_t addr,
			 const struct prof_frame *frames, size_t nframes, bool symbolized,
			 uint32_t *ret_id);
/* The same, for a reader of foreign profiles in which one (mapping, address) may
 * name different frames (no addresses, or kernels of different boots): locations
 * with different variants stay apart. profile_add_location() is variant 0. */
int profile_add_location_variant(struct profile *p, uint32_t mapping_id, uint64_t addr, uint32_t variant,
				 const struct prof_frame *frames, size_t nframes, bool symbolized,
				 uint32_t *ret_id);
int profile_labelset(struct profile *p, const struct prof_label_in *labels, size_t n, uint32_t *ret_id);
/* loc_ids are leaf first. count is in samples. */
int profile_add_sample(struct profile *p, uint32_t labelset_id, const uint32_t *loc_ids, size_t n, int64_t count);
/* An off-CPU sample of off_ns nanoseconds: one count in an off-CPU profile, none
 * in a wall-clock one (there counts are on-CPU samples). */
int profile_add_offcpu(struct profile *p, uint32_t labelset_id, const uint32_t *loc_ids, size_t n, int64_t off_ns);

void profile_get_stats(const struct profile *p, struct profile_stats *ret);

/* Top functions by self and total samples (a function counted once per stack
 * for total; inlined frames count as their own functions). */
struct prof_top_entry {
	const char *function; /* valid while the profile is unchanged */
	const char *file;
	int64_t self, total;
};
/* Fills up to max entries sorted by self (by_total=false) or total (true).
 * Returns the number filled or a negative errno. */
int profile_top(const struct profile *p, bool by_total, struct prof_top_entry *ret, size_t max);

#endif
