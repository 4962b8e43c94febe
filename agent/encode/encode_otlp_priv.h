/* encode_otlp_priv.h: the OTLP encoder's shared state: protobuf-c type names, the
 * dictionary's interning keys and the build, for encode_otlp.c and encode_otlp_dict.c. */
#ifndef PROWL_ENCODE_OTLP_PRIV_H
#define PROWL_ENCODE_OTLP_PRIV_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#include "aggregate.h"
#include "profile_data.h"
#include "intern.h"
#include "otlp_profiles_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest pb_request;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary pb_dict;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles pb_resprof;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles pb_scopeprof;
typedef Opentelemetry__Proto__Profiles__V1development__Profile pb_profile;
typedef Opentelemetry__Proto__Profiles__V1development__Sample pb_sample;
typedef Opentelemetry__Proto__Profiles__V1development__Stack pb_stack;
typedef Opentelemetry__Proto__Profiles__V1development__Location pb_location;
typedef Opentelemetry__Proto__Profiles__V1development__Line pb_line;
typedef Opentelemetry__Proto__Profiles__V1development__Function pb_function;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping pb_mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Link pb_link;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType pb_value_type;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit pb_kvu;
typedef Opentelemetry__Proto__Resource__V1__Resource pb_resource;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope pb_scope;
typedef Opentelemetry__Proto__Common__V1__KeyValue pb_kv;
typedef Opentelemetry__Proto__Common__V1__AnyValue pb_any;

#define PB(name) OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__##name##__INIT

/* Interning keys of the shared dictionary. Explicit padding keeps them free of
 * indeterminate bytes; intern keys are unaligned, so they are read by memcpy. */
enum { ATTR_STR = 1, ATTR_INT = 3 }; /* AnyValue field numbers */

struct attr_key {
	int32_t key_str, unit_str, kind, str;
	int64_t num;
};

struct map_key {
	uint64_t start, limit, offset;
	int32_t filename_str, attr; /* attr: build id attribute, 0 if none */
};

struct func_key {
	int32_t name_str, system_name_str, filename_str, _pad;
	int64_t start_line;
};

/* A location key is this header followed by nlines struct line_key. */
struct loc_head {
	uint64_t addr;
	int32_t mapping, attr; /* attr: profile.frame.type */
	uint32_t nlines, _pad;
};

struct line_key {
	int32_t function, _pad;
	int64_t line;
};

/* One resource: a series and a process within it. */
struct res_key {
	uint32_t series;
	int32_t pname_str; /* process.executable.name, 0 if unknown */
	int32_t has_pid, _pad;
	int64_t pid;
};

/* Samples are identified by {stack, attributes, link} within their resource;
 * the link is always 0 here. */
struct sample_key {
	uint32_t res, attrset; /* ids in otlp_build.res / .attrsets */
	int32_t stack, _pad;
};

/* A bump allocator for the message tree, freed at once. */
struct arena_chunk {
	struct arena_chunk *next;
	size_t used, cap;
	alignas(max_align_t) unsigned char data[];
};

struct otlp_build {
	struct intern *strs;     /* non-empty strings; id == string_table index */
	struct intern *attrs;    /* struct attr_key; id == attribute_table index */
	struct intern *maps;     /* struct map_key; id == mapping_table index */
	struct intern *funcs;    /* struct func_key; id == function_table index */
	struct intern *locs;     /* loc_head + lines; id == location_table index */
	struct intern *stacks;   /* int32 location indices; id == stack_table index */
	struct intern *attrsets; /* sorted int32 attribute indices of a sample */
	struct intern *res;      /* struct res_key; id - 1 == resource_profiles index */
	struct intern *samples;  /* struct sample_key */
	int64_t *counts;         /* per sample id */
	int64_t *off_ns;         /* per sample id: off-CPU nanoseconds (a profile with off_cpu values) */
	uint32_t counts_cap;
	int32_t frame_native, frame_kernel, frame_python, frame_java, frame_js; /* profile.frame.type attributes, 0 until used */
	unsigned char *scratch;  /* a location key being built */
	size_t scratch_cap;
	struct arena_chunk *arena;
};

#define ARENA_NEW(b, ptr, count) ((ptr) = otlp_arena_alloc((b), sizeof(*(ptr)), (count)))

/* encode_otlp_dict.c */
void *otlp_arena_alloc(struct otlp_build *b, size_t n, size_t count);
void otlp_build_free(struct otlp_build *b);
int otlp_dict_str(struct otlp_build *b, const char *s, int32_t *ret);
int otlp_add_series(struct otlp_build *b, uint32_t series, const struct profile *p);

#endif
