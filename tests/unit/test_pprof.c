/* test_pprof.c: unit tests of the encode stage; decodes pprof output with
 * protobuf-c, protoc and Google's pprof, and checks folded output line by line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aggregate.h"
#include "profile_data.h"
#include "encode.h"
#include "export.h"
#include "profile.pb-c.h"
#include "testutil.h"

#define PERIOD 10000000LL

typedef Perftools__Profiles__Profile pb_profile;

/* Ids of the small profile below. */
struct small {
	struct profile *p;
	uint32_t kmap, mmap;
	uint32_t loc_inl, loc_main, loc_kern;
	uint32_t ls;
};

/* Kernel mapping added first so "main first" is a real reordering. Samples:
 *   3 x  outer>inlined_leaf (loc_inl) <- main
 *   5 x  do_syscall_64 <- (loc_inl) <- main */
static void small_build(struct small *s)
{
	struct prof_frame inl[2] = {
		{ .function = "inlined_leaf", .file = "app.c", .line = 12, .start_line = 10 },
		{ .function = "outer", .system_name = "_Z5outerv", .file = "app.c", .line = 30, .start_line = 25 },
	};
	struct prof_frame fmain = { .function = "main", .file = "app.c", .line = 50, .start_line = 45 };
	struct prof_frame fkern = { .function = "do_syscall_64" };
	struct prof_label_in labels[] = {
		{ .key = "process_name", .str = "app" },
		{ .key = "pid", .num = 42, .num_unit = "pid" },
	};

	s->p = profile_new();
	assert_non_null(s->p);
	profile_set_period(s->p, PERIOD);
	profile_set_time(s->p, 1700000000000000000LL, 5000000000LL);
	assert_int_equal(profile_add_comment(s->p, "prowl test"), 0);
	assert_int_equal(profile_mapping(s->p, &(struct prof_mapping_in){
		.key = 100, .start = 0xffffffff81000000ull, .limit = 0xffffffffff000000ull,
		.filename = "[kernel.kallsyms]", .is_kernel = true }, &s->kmap), 0);
	assert_int_equal(profile_mapping(s->p, &(struct prof_mapping_in){
		.key = 1, .start = 0x1000, .limit = 0x9000, .offset = 0x1000,
		.filename = "/usr/bin/app", .build_id = "abcd01", .is_main = true }, &s->mmap), 0);
	assert_int_equal(profile_add_location(s->p, s->mmap, 0x1234, inl, 2, true, &s->loc_inl), 0);
	assert_int_equal(profile_add_location(s->p, s->mmap, 0x2000, &fmain, 1, true, &s->loc_main), 0);
	assert_int_equal(profile_add_location(s->p, s->kmap, 0xffffffff81234567ull, &fkern, 1, true,
					       &s->loc_kern), 0);
	assert_int_equal(profile_labelset(s->p, labels, 2, &s->ls), 0);
	assert_int_equal(profile_add_sample(s->p, s->ls, (uint32_t[]){ s->loc_inl, s->loc_main }, 2, 1), 0);
	assert_int_equal(profile_add_sample(s->p, s->ls, (uint32_t[]){ s->loc_inl, s->loc_main }, 2, 2), 0);
	assert_int_equal(profile_add_sample(s->p, s->ls,
					    (uint32_t[]){ s->loc_kern, s->loc_inl, s->loc_main }, 3, 5), 0);
}

static pb_profile *decode(const struct profile *p)
{
	uint8_t *gz, *raw;
	size_t gzlen, len;
	pb_profile *msg;

	assert_int_equal(encode_pprof(p, &gz, &gzlen), 0);
	assert_true(gzlen > 18);
	assert_int_equal(gz[0], 0x1f); /* gzip magic */
	assert_int_equal(gz[1], 0x8b);
	raw = gunzip(gz, gzlen, &len);
	msg = perftools__profiles__profile__unpack(NULL, len, raw);
	assert_non_null(msg);
	free(raw);
	free(gz);
	return msg;
}

static const char *str(const pb_profile *m, int64_t i)
{
	assert_true(i >= 0 && (size_t)i < m->n_string_table);
	return m->string_table[i];
}

static const Perftools__Profiles__Function *func_by_id(const pb_profile *m, uint64_t id)
{
	for (size_t i = 0; i < m->n_function; i++)
		if (m->function[i]->id == id)
			return m->function[i];
	fail_msg("no function %llu", (unsigned long long)id);
	return NULL;
}

static const Perftools__Profiles__Location *loc_by_id(const pb_profile *m, uint64_t id)
{
	for (size_t i = 0; i < m->n_location; i++)
		if (m->location[i]->id == id)
			return m->location[i];
	fail_msg("no location %llu", (unsigned long long)id);
	return NULL;
}

static void test_pprof_decode(void **state)
{
	struct small s;
	pb_profile *m;
	const Perftools__Profiles__Location *l;
	const Perftools__Profiles__Function *f;

	(void)state;
	small_build(&s);
	m = decode(s.p);

	assert_true(m->n_string_table > 0);
	assert_string_equal(m->string_table[0], "");
	for (size_t i = 1; i < m->n_string_table; i++)
		assert_string_not_equal(m->string_table[i], "");

	assert_int_equal(m->n_sample_type, 2);
	assert_string_equal(str(m, m->sample_type[0]->type), "samples");
	assert_string_equal(str(m, m->sample_type[0]->unit), "count");
	assert_string_equal(str(m, m->sample_type[1]->type), "cpu");
	assert_string_equal(str(m, m->sample_type[1]->unit), "nanoseconds");
	assert_non_null(m->period_type);
	assert_string_equal(str(m, m->period_type->type), "cpu");
	assert_string_equal(str(m, m->period_type->unit), "nanoseconds");
	assert_int_equal(m->period, PERIOD);
	assert_string_equal(str(m, m->default_sample_type), "cpu");
	assert_int_equal(m->time_nanos, 1700000000000000000LL);
	assert_int_equal(m->duration_nanos, 5000000000LL);
	assert_int_equal(m->n_comment, 1);
	assert_string_equal(str(m, m->comment[0]), "prowl test");

	/* Mappings: main first although added second; flags truthful. */
	assert_int_equal(m->n_mapping, 2);
	assert_int_equal(m->mapping[0]->id, s.mmap);
	assert_int_equal(m->mapping[1]->id, s.kmap);
	assert_true(m->mapping[0]->id != 0 && m->mapping[1]->id != 0);
	assert_string_equal(str(m, m->mapping[0]->filename), "/usr/bin/app");
	assert_string_equal(str(m, m->mapping[0]->build_id), "abcd01");
	assert_int_equal(m->mapping[0]->memory_start, 0x1000);
	assert_int_equal(m->mapping[0]->memory_limit, 0x9000);
	assert_int_equal(m->mapping[0]->file_offset, 0x1000);
	assert_true(m->mapping[0]->has_functions);
	assert_true(m->mapping[0]->has_filenames);
	assert_true(m->mapping[0]->has_line_numbers);
	assert_true(m->mapping[0]->has_inline_frames);
	assert_string_equal(str(m, m->mapping[1]->filename), "[kernel.kallsyms]");
	assert_int_equal(m->mapping[1]->build_id, 0);
	assert_int_equal(m->mapping[1]->memory_start, 0xffffffff81000000ull);
	assert_true(m->mapping[1]->has_functions);
	assert_false(m->mapping[1]->has_filenames);
	assert_false(m->mapping[1]->has_line_numbers);
	assert_false(m->mapping[1]->has_inline_frames);

	/* Locations and their lines, innermost first. */
	assert_int_equal(m->n_location, 3);
	for (size_t i = 0; i < m->n_location; i++)
		assert_true(m->location[i]->id != 0);
	l = loc_by_id(m, s.loc_inl);
	assert_int_equal(l->mapping_id, s.mmap);
	assert_int_equal(l->address, 0x1234);
	assert_int_equal(l->n_line, 2);
	f = func_by_id(m, l->line[0]->function_id);
	assert_string_equal(str(m, f->name), "inlined_leaf");
	assert_string_equal(str(m, f->filename), "app.c");
	assert_int_equal(f->start_line, 10);
	assert_int_equal(f->system_name, 0);
	assert_int_equal(l->line[0]->line, 12);
	f = func_by_id(m, l->line[1]->function_id);
	assert_string_equal(str(m, f->name), "outer");
	assert_string_equal(str(m, f->system_name), "_Z5outerv");
	assert_int_equal(f->start_line, 25);
	assert_int_equal(l->line[1]->line, 30);
	l = loc_by_id(m, s.loc_kern);
	assert_int_equal(l->mapping_id, s.kmap);
	assert_int_equal(l->address, 0xffffffff81234567ull);
	assert_int_equal(l->n_line, 1);
	assert_string_equal(str(m, func_by_id(m, l->line[0]->function_id)->name), "do_syscall_64");
	assert_int_equal(m->n_function, 4);
	for (size_t i = 0; i < m->n_function; i++)
		assert_true(m->function[i]->id != 0);

	/* Samples: the two adds of one stack are one sample of 3. */
	assert_int_equal(m->n_sample, 2);
	{
		const Perftools__Profiles__Sample *a = m->sample[0], *b = m->sample[1];

		if (a->n_location_id == 3) {
			const Perftools__Profiles__Sample *t = a;
			a = b;
			b = t;
		}
		assert_int_equal(a->n_location_id, 2);
		assert_int_equal(a->location_id[0], s.loc_inl);
		assert_int_equal(a->location_id[1], s.loc_main);
		assert_int_equal(a->n_value, 2);
		assert_int_equal(a->value[0], 3);
		assert_int_equal(a->value[1], 3 * PERIOD);
		assert_int_equal(b->n_location_id, 3);
		assert_int_equal(b->location_id[0], s.loc_kern);
		assert_int_equal(b->location_id[2], s.loc_main);
		assert_int_equal(b->value[0], 5);
		assert_int_equal(b->value[1], 5 * PERIOD);
		for (int k = 0; k < 2; k++) {
			const Perftools__Profiles__Sample *x = k ? b : a;
			bool seen_str = false, seen_num = false;

			assert_int_equal(x->n_label, 2);
			for (size_t i = 0; i < x->n_label; i++) {
				const Perftools__Profiles__Label *lb = x->label[i];

				if (!strcmp(str(m, lb->key), "process_name")) {
					assert_string_equal(str(m, lb->str), "app");
					assert_int_equal(lb->num, 0);
					seen_str = true;
				} else {
					assert_string_equal(str(m, lb->key), "pid");
					assert_int_equal(lb->str, 0);
					assert_int_equal(lb->num, 42);
					assert_string_equal(str(m, lb->num_unit), "pid");
					seen_num = true;
				}
			}
			assert_true(seen_str && seen_num);
		}
	}
	perftools__profiles__profile__free_unpacked(m, NULL);
	profile_free(s.p);
}

/* Flags are computed per mapping from all of its locations. */
static void test_pprof_mapping_flags(void **state)
{
	struct profile *p = profile_new();
	uint32_t full, nosym, nofile, noline, empty, l;
	struct prof_frame good = { .function = "f", .file = "f.c", .line = 3 };
	struct prof_frame nofile_f = { .function = "g", .line = 3 };
	struct prof_frame noline_f = { .function = "h", .file = "h.c" };
	struct prof_frame fallback = { .function = "libx.so+0x10" };
	pb_profile *m;

	(void)state;
	assert_non_null(p);
	for (uint64_t k = 1; k <= 5; k++) {
		uint32_t id;

		assert_int_equal(profile_mapping(p, &(struct prof_mapping_in){
			.key = k, .start = k << 20, .limit = (k + 1) << 20, .filename = "x" }, &id), 0);
		assert_int_equal(id, k);
	}
	full = 1, nosym = 2, nofile = 3, noline = 4, empty = 5;
	assert_int_equal(profile_add_location(p, full, 1, &good, 1, true, &l), 0);
	assert_int_equal(profile_add_location(p, nosym, 1, &good, 1, true, &l), 0);
	assert_int_equal(profile_add_location(p, nosym, 2, &fallback, 1, false, &l), 0);
	assert_int_equal(profile_add_location(p, nofile, 1, &good, 1, true, &l), 0);
	assert_int_equal(profile_add_location(p, nofile, 2, (struct prof_frame[]){ good, nofile_f }, 2, true, &l), 0);
	assert_int_equal(profile_add_location(p, noline, 1, (struct prof_frame[]){ noline_f, good }, 2, true, &l), 0);

	m = decode(p);
	assert_int_equal(m->n_mapping, 5);
	for (size_t i = 0; i < m->n_mapping; i++) {
		const Perftools__Profiles__Mapping *mp = m->mapping[i];
		bool fn = mp->id == full || mp->id == nofile || mp->id == noline;
		bool fl = mp->id == full || mp->id == noline;
		bool ln = mp->id == full || mp->id == nofile;

		assert_int_equal(mp->id, i + 1); /* no main: id order */
		assert_int_equal(mp->has_functions, fn);
		assert_int_equal(mp->has_filenames, fl);
		assert_int_equal(mp->has_line_numbers, ln);
		assert_int_equal(mp->has_inline_frames, ln);
		if (mp->id == empty)
			assert_false(mp->has_functions || mp->has_filenames || mp->has_line_numbers);
	}
	perftools__profiles__profile__free_unpacked(m, NULL);
	profile_free(p);
}

static void test_pprof_empty(void **state)
{
	struct profile *p = profile_new();
	uint8_t *raw;
	size_t len;
	pb_profile *m;

	(void)state;
	assert_non_null(p);
	m = decode(p);
	assert_string_equal(m->string_table[0], "");
	assert_int_equal(m->n_sample, 0);
	assert_int_equal(m->n_mapping, 0);
	assert_int_equal(m->n_sample_type, 2);
	perftools__profiles__profile__free_unpacked(m, NULL);

	assert_int_equal(encode_pprof_raw(p, &raw, &len), 0);
	m = perftools__profiles__profile__unpack(NULL, len, raw);
	assert_non_null(m);
	assert_string_equal(str(m, m->default_sample_type), "cpu");
	perftools__profiles__profile__free_unpacked(m, NULL);
	free(raw);
	profile_free(p);
}

/* Off-CPU values (issue 30): --wall's three sample types, an off-CPU-only sample
 * with no count, and --off-cpu's two, read by folded as nanoseconds. */
static void test_pprof_offcpu(void **state)
{
	struct small s;
	pb_profile *m;
	char *folded;
	size_t len;

	(void)state;
	small_build(&s);
	profile_set_values(s.p, PROF_VALUES_WALL);
	assert_int_equal(profile_add_offcpu(s.p, s.ls, (uint32_t[]){ s.loc_main }, 1, 7000000), 0);
	assert_int_equal(profile_add_offcpu(s.p, s.ls, (uint32_t[]){ s.loc_main }, 1, 3000000), 0);
	assert_int_equal(profile_add_offcpu(s.p, s.ls, (uint32_t[]){ s.loc_inl, s.loc_main }, 2, 1000000), 0);
	assert_int_equal(profile_add_offcpu(s.p, s.ls, (uint32_t[]){ s.loc_main }, 1, -1), -EINVAL);
	m = decode(s.p);
	assert_int_equal(m->n_sample_type, 3);
	assert_string_equal(str(m, m->sample_type[1]->type), "cpu");
	assert_string_equal(str(m, m->sample_type[2]->type), "off_cpu");
	assert_string_equal(str(m, m->sample_type[2]->unit), "nanoseconds");
	assert_string_equal(str(m, m->default_sample_type), "cpu");
	{
		int64_t cnt = 0, cpu = 0, off = 0, main_only_off = -1;

		for (size_t i = 0; i < m->n_sample; i++) {
			assert_int_equal(m->sample[i]->n_value, 3);
			cnt += m->sample[i]->value[0];
			cpu += m->sample[i]->value[1];
			off += m->sample[i]->value[2];
			if (m->sample[i]->n_location_id == 1 && m->sample[i]->value[0] == 0)
				main_only_off = m->sample[i]->value[2];
		}
		assert_int_equal(cnt, 8); /* on-CPU samples only: 3 + 5 */
		assert_int_equal(cpu, 8 * PERIOD);
		assert_int_equal(off, 11000000);
		assert_int_equal(main_only_off, 10000000); /* one stack, two waits */
	}
	perftools__profiles__profile__free_unpacked(m, NULL);
	profile_free(s.p);

	/* --off-cpu: [samples (the waits), off_cpu], off_cpu the default; folded in ns. */
	s.p = profile_new();
	assert_non_null(s.p);
	profile_set_values(s.p, PROF_VALUES_OFFCPU);
	{
		struct prof_frame f = { .function = "wait_here" };
		uint32_t map, loc;

		assert_int_equal(profile_mapping(s.p, &(struct prof_mapping_in){ .key = 1, .start = 0x1000, .limit = 0x2000,
							 .filename = "/bin/app", .is_main = true }, &map), 0);
		assert_int_equal(profile_add_location(s.p, map, 0x1100, &f, 1, true, &loc), 0);
		assert_int_equal(profile_add_offcpu(s.p, 0, &loc, 1, 2500), 0);
		assert_int_equal(profile_add_offcpu(s.p, 0, &loc, 1, 500), 0);
	}
	m = decode(s.p);
	assert_int_equal(m->n_sample_type, 2);
	assert_string_equal(str(m, m->sample_type[1]->type), "off_cpu");
	assert_string_equal(str(m, m->default_sample_type), "off_cpu");
	assert_int_equal(m->n_sample, 1);
	assert_int_equal(m->sample[0]->value[0], 2);
	assert_int_equal(m->sample[0]->value[1], 3000);
	perftools__profiles__profile__free_unpacked(m, NULL);
	assert_int_equal(encode_folded(s.p, &folded, &len), 0);
	assert_non_null(strstr(folded, "wait_here 3000\n"));
	free(folded);
	profile_free(s.p);
}

/* The value of the label key of sample smp, or NULL; fails if the key is there twice. */
static const char *label_of(const pb_profile *m, const Perftools__Profiles__Sample *smp, const char *key)
{
	const char *v = NULL;

	for (size_t i = 0; i < smp->n_label; i++) {
		if (strcmp(str(m, smp->label[i]->key), key) != 0)
			continue;
		assert_null(v);
		v = smp->label[i]->str ? str(m, smp->label[i]->str) : "(num)";
	}
	return v;
}

static void test_pprof_labeled(void **state)
{
	static const struct series_label extra[] = {
		{ "service_name", "nginx" }, { "host_name", "web-1" }, { "process_name", "not-this" },
	};
	struct small s;
	uint8_t *gz, *raw;
	size_t gzlen, len;
	pb_profile *m;

	(void)state;
	small_build(&s);
	/* One sample without a label set: it gets every added label. */
	assert_int_equal(profile_add_sample(s.p, 0, (uint32_t[]){ s.loc_main }, 1, 4), 0);
	assert_int_equal(encode_pprof_labeled(s.p, extra, 3, &gz, &gzlen), 0);
	raw = gunzip(gz, gzlen, &len);
	m = perftools__profiles__profile__unpack(NULL, len, raw);
	assert_non_null(m);
	assert_int_equal(m->n_sample, 3);
	for (size_t i = 0; i < m->n_sample; i++) {
		const Perftools__Profiles__Sample *smp = m->sample[i];
		bool own = smp->n_location_id > 1;

		assert_string_equal(label_of(m, smp, "service_name"), "nginx");
		assert_string_equal(label_of(m, smp, "host_name"), "web-1");
		/* A label set's own value wins over an added label of the same key. */
		assert_string_equal(label_of(m, smp, "process_name"), own ? "app" : "not-this");
		assert_true(own ? label_of(m, smp, "pid") != NULL : label_of(m, smp, "pid") == NULL);
		assert_int_equal(smp->n_label, own ? 4 : 3);
	}
	perftools__profiles__profile__free_unpacked(m, NULL);
	free(raw);
	free(gz);
	/* Without added labels, the same profile carries only its own. */
	m = decode(s.p);
	for (size_t i = 0; i < m->n_sample; i++)
		assert_null(label_of(m, m->sample[i], "service_name"));
	perftools__profiles__profile__free_unpacked(m, NULL);
	profile_free(s.p);
}

static void write_file(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* Runs cmd and returns its stdout (malloc'ed); NULL if it could not run. */
static char *run(const char *cmd, int *ret_status)
{
	FILE *f = popen(cmd, "r");
	size_t cap = 8192, len = 0, n;
	char *out;

	if (!f)
		return NULL;
	out = malloc(cap);
	assert_non_null(out);
	while ((n = fread(out + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 2) {
			cap *= 2;
			out = realloc(out, cap);
			assert_non_null(out);
		}
	}
	out[len] = 0;
	*ret_status = pclose(f);
	return out;
}

static const char *find_proto(void)
{
	static const char *const cands[] = { "proto/profile.proto", "../../proto/profile.proto",
					     "../proto/profile.proto" };
	const char *env = getenv("PROWL_PROTO"); /* path of profile.proto */

	if (env)
		return env;
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++)
		if (access(cands[i], R_OK) == 0)
			return cands[i];
	return NULL;
}

/* protoc decodes our bytes with our .proto independently of protobuf-c. */
static void test_pprof_protoc(void **state)
{
	char dir[] = "/tmp/prowl-test-XXXXXX", path[256], cmd[1024], protodir[256];
	const char *proto = find_proto();
	struct small s;
	uint8_t *raw;
	size_t len;
	char *out;
	int status;

	(void)state;
	if (!proto) {
		skip_because("proto/profile.proto not found (run from the repo root)");
	}
	out = run("protoc --version 2>/dev/null", &status);
	if (!out || status != 0) {
		free(out);
		skip_because("protoc not installed");
	}
	free(out);
	snprintf(protodir, sizeof(protodir), "%s", proto);
	*strrchr(protodir, '/') = 0;

	small_build(&s);
	assert_int_equal(encode_pprof_raw(s.p, &raw, &len), 0);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/p.pb", dir);
	write_file(path, raw, len);
	snprintf(cmd, sizeof(cmd), "protoc --decode=perftools.profiles.Profile --proto_path=%s %s < %s",
		 protodir, proto, path);
	out = run(cmd, &status);
	assert_non_null(out);
	assert_int_equal(status, 0);
	assert_string_equal(strstr(out, "string_table: \"\"\n") ? "ok" : out, "ok");
	assert_non_null(strstr(out, "string_table: \"inlined_leaf\""));
	assert_non_null(strstr(out, "string_table: \"[kernel.kallsyms]\""));
	assert_non_null(strstr(out, "period: 10000000\n"));
	assert_non_null(strstr(out, "duration_nanos: 5000000000\n"));
	assert_non_null(strstr(out, "time_nanos: 1700000000000000000\n"));
	assert_non_null(strstr(out, "value: 30000000\n"));
	assert_non_null(strstr(out, "value: 50000000\n"));
	assert_non_null(strstr(out, "has_inline_frames: true"));
	assert_non_null(strstr(out, "address: 4660\n")); /* 0x1234 */
	assert_non_null(strstr(out, "num: 42\n"));
	/* The main mapping (id 2) is the first mapping. */
	assert_non_null(strstr(out, "mapping {\n  id: 2\n"));
	assert_true(strstr(out, "mapping {\n  id: 2\n") < strstr(out, "mapping {\n  id: 1\n"));
	free(out);
	unlink(path);
	rmdir(dir);
	free(raw);
	profile_free(s.p);
}

/* Google's pprof reads the gzip'ed file and agrees on names and counts. */
static void test_pprof_tool(void **state)
{
	char dir[] = "/tmp/prowl-test-XXXXXX", path[256], cmd[1024];
	const char *pprof = getenv("PPROF") ? getenv("PPROF") : "/tmp/tools/pprof";
	struct small s;
	uint8_t *gz;
	size_t len;
	char *out, *samples;
	int status;

	(void)state;
	if (access(pprof, X_OK) != 0) {
		skip_because("pprof binary %s not found (make tools; tests/run.sh sets PPROF)", pprof);
	}
	small_build(&s);
	assert_int_equal(encode_pprof(s.p, &gz, &len), 0);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/p.pb.gz", dir);
	write_file(path, gz, len);
	snprintf(cmd, sizeof(cmd), "%s -raw %s 2>&1", pprof, path);
	out = run(cmd, &status);
	assert_non_null(out);
	if (status != 0)
		fail_msg("pprof failed: %s", out);
	/* Sample lines look like "  3   30000000: 1 2 "; pprof renumbers ids. */
	samples = strstr(out, "Samples:");
	assert_non_null(samples);
	assert_non_null(strstr(samples, " 3   30000000: "));
	assert_non_null(strstr(samples, " 5   50000000: "));
	assert_non_null(strstr(out, "cpu/nanoseconds[dflt]"));
	assert_non_null(strstr(out, "process_name:[app]"));
	assert_non_null(strstr(out, "pid:[42 pid]"));
	assert_non_null(strstr(out, " inlined_leaf app.c:12 s=10"));
	assert_non_null(strstr(out, " outer app.c:30 s=25"));
	assert_non_null(strstr(out, " main app.c:50 s=45"));
	assert_non_null(strstr(out, " do_syscall_64 "));
	assert_non_null(strstr(out, "/usr/bin/app abcd01 [FN][FL][LN][IN]"));
	assert_non_null(strstr(out, "[kernel.kallsyms]  [FN]"));
	assert_non_null(strstr(out, "Period: 10000000"));
	free(out);
	unlink(path);
	rmdir(dir);
	free(gz);
	profile_free(s.p);
}

static void test_folded(void **state)
{
	struct small s;
	uint32_t ls2, ls_none, ls_empty, odd;
	struct prof_frame oddf = { .function = "op;er\nator" }; /* '\n' is '?' once interned */
	char *out;
	size_t len;

	(void)state;
	small_build(&s);
	/* Same process name, other pid: folds into the same lines. */
	assert_int_equal(profile_labelset(s.p, (struct prof_label_in[]){
		{ .key = "pid", .num = 43 }, { .key = "process_name", .str = "app" } }, 2, &ls2), 0);
	assert_int_equal(profile_add_sample(s.p, ls2, (uint32_t[]){ s.loc_inl, s.loc_main }, 2, 4), 0);
	/* No process_name label: "unknown". */
	assert_int_equal(profile_labelset(s.p, (struct prof_label_in[]){ { .key = "pid", .num = 7 } }, 1, &ls_none), 0);
	assert_int_equal(profile_add_location(s.p, s.mmap, 0x3000, &oddf, 1, true, &odd), 0);
	assert_int_equal(profile_add_sample(s.p, ls_none, (uint32_t[]){ odd, s.loc_main }, 2, 2), 0);
	assert_int_equal(profile_add_sample(s.p, 0, (uint32_t[]){ s.loc_main }, 1, 1), 0);
	assert_int_equal(profile_labelset(s.p, NULL, 0, &ls_empty), 0);
	assert_int_equal(profile_add_sample(s.p, ls_empty, (uint32_t[]){ s.loc_main }, 1, 6), 0);
	/* process_name with a separator in it. */
	assert_int_equal(profile_labelset(s.p, (struct prof_label_in[]){
		{ .key = "process_name", .str = "a;b" } }, 1, &ls2), 0);
	assert_int_equal(profile_add_sample(s.p, ls2, (uint32_t[]){ s.loc_kern }, 1, 1), 0);

	assert_int_equal(encode_folded(s.p, &out, &len), 0);
	assert_int_equal(len, strlen(out));
	assert_string_equal(out,
		"a:b;do_syscall_64 1\n"
		"app;main;outer;inlined_leaf 7\n"
		"app;main;outer;inlined_leaf;do_syscall_64 5\n"
		"unknown;main 7\n"
		"unknown;main;op:er?ator 2\n");
	free(out);

	profile_reset(s.p);
	assert_int_equal(encode_folded(s.p, &out, &len), 0);
	assert_int_equal(len, 0);
	assert_string_equal(out, "");
	free(out);
	profile_free(s.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pprof_decode),
		cmocka_unit_test(test_pprof_mapping_flags),
		cmocka_unit_test(test_pprof_empty),
		cmocka_unit_test(test_pprof_offcpu),
		cmocka_unit_test(test_pprof_labeled),
		cmocka_unit_test(test_pprof_protoc),
		cmocka_unit_test(test_pprof_tool),
		cmocka_unit_test(test_folded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
