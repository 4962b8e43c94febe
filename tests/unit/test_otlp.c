/* test_otlp.c: unit tests of the OTLP encoder and exporter; decodes requests with
 * protobuf-c and runs the independent checker (protoc) on good and corrupted bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aggregate.h"
#include "encode_otlp.h"
#include "export.h"
#include "export_otlp.h"
#include "gzip.h"
#include "otlp_profiles_service.pb-c.h"
#include "testutil.h"

#define PERIOD 10000000LL
#define T0 1700000000000000000LL
#define WINDOW 5000000000LL

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest pb_request;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary pb_dict;
typedef Opentelemetry__Proto__Profiles__V1development__Profile pb_profile;
typedef Opentelemetry__Proto__Profiles__V1development__Sample pb_sample;
typedef Opentelemetry__Proto__Profiles__V1development__Location pb_location;
typedef Opentelemetry__Proto__Profiles__V1development__Function pb_function;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping pb_mapping;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit pb_kvu;
typedef Opentelemetry__Proto__Resource__V1__Resource pb_resource;
typedef Opentelemetry__Proto__Common__V1__AnyValue pb_any;

#define STR_CASE OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE
#define INT_CASE OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE

/* Two series sharing code (so the shared dictionary must dedupe across them):
 *   series A (svcA, hostA, env=prod, container_id=c0ffee), profile a:
 *     pid 42 "app", tid 43 "worker":  3 x outer>inlined_leaf <- main
 *                                     5 x do_syscall_64 <- (inl) <- main
 *       the 5 come from two label sets that differ only in the pid's unit,
 *       so they must be aggregated into one sample
 *     pid 42 "app", tid 44 "io":      2 x main
 *     pid 7 "other" (no thread):      4 x do_syscall_64
 *   series B (svcB, hostB), profile b:
 *     pid 42 "app", no thread:        6 x outer>inlined_leaf <- main */
struct fixture {
	struct profile *a, *b;
	struct series_label la[4], lb[2];
	struct export_series series[2];
	struct export_batch batch;
};

static void add_code(struct profile *p, uint32_t *ret_inl, uint32_t *ret_main, uint32_t *ret_kern)
{
	struct prof_frame inl[2] = {
		{ .function = "inlined_leaf", .file = "app.c", .line = 12, .start_line = 10 },
		{ .function = "outer", .system_name = "_Z5outerv", .file = "app.c", .line = 30, .start_line = 25 },
	};
	struct prof_frame fmain = { .function = "main", .file = "app.c", .line = 50, .start_line = 45 };
	struct prof_frame fkern = { .function = "do_syscall_64" };
	uint32_t kmap, umap;

	assert_int_equal(profile_mapping(p, &(struct prof_mapping_in){
		.key = 100, .start = 0xffffffff81000000ull, .limit = 0xffffffffff000000ull,
		.filename = "[kernel.kallsyms]", .is_kernel = true }, &kmap), 0);
	assert_int_equal(profile_mapping(p, &(struct prof_mapping_in){
		.key = 1, .start = 0x1000, .limit = 0x9000, .offset = 0x1000,
		.filename = "/usr/bin/app", .build_id = "abcd01", .is_main = true }, &umap), 0);
	assert_int_equal(profile_add_location(p, umap, 0x1234, inl, 2, true, ret_inl), 0);
	assert_int_equal(profile_add_location(p, umap, 0x2000, &fmain, 1, true, ret_main), 0);
	assert_int_equal(profile_add_location(p, kmap, 0xffffffff81234567ull, &fkern, 1, true, ret_kern), 0);
}

static void fixture_build(struct fixture *f)
{
	struct prof_label_in t43[] = {
		{ .key = "pid", .num = 42 }, { .key = "process_name", .str = "app" },
		{ .key = "tid", .num = 43 }, { .key = "thread_name", .str = "worker" },
	};
	struct prof_label_in t43u[] = {
		{ .key = "pid", .num = 42, .num_unit = "pid" }, { .key = "process_name", .str = "app" },
		{ .key = "tid", .num = 43 }, { .key = "thread_name", .str = "worker" },
	};
	struct prof_label_in t44[] = {
		{ .key = "pid", .num = 42 }, { .key = "process_name", .str = "app" },
		{ .key = "tid", .num = 44 }, { .key = "thread_name", .str = "io" },
	};
	struct prof_label_in p7[] = { { .key = "pid", .num = 7 }, { .key = "process_name", .str = "other" } };
	struct prof_label_in p42[] = { { .key = "process_name", .str = "app" }, { .key = "pid", .num = 42 } };
	uint32_t inl, fmain, kern, ls43, ls43u, ls44, ls7, ls42;

	memset(f, 0, sizeof(*f));
	f->a = profile_new();
	f->b = profile_new();
	assert_non_null(f->a);
	assert_non_null(f->b);
	/* The profiles' own times are superseded by the batch's. */
	profile_set_period(f->a, 1);
	profile_set_time(f->a, 1, 1);

	add_code(f->a, &inl, &fmain, &kern);
	assert_int_equal(profile_labelset(f->a, t43, 4, &ls43), 0);
	assert_int_equal(profile_labelset(f->a, t43u, 4, &ls43u), 0);
	assert_int_not_equal(ls43, ls43u);
	assert_int_equal(profile_labelset(f->a, t44, 4, &ls44), 0);
	assert_int_equal(profile_labelset(f->a, p7, 2, &ls7), 0);
	assert_int_equal(profile_add_sample(f->a, ls43, (uint32_t[]){ inl, fmain }, 2, 1), 0);
	assert_int_equal(profile_add_sample(f->a, ls43, (uint32_t[]){ inl, fmain }, 2, 2), 0);
	assert_int_equal(profile_add_sample(f->a, ls43, (uint32_t[]){ kern, inl, fmain }, 3, 2), 0);
	assert_int_equal(profile_add_sample(f->a, ls43u, (uint32_t[]){ kern, inl, fmain }, 3, 3), 0);
	assert_int_equal(profile_add_sample(f->a, ls44, (uint32_t[]){ fmain }, 1, 2), 0);
	assert_int_equal(profile_add_sample(f->a, ls7, (uint32_t[]){ kern }, 1, 4), 0);
	assert_int_equal(profile_add_sample(f->a, ls7, (uint32_t[]){ fmain }, 1, 0), 0); /* dropped */

	add_code(f->b, &inl, &fmain, &kern);
	assert_int_equal(profile_labelset(f->b, p42, 2, &ls42), 0);
	assert_int_equal(profile_add_sample(f->b, ls42, (uint32_t[]){ inl, fmain }, 2, 6), 0);

	f->la[0] = (struct series_label){ "service_name", "svcA" };
	f->la[1] = (struct series_label){ "host_name", "hostA" };
	f->la[2] = (struct series_label){ "env", "prod" };
	f->la[3] = (struct series_label){ "container_id", "c0ffee" };
	f->lb[0] = (struct series_label){ "service_name", "svcB" };
	f->lb[1] = (struct series_label){ "host_name", "hostB" };
	f->series[0] = (struct export_series){ .labels = f->la, .nlabels = 4, .prof = f->a };
	f->series[1] = (struct export_series){ .labels = f->lb, .nlabels = 2, .prof = f->b };
	f->batch = (struct export_batch){
		.series = f->series, .nseries = 2,
		.start_unix_ns = T0, .end_unix_ns = T0 + WINDOW, .period_ns = PERIOD,
	};
}

static void fixture_free(struct fixture *f)
{
	profile_free(f->a);
	profile_free(f->b);
}

static pb_request *unpack(const uint8_t *buf, size_t len)
{
	pb_request *r = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
		NULL, len, buf);

	assert_non_null(r);
	return r;
}

static void request_free(pb_request *r)
{
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(r, NULL);
}

static const char *str(const pb_dict *d, int32_t i)
{
	assert_true(i >= 0 && (size_t)i < d->n_string_table);
	return d->string_table[i];
}

static const pb_kvu *attr(const pb_dict *d, int32_t i)
{
	assert_true(i > 0 && (size_t)i < d->n_attribute_table);
	return d->attribute_table[i];
}

/* The value of a resource attribute, NULL if absent. */
static const pb_any *res_attr(const pb_resource *r, const char *key)
{
	const pb_any *found = NULL;

	for (size_t i = 0; i < r->n_attributes; i++)
		if (!strcmp(r->attributes[i]->key, key)) {
			assert_null(found); /* keys are unique */
			found = r->attributes[i]->value;
			assert_non_null(found);
		}
	return found;
}

static const char *res_str(const pb_resource *r, const char *key)
{
	const pb_any *v = res_attr(r, key);

	if (!v)
		return NULL;
	assert_int_equal(v->value_case, STR_CASE);
	return v->string_value;
}

/* A sample attribute given by key: its AnyValue, or NULL. */
static const pb_any *sample_attr(const pb_dict *d, const pb_sample *s, const char *key)
{
	for (size_t i = 0; i < s->n_attribute_indices; i++) {
		const pb_kvu *a = attr(d, s->attribute_indices[i]);

		if (!strcmp(str(d, a->key_strindex), key))
			return a->value;
	}
	return NULL;
}

/* "leaf;...;root" of a sample, inlined frames expanded innermost first. */
static void stack_str(const pb_dict *d, const pb_sample *s, char *buf, size_t size)
{
	const Opentelemetry__Proto__Profiles__V1development__Stack *st;
	size_t off = 0;

	assert_true(s->stack_index > 0 && (size_t)s->stack_index < d->n_stack_table);
	st = d->stack_table[s->stack_index];
	buf[0] = 0;
	for (size_t i = 0; i < st->n_location_indices; i++) {
		const pb_location *l;

		assert_true(st->location_indices[i] > 0 && (size_t)st->location_indices[i] < d->n_location_table);
		l = d->location_table[st->location_indices[i]];
		for (size_t k = 0; k < l->n_lines; k++) {
			int32_t fi = l->lines[k]->function_index;

			assert_true(fi > 0 && (size_t)fi < d->n_function_table);
			off += (size_t)snprintf(buf + off, size - off, "%s%s", off ? ";" : "",
						str(d, d->function_table[fi]->name_strindex));
			assert_true(off < size);
		}
	}
}

/* The profile of the resource with this service and pid. */
static const pb_profile *find_profile(const pb_request *r, const char *service, int64_t pid,
				      const pb_resource **ret_res)
{
	for (size_t i = 0; i < r->n_resource_profiles; i++) {
		const pb_resource *res = r->resource_profiles[i]->resource;
		const pb_any *p = res_attr(res, "process.pid");

		assert_non_null(p);
		if (strcmp(res_str(res, "service.name"), service) || p->int_value != pid)
			continue;
		assert_int_equal(r->resource_profiles[i]->n_scope_profiles, 1);
		assert_int_equal(r->resource_profiles[i]->scope_profiles[0]->n_profiles, 1);
		if (ret_res)
			*ret_res = res;
		return r->resource_profiles[i]->scope_profiles[0]->profiles[0];
	}
	fail_msg("no resource %s/%lld", service, (long long)pid);
	return NULL;
}

static const pb_sample *find_sample(const pb_dict *d, const pb_profile *p, const char *stack, int64_t tid)
{
	const pb_sample *found = NULL;
	char buf[512];

	for (size_t i = 0; i < p->n_samples; i++) {
		const pb_any *t = sample_attr(d, p->samples[i], "thread.id");

		stack_str(d, p->samples[i], buf, sizeof(buf));
		if (strcmp(buf, stack) || (t ? t->int_value : -1) != tid)
			continue;
		assert_null(found); /* duplicates are aggregated */
		found = p->samples[i];
	}
	if (!found)
		fail_msg("no sample %s tid %lld", stack, (long long)tid);
	return found;
}

static void test_otlp_decode(void **state)
{
	struct fixture f;
	const pb_resource *res;
	const pb_profile *p;
	const pb_sample *s;
	const pb_dict *d;
	pb_request *r;
	uint8_t *buf;
	size_t len;
	int inl_locs = 0;

	(void)state;
	fixture_build(&f);
	assert_int_equal(encode_otlp(&f.batch, &buf, &len), 0);
	r = unpack(buf, len);
	free(buf);
	d = r->dictionary;
	assert_non_null(d);

	/* Every table's element 0 is present and zero. */
	assert_true(d->n_string_table > 1);
	assert_string_equal(d->string_table[0], "");
	for (size_t i = 1; i < d->n_string_table; i++)
		assert_string_not_equal(d->string_table[i], "");
	assert_true(d->n_mapping_table == 3); /* zero + kernel + app: shared by both series */
	assert_int_equal(d->mapping_table[0]->memory_start, 0);
	assert_int_equal(d->mapping_table[0]->memory_limit, 0);
	assert_int_equal(d->mapping_table[0]->filename_strindex, 0);
	assert_int_equal(d->mapping_table[0]->n_attribute_indices, 0);
	assert_int_equal(d->n_location_table, 4);
	assert_int_equal(d->location_table[0]->n_lines, 0);
	assert_int_equal(d->location_table[0]->address, 0);
	assert_int_equal(d->location_table[0]->n_attribute_indices, 0);
	assert_int_equal(d->n_function_table, 5);
	assert_int_equal(d->function_table[0]->name_strindex, 0);
	assert_int_equal(d->n_link_table, 1);
	assert_int_equal(d->link_table[0]->trace_id.len, 0);
	assert_true(d->n_attribute_table > 1);
	assert_int_equal(d->attribute_table[0]->key_strindex, 0);
	assert_null(d->attribute_table[0]->value);
	assert_true(d->n_stack_table > 1);
	assert_int_equal(d->stack_table[0]->n_location_indices, 0);

	/* Mappings, functions and locations: attributes and inline lines. */
	for (size_t i = 1; i < d->n_location_table; i++) {
		const pb_location *l = d->location_table[i];
		const pb_mapping *m;
		const pb_kvu *a;

		assert_true(l->mapping_index > 0 && (size_t)l->mapping_index < d->n_mapping_table);
		m = d->mapping_table[l->mapping_index];
		assert_int_equal(l->n_attribute_indices, 1);
		a = attr(d, l->attribute_indices[0]);
		assert_string_equal(str(d, a->key_strindex), "profile.frame.type");
		assert_int_equal(a->value->value_case, STR_CASE);
		if (!strcmp(str(d, m->filename_strindex), "[kernel.kallsyms]")) {
			assert_string_equal(a->value->string_value, "kernel");
			assert_int_equal(m->memory_start, 0xffffffff81000000ull);
			assert_int_equal(m->memory_limit, 0xffffffffff000000ull);
			assert_int_equal(m->n_attribute_indices, 0);
			assert_int_equal(l->address, 0xffffffff81234567ull);
			assert_int_equal(l->n_lines, 1);
			assert_string_equal(str(d, d->function_table[l->lines[0]->function_index]->name_strindex),
					    "do_syscall_64");
			continue;
		}
		assert_string_equal(a->value->string_value, "native");
		assert_string_equal(str(d, m->filename_strindex), "/usr/bin/app");
		assert_int_equal(m->memory_start, 0x1000);
		assert_int_equal(m->memory_limit, 0x9000);
		assert_int_equal(m->file_offset, 0x1000);
		assert_int_equal(m->n_attribute_indices, 1);
		a = attr(d, m->attribute_indices[0]);
		assert_string_equal(str(d, a->key_strindex), "process.executable.build_id.gnu");
		assert_string_equal(a->value->string_value, "abcd01");
		if (l->address == 0x1234) {
			const pb_function *f0, *f1;

			inl_locs++;
			assert_int_equal(l->n_lines, 2);
			f0 = d->function_table[l->lines[0]->function_index];
			f1 = d->function_table[l->lines[1]->function_index];
			assert_string_equal(str(d, f0->name_strindex), "inlined_leaf");
			assert_string_equal(str(d, f0->filename_strindex), "app.c");
			assert_int_equal(f0->system_name_strindex, 0);
			assert_int_equal(f0->start_line, 10);
			assert_int_equal(l->lines[0]->line, 12);
			assert_string_equal(str(d, f1->name_strindex), "outer");
			assert_string_equal(str(d, f1->system_name_strindex), "_Z5outerv");
			assert_int_equal(f1->start_line, 25);
			assert_int_equal(l->lines[1]->line, 30);
		} else {
			assert_int_equal(l->address, 0x2000);
		}
	}
	assert_int_equal(inl_locs, 1);

	/* One resource per (series, pid). */
	assert_int_equal(r->n_resource_profiles, 3);
	for (size_t i = 0; i < r->n_resource_profiles; i++) {
		const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp;
		const pb_profile *q;

		assert_int_equal(r->resource_profiles[i]->n_scope_profiles, 1);
		sp = r->resource_profiles[i]->scope_profiles[0];
		assert_non_null(sp->scope);
		assert_string_equal(sp->scope->name, "prowl");
		assert_true(sp->scope->version[0] != 0);
		assert_int_equal(sp->n_profiles, 1);
		q = sp->profiles[0];
		assert_non_null(q->sample_type);
		assert_string_equal(str(d, q->sample_type->type_strindex), "samples");
		assert_string_equal(str(d, q->sample_type->unit_strindex), "count");
		assert_non_null(q->period_type);
		assert_string_equal(str(d, q->period_type->type_strindex), "cpu");
		assert_string_equal(str(d, q->period_type->unit_strindex), "nanoseconds");
		assert_int_equal(q->period, PERIOD);
		assert_int_equal(q->time_unix_nano, T0);
		assert_int_equal(q->duration_nano, WINDOW);
		assert_int_equal(q->profile_id.len, 16);
		for (size_t k = 0; k < i; k++)
			assert_memory_not_equal(q->profile_id.data,
						r->resource_profiles[k]->scope_profiles[0]->profiles[0]->profile_id.data, 16);
		for (size_t k = 0; k < q->n_samples; k++) {
			assert_int_equal(q->samples[k]->n_values, 1);
			assert_true(q->samples[k]->values[0] > 0);
			assert_int_equal(q->samples[k]->link_index, 0);
			assert_int_equal(q->samples[k]->n_timestamps_unix_nano, 0);
		}
	}

	p = find_profile(r, "svcA", 42, &res);
	assert_string_equal(res_str(res, "host.name"), "hostA");
	assert_string_equal(res_str(res, "process.executable.name"), "app");
	assert_int_equal(res_attr(res, "process.pid")->value_case, INT_CASE);
	assert_string_equal(res_str(res, "env"), "prod");
	assert_string_equal(res_str(res, "container.id"), "c0ffee");
	assert_null(res_attr(res, "container_id"));
	assert_null(res_attr(res, "service_name"));
	assert_int_equal(res->n_attributes, 6);
	assert_int_equal(p->n_samples, 3);
	s = find_sample(d, p, "inlined_leaf;outer;main", 43);
	assert_int_equal(s->values[0], 3);
	assert_string_equal(sample_attr(d, s, "thread.name")->string_value, "worker");
	assert_int_equal(sample_attr(d, s, "thread.id")->value_case, INT_CASE);
	assert_int_equal(s->n_attribute_indices, 2);
	s = find_sample(d, p, "do_syscall_64;inlined_leaf;outer;main", 43);
	assert_int_equal(s->values[0], 5); /* two label sets aggregated */
	s = find_sample(d, p, "main", 44);
	assert_int_equal(s->values[0], 2);
	assert_string_equal(sample_attr(d, s, "thread.name")->string_value, "io");

	p = find_profile(r, "svcA", 7, &res);
	assert_string_equal(res_str(res, "process.executable.name"), "other");
	assert_int_equal(p->n_samples, 1); /* the zero-count sample is left out */
	s = find_sample(d, p, "do_syscall_64", -1);
	assert_int_equal(s->values[0], 4);
	assert_int_equal(s->n_attribute_indices, 0);

	p = find_profile(r, "svcB", 42, &res);
	assert_string_equal(res_str(res, "host.name"), "hostB");
	assert_null(res_attr(res, "container.id"));
	assert_null(res_attr(res, "env"));
	assert_int_equal(res->n_attributes, 4);
	assert_int_equal(p->n_samples, 1);
	s = find_sample(d, p, "inlined_leaf;outer;main", -1);
	assert_int_equal(s->values[0], 6);
	/* The same stack as series A's: one shared stack_table entry. */
	assert_int_equal(s->stack_index,
			 find_sample(d, find_profile(r, "svcA", 42, NULL), "inlined_leaf;outer;main", 43)->stack_index);

	request_free(r);
	fixture_free(&f);
}

static void test_otlp_empty(void **state)
{
	struct profile *p = profile_new();
	struct export_series s = { .prof = p };
	struct export_batch b = { .series = &s, .nseries = 1, .start_unix_ns = T0, .end_unix_ns = T0 + 1,
				  .period_ns = PERIOD };
	pb_request *r;
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_non_null(p);
	assert_int_equal(encode_otlp(&b, &buf, &len), 0);
	r = unpack(buf, len);
	free(buf);
	assert_int_equal(r->n_resource_profiles, 0);
	assert_non_null(r->dictionary);
	assert_int_equal(r->dictionary->n_string_table, 5); /* "", samples, count, cpu, nanoseconds */
	assert_string_equal(r->dictionary->string_table[0], "");
	assert_int_equal(r->dictionary->n_mapping_table, 1);
	assert_int_equal(r->dictionary->n_location_table, 1);
	assert_int_equal(r->dictionary->n_function_table, 1);
	assert_int_equal(r->dictionary->n_stack_table, 1);
	assert_int_equal(r->dictionary->n_link_table, 1);
	request_free(r);

	b.nseries = 0;
	assert_int_equal(encode_otlp(&b, &buf, &len), 0);
	free(buf);
	assert_int_equal(encode_otlp(NULL, &buf, &len), -EINVAL);
	b.series = NULL;
	b.nseries = 1;
	assert_int_equal(encode_otlp(&b, &buf, &len), -EINVAL);
	profile_free(p);
}

/* ---- the independent checker ---- */

static const char *checker_path(void)
{
	static char path[4096];
	const char *env = getenv("PROWL_OTLP_CHECK");
	const char *slash;

	if (env)
		return env;
	/* __FILE__ is .../tests/unit/test_otlp.c */
	slash = strstr(__FILE__, "unit/test_otlp.c");
	if (slash) {
		snprintf(path, sizeof(path), "%.*se2e/otlp_check.py", (int)(slash - __FILE__), __FILE__);
		if (access(path, R_OK) == 0)
			return path;
	}
	if (access("tests/e2e/otlp_check.py", R_OK) == 0)
		return "tests/e2e/otlp_check.py";
	/* The binary lives in <repo>/<build>/tests/. */
	{
		char exe[2048];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		char *cut;

		if (n > 0) {
			exe[n] = 0;
			for (int up = 0; up < 3 && (cut = strrchr(exe, '/')); up++)
				*cut = 0;
			snprintf(path, sizeof(path), "%s/tests/e2e/otlp_check.py", exe);
			if (access(path, R_OK) == 0)
				return path;
		}
	}
	fail_msg("tests/e2e/otlp_check.py not found; set PROWL_OTLP_CHECK");
	return NULL;
}

/* Runs the checker on body (as a file); returns its exit status and its
 * output (stdout and stderr) in out. */
static int run_checker(const uint8_t *body, size_t len, const char *extra, char *out, size_t outsize)
{
	char dir[] = "/tmp/prowl-otlp-XXXXXX", path[256], cmd[8192];
	size_t n;
	FILE *f;
	int status;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/body.bin", dir);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(body, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s %s %s 2>&1", checker_path(), extra ? extra : "", path);
	f = popen(cmd, "r");
	assert_non_null(f);
	n = fread(out, 1, outsize - 1, f);
	out[n] = 0;
	status = pclose(f);
	unlink(path);
	rmdir(dir);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* Random profiles: the request must keep every count, per series and thread. */
static void test_otlp_random(void **state)
{
	struct profile *p[3];
	struct series_label labels[3][2];
	struct export_series series[3];
	struct export_batch b = { .series = series, .nseries = 3, .start_unix_ns = T0,
				  .end_unix_ns = T0 + WINDOW, .period_ns = PERIOD };
	char names[3][16];
	uint64_t seed = 12345;
	int64_t want[3][8] = {}, got[3][8] = {};
	pb_request *r;
	uint8_t *buf;
	size_t len;

	(void)state;
#define RND() (seed = seed * 6364136223846793005ull + 1442695040888963407ull, (uint32_t)(seed >> 33))
	for (int si = 0; si < 3; si++) {
		uint32_t maps[4], locs[300], lsets[8];

		p[si] = profile_new();
		assert_non_null(p[si]);
		for (int m = 0; m < 4; m++)
			assert_int_equal(profile_mapping(p[si], &(struct prof_mapping_in){
				.key = (uint64_t)m + 1, .start = (uint64_t)m << 32, .limit = ((uint64_t)m + 1) << 32,
				.filename = m == 3 ? "[kernel.kallsyms]" : m == 2 ? "/lib/libc.so.6" : "/bin/x",
				.build_id = m == 1 ? "feed" : NULL, .is_kernel = m == 3 }, &maps[m]), 0);
		for (int l = 0; l < 300; l++) {
			char fn[3][32];
			struct prof_frame fr[3];
			size_t n = 1 + RND() % 3;

			for (size_t k = 0; k < n; k++) {
				snprintf(fn[k], sizeof(fn[k]), "fn_%u", RND() % 150);
				fr[k] = (struct prof_frame){ .function = fn[k], .file = RND() % 2 ? "x.c" : NULL,
							     .line = RND() % 100 };
			}
			assert_int_equal(profile_add_location(p[si], maps[l % 4], (uint64_t)(l % 4) << 32 | (uint64_t)l * 16,
							      fr, n, true, &locs[l]), 0);
		}
		for (int t = 0; t < 8; t++) {
			char tn[16];
			struct prof_label_in li[4] = {
				{ .key = "pid", .num = 100 + t / 4 }, { .key = "process_name", .str = t / 4 ? "b" : "a" },
				{ .key = "tid", .num = 1000 + t }, { .key = "thread_name", .str = tn },
			};

			snprintf(tn, sizeof(tn), "t%d", t);
			assert_int_equal(profile_labelset(p[si], li, 4, &lsets[t]), 0);
		}
		for (int k = 0; k < 2000; k++) {
			uint32_t st[40];
			size_t n = 1 + RND() % 40;
			int t = (int)(RND() % 8);
			int64_t c = 1 + RND() % 3;

			for (size_t i = 0; i < n; i++)
				st[i] = locs[RND() % (k % 3 ? 30 : 300)];
			assert_int_equal(profile_add_sample(p[si], lsets[t], st, n, c), 0);
			want[si][t] += c;
		}
		snprintf(names[si], sizeof(names[si]), "svc%d", si);
		labels[si][0] = (struct series_label){ "service_name", names[si] };
		labels[si][1] = (struct series_label){ "host_name", "h" };
		series[si] = (struct export_series){ .labels = labels[si], .nlabels = 2, .prof = p[si] };
	}
#undef RND
	assert_int_equal(encode_otlp(&b, &buf, &len), 0);
	r = unpack(buf, len);
	assert_int_equal(r->n_resource_profiles, 6);
	for (size_t i = 0; i < r->n_resource_profiles; i++) {
		const pb_resource *res = r->resource_profiles[i]->resource;
		const pb_profile *q = r->resource_profiles[i]->scope_profiles[0]->profiles[0];
		int si = res_str(res, "service.name")[3] - '0';

		for (size_t k = 0; k < q->n_samples; k++) {
			const pb_any *tid = sample_attr(r->dictionary, q->samples[k], "thread.id");

			assert_non_null(tid);
			assert_true(tid->int_value >= 1000 && tid->int_value < 1008);
			assert_int_equal(res_attr(res, "process.pid")->int_value, 100 + (tid->int_value - 1000) / 4);
			got[si][tid->int_value - 1000] += q->samples[k]->values[0];
		}
	}
	assert_memory_equal(want, got, sizeof(want));
	request_free(r);
	{
		char out[4096];

		if (run_checker(buf, len, NULL, out, sizeof(out)) != 0)
			fail_msg("checker rejected a random request: %s", out);
	}
	free(buf);
	for (int si = 0; si < 3; si++)
		profile_free(p[si]);
}

static void test_otlp_checker_accepts(void **state)
{
	struct fixture f;
	char out[4096];
	uint8_t *buf, *gz;
	size_t len, gzlen;

	(void)state;
	fixture_build(&f);
	assert_int_equal(encode_otlp(&f.batch, &buf, &len), 0);
	if (run_checker(buf, len, NULL, out, sizeof(out)) != 0)
		fail_msg("checker rejected a good body: %s", out);
	assert_non_null(strstr(out, "ok: 3 profiles, 5 samples, 20 counts"));
	assert_int_equal(gzip_compress(buf, len, &gz, &gzlen), 0);
	if (run_checker(gz, gzlen, NULL, out, sizeof(out)) != 0)
		fail_msg("checker rejected a good gzip'ed body: %s", out);
	free(gz);
	free(buf);

	/* An empty batch is valid only when asked for. */
	f.batch.nseries = 0;
	assert_int_equal(encode_otlp(&f.batch, &buf, &len), 0);
	assert_int_equal(run_checker(buf, len, NULL, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "no resource_profiles"));
	if (run_checker(buf, len, "--allow-empty", out, sizeof(out)) != 0)
		fail_msg("checker rejected an empty request with --allow-empty: %s", out);
	free(buf);
	fixture_free(&f);
}

/* Each corruption edits a decoded request in place, is re-packed and must be
 * rejected with a message naming the problem; undo restores the message so it
 * can be freed. */
enum corruption {
	C_STACK_INDEX, C_LOCATION_INDEX, C_FUNCTION_INDEX, C_MAPPING_INDEX, C_STRINDEX,
	C_ATTR_INDEX, C_STRING0, C_MAPPING0, C_TWO_VALUES, C_ZERO_VALUE, C_SAMPLE_TYPE,
	C_PERIOD, C_NO_SERVICE, C_DUPLICATE, C_NO_TIME, C_UNKNOWN_FIELD, C_TRUNCATED,
	C__MAX,
};

static const char *const corruption_msgs[C__MAX] = {
	[C_STACK_INDEX] = "stack_index",
	[C_LOCATION_INDEX] = "location index",
	[C_FUNCTION_INDEX] = "function_index",
	[C_MAPPING_INDEX] = "mapping_index",
	[C_STRINDEX] = "name_strindex",
	[C_ATTR_INDEX] = "attribute index",
	[C_STRING0] = "string_table[0]",
	[C_MAPPING0] = "mapping_table[0]",
	[C_TWO_VALUES] = "want exactly 1",
	[C_ZERO_VALUE] = "not positive",
	[C_SAMPLE_TYPE] = "sample_type",
	[C_PERIOD] = "period",
	[C_NO_SERVICE] = "service.name",
	[C_DUPLICATE] = "duplicates must be aggregated",
	[C_NO_TIME] = "time_unix_nano",
	[C_UNKNOWN_FIELD] = "unknown field number",
	[C_TRUNCATED] = "cannot decode",
};

static void test_otlp_checker_rejects(void **state)
{
	struct fixture f;
	uint8_t *good;
	size_t good_len;

	(void)state;
	fixture_build(&f);
	assert_int_equal(encode_otlp(&f.batch, &good, &good_len), 0);
	for (int c = 0; c < C__MAX; c++) {
		pb_request *r = unpack(good, good_len);
		pb_dict *d = r->dictionary;
		pb_profile *p = r->resource_profiles[0]->scope_profiles[0]->profiles[0];
		pb_sample *s = p->samples[0];
		pb_resource *res = r->resource_profiles[0]->resource;
		char *saved_str = d->string_table[0], *saved_key = NULL;
		int64_t saved_value = s->values[0], *saved_values = s->values;
		int64_t two[2] = { 1, 1 };
		pb_sample *saved_sample = p->samples[1];
		uint8_t *buf;
		size_t len;
		char out[4096];

		switch (c) {
		case C_STACK_INDEX:
			s->stack_index = (int32_t)d->n_stack_table;
			break;
		case C_LOCATION_INDEX:
			d->stack_table[1]->location_indices[0] = (int32_t)d->n_location_table + 3;
			break;
		case C_FUNCTION_INDEX:
			d->location_table[1]->lines[0]->function_index = (int32_t)d->n_function_table;
			break;
		case C_MAPPING_INDEX:
			d->location_table[1]->mapping_index = (int32_t)d->n_mapping_table;
			break;
		case C_STRINDEX:
			d->function_table[1]->name_strindex = (int32_t)d->n_string_table;
			break;
		case C_ATTR_INDEX:
			d->location_table[1]->attribute_indices[0] = -1;
			break;
		case C_STRING0:
			d->string_table[0] = (char *)"oops";
			break;
		case C_MAPPING0:
			d->mapping_table[0]->memory_start = 0x1000;
			break;
		case C_TWO_VALUES:
			s->values = two;
			s->n_values = 2;
			break;
		case C_ZERO_VALUE:
			s->values[0] = 0;
			break;
		case C_SAMPLE_TYPE:
			p->sample_type->unit_strindex = p->period_type->unit_strindex;
			break;
		case C_PERIOD:
			p->period = 0;
			break;
		case C_NO_SERVICE:
			for (size_t i = 0; i < res->n_attributes; i++)
				if (!strcmp(res->attributes[i]->key, "service.name")) {
					saved_key = res->attributes[i]->key;
					res->attributes[i]->key = (char *)"service.nom";
				}
			assert_non_null(saved_key);
			break;
		case C_DUPLICATE:
			assert_true(p->n_samples >= 2);
			p->samples[1] = s;
			break;
		case C_NO_TIME:
			p->time_unix_nano = 0;
			break;
		}
		len = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__get_packed_size(r);
		buf = malloc(len + 8);
		assert_non_null(buf);
		opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__pack(r, buf);
		if (c == C_UNKNOWN_FIELD) {
			buf[len++] = 9 << 3; /* field 9, varint 1: not in the request */
			buf[len++] = 1;
		}
		if (c == C_TRUNCATED)
			len -= 3;

		if (run_checker(buf, len, NULL, out, sizeof(out)) != 1)
			fail_msg("checker accepted corruption %d: %s", c, out);
		if (!strstr(out, corruption_msgs[c]))
			fail_msg("corruption %d: message lacks \"%s\": %s", c, corruption_msgs[c], out);

		d->string_table[0] = saved_str;
		s->values = saved_values;
		s->n_values = 1;
		s->values[0] = saved_value;
		p->samples[1] = saved_sample;
		for (size_t i = 0; saved_key && i < res->n_attributes; i++)
			if (!strcmp(res->attributes[i]->key, "service.nom"))
				res->attributes[i]->key = saved_key;
		free(buf);
		request_free(r);
	}
	free(good);
	fixture_free(&f);
}

/* ---- the exporter, against a one-request-at-a-time HTTP/1.1 server ---- */

struct http_capture {
	int lfd;
	atomic_int stop;
	int nrequests;
	char head[8192]; /* request line and headers of the first request */
	uint8_t *body;   /* its body */
	size_t len;
};

static ssize_t read_some(int fd, void *buf, size_t len)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	if (poll(&pfd, 1, 5000) <= 0)
		return -1;
	return read(fd, buf, len);
}

static void serve_one(struct http_capture *c, int fd)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
				 "Content-Length: 0\r\nConnection: close\r\n\r\n";
	char head[8192];
	size_t hlen = 0, clen = 0, have;
	uint8_t *body = NULL;
	char *end = NULL, *cl;
	ssize_t n;

	while (!end && hlen < sizeof(head) - 1) {
		n = read_some(fd, head + hlen, sizeof(head) - 1 - hlen);
		if (n <= 0)
			return;
		hlen += (size_t)n;
		head[hlen] = 0;
		end = strstr(head, "\r\n\r\n");
	}
	if (!end)
		return;
	*end = 0;
	cl = strcasestr(head, "\r\nContent-Length:");
	if (cl)
		clen = strtoull(cl + 17, NULL, 10);
	if (strcasestr(head, "\r\nExpect: 100-continue"))
		(void)!write(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	body = malloc(clen + 1);
	if (!body)
		return;
	have = hlen - (size_t)(end + 4 - head);
	memcpy(body, end + 4, have);
	while (have < clen) {
		n = read_some(fd, body + have, clen - have);
		if (n <= 0) {
			free(body);
			return;
		}
		have += (size_t)n;
	}
	(void)!write(fd, ok, sizeof(ok) - 1);
	if (c->nrequests++ == 0) {
		memcpy(c->head, head, strlen(head) + 1);
		c->body = body;
		c->len = clen;
		body = NULL;
	}
	free(body);
}

static void *http_server(void *arg)
{
	struct http_capture *c = arg;

	while (!c->stop) {
		struct pollfd pfd = { .fd = c->lfd, .events = POLLIN };
		int fd;

		if (poll(&pfd, 1, 50) <= 0)
			continue;
		fd = accept(c->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		serve_one(c, fd);
		close(fd);
	}
	return NULL;
}

static int http_listen(int *ret_port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	*ret_port = ntohs(a.sin_port);
	return fd;
}

static void test_otlp_exporter(void **state)
{
	struct http_capture cap = {};
	struct http_target t = { .timeout_ms = 5000, .max_retries = 1 };
	struct export_stats st;
	struct exporter *e;
	struct fixture f;
	struct profile *empty = profile_new();
	struct export_series es = { .prof = empty };
	struct export_batch eb = { .series = &es, .nseries = 1, .start_unix_ns = T0, .end_unix_ns = T0 + WINDOW,
				   .period_ns = PERIOD };
	char url[64], out[4096];
	pthread_t th;
	pb_request *r;
	uint8_t *raw;
	size_t len;
	int port;

	(void)state;
	assert_non_null(empty);
	fixture_build(&f);
	cap.lfd = http_listen(&port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	t.url = url;
	assert_int_equal(pthread_create(&th, NULL, http_server, &cap), 0);

	assert_int_equal(exporter_otlp_new(NULL, &e), -EINVAL);
	assert_int_equal(exporter_otlp_new(&t, &e), 0);
	assert_string_equal(e->ops->kind, "otlp");
	assert_string_equal(e->name, "otlp");
	assert_int_equal(e->ops->submit(e, &eb), 0); /* no samples: nothing sent */
	assert_int_equal(e->ops->submit(e, &f.batch), 0);
	assert_int_equal(e->ops->flush(e, 10000), 0);
	e->ops->get_stats(e, &st);
	assert_int_equal(st.sent, 1);
	assert_int_equal(st.failed + st.dropped, 0);
	assert_int_equal(st.queue_items, 0);
	e->ops->free(e);
	cap.stop = 1;
	assert_int_equal(pthread_join(th, NULL), 0);
	close(cap.lfd);

	assert_int_equal(cap.nrequests, 1);
	assert_true(!strncmp(cap.head, "POST /v1development/profiles HTTP/1.1\r\n", 39));
	assert_non_null(strcasestr(cap.head, "\r\nContent-Type: application/x-protobuf"));
	assert_non_null(strcasestr(cap.head, "\r\nContent-Encoding: gzip"));
	assert_true(cap.len > 18);
	assert_int_equal(cap.body[0], 0x1f);
	assert_int_equal(cap.body[1], 0x8b);
	raw = gunzip(cap.body, cap.len, &len);
	r = unpack(raw, len);
	assert_int_equal(r->n_resource_profiles, 3);
	request_free(r);
	if (run_checker(cap.body, cap.len, NULL, out, sizeof(out)) != 0)
		fail_msg("checker rejected the exporter's request: %s", out);
	free(raw);
	free(cap.body);
	profile_free(empty);
	fixture_free(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_otlp_decode),
		cmocka_unit_test(test_otlp_empty),
		cmocka_unit_test(test_otlp_random),
		cmocka_unit_test(test_otlp_checker_accepts),
		cmocka_unit_test(test_otlp_checker_rejects),
		cmocka_unit_test(test_otlp_exporter),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
