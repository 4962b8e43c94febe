/* test_report.c: unit tests of report and diff's stages: the pprof reader against
 * prowl's own encoder and hostile messages, bounded gunzip, times, the view and the gate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "aggregate.h"
#include "analyse/diff.h"
#include "analyse/jsonw.h"
#include "analyse/pprof_read.h"
#include "analyse/timespec.h"
#include "analyse/view.h"
#include "encode.h"
#include "gzip.h"
#include "escape.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile;

/* main -> work -> leaf (5), main -> work (3), main -> rec -> rec -> leaf (2): rec
 * recurses, so its total must count those 2 samples once. */
static struct profile *sample_profile(void)
{
	struct profile *p = profile_new();
	struct prof_frame fr[] = {
		{ .function = "main", .file = "m.c", .line = 10 },
		{ .function = "work", .file = "m.c", .line = 20 },
		{ .function = "leaf", .file = "m.c", .line = 30 },
		{ .function = "rec", .file = "m.c", .line = 40 },
	};
	struct prof_label_in lb[] = { { .key = "process_name", .str = "app" }, { .key = "pid", .num = 7 } };
	uint32_t map, loc[5], ls;

	assert_non_null(p);
	profile_set_period(p, 10000000);
	profile_set_time(p, 1700000000000000000LL, 2000000000LL);
	assert_int_equal(profile_mapping(p, &(struct prof_mapping_in){ .key = 1, .start = 0x1000, .limit = 0x9000,
				.filename = "/bin/app", .build_id = "ab12", .is_main = true }, &map), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(profile_add_location(p, map, 0x1000 + 16 * i, &fr[i], 1, true, &loc[i]), 0);
	assert_int_equal(profile_add_location(p, map, 0x2000, &fr[3], 1, true, &loc[4]), 0); /* rec, another pc */
	assert_int_equal(profile_labelset(p, lb, 2, &ls), 0);
	assert_int_equal(profile_add_sample(p, ls, (uint32_t[]){ loc[2], loc[1], loc[0] }, 3, 5), 0);
	assert_int_equal(profile_add_sample(p, ls, (uint32_t[]){ loc[1], loc[0] }, 2, 3), 0);
	assert_int_equal(profile_add_sample(p, ls, (uint32_t[]){ loc[2], loc[4], loc[3], loc[0] }, 4, 2), 0);
	return p;
}

static struct pprof_msg *decode_ok(const void *buf, size_t len)
{
	struct pprof_msg *m = NULL;
	const char *why = NULL;
	int r = pprof_decode(buf, len, &m, &why);

	if (r)
		fail_msg("decode failed: %s", why);
	return m;
}

static char *folded(const struct profile *p)
{
	char *s;
	size_t n;

	assert_int_equal(encode_folded(p, &s, &n), 0);
	return s;
}

/* prowl's own pprof reads back to the same folded stacks, and merging it twice doubles them. */
static void test_roundtrip(void **state)
{
	struct profile *p = sample_profile(), *q = profile_new();
	struct pprof_info info;
	struct pprof_msg *m;
	uint8_t *gz;
	size_t len;
	uint64_t got = 0;
	char *a, *b;

	(void)state;
	assert_int_equal(encode_pprof(p, &gz, &len), 0);
	m = decode_ok(gz, len);
	pprof_msg_info(m, &info);
	assert_int_equal(info.samples, 10);
	assert_int_equal(info.period, 10000000);
	assert_int_equal(info.time_nanos, 1700000000000000000LL);
	assert_string_equal(info.sample_types, "samples/count,cpu/nanoseconds");
	assert_int_equal(pprof_msg_merge(m, q, NULL, 0, true, &got), 0);
	assert_int_equal(got, 10);
	a = folded(p);
	b = folded(q);
	assert_string_equal(a, b);
	free(b);
	assert_int_equal(pprof_msg_merge(m, q, NULL, 0, false, &got), 0);
	b = folded(q);
	assert_string_equal(b, "app;main;rec;rec;leaf 4\napp;main;work 6\napp;main;work;leaf 10\n");
	free(a);
	free(b);
	/* A label filter keeps only matching samples: by string and by number. */
	profile_reset(q);
	assert_int_equal(pprof_msg_merge(m, q, (struct pprof_filter[]){ { "pid", "7" } }, 1, true, &got), 0);
	assert_int_equal(got, 10);
	assert_int_equal(pprof_msg_merge(m, q, (struct pprof_filter[]){ { "process_name", "other" } }, 1, true, &got), 0);
	assert_int_equal(got, 0);
	pprof_msg_free(m);
	free(gz);
	profile_free(p);
	profile_free(q);
}

/* A valid message the hostile cases below break one field at a time. */
struct msg {
	pb_profile p;
	Perftools__Profiles__ValueType vt[2], *vtp[2];
	Perftools__Profiles__Function fn, *fnp;
	Perftools__Profiles__Line ln, *lnp;
	Perftools__Profiles__Location loc, *locp;
	Perftools__Profiles__Sample s, *sp;
	Perftools__Profiles__Label lb, *lbp;
	char *strs[6];
	uint64_t locid[1];
	int64_t val[2];
};

static void msg_init(struct msg *m)
{
	static char *strs[] = { "", "samples", "count", "cpu", "nanoseconds", "f" };

	memset(m, 0, sizeof(*m));
	m->p = (pb_profile)PERFTOOLS__PROFILES__PROFILE__INIT;
	memcpy(m->strs, strs, sizeof(strs));
	for (int i = 0; i < 2; i++) {
		m->vt[i] = (Perftools__Profiles__ValueType)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
		m->vt[i].type = 1 + 2 * i;
		m->vt[i].unit = 2 + 2 * i;
		m->vtp[i] = &m->vt[i];
	}
	m->fn = (Perftools__Profiles__Function)PERFTOOLS__PROFILES__FUNCTION__INIT;
	m->fn.id = 1;
	m->fn.name = 5;
	m->fnp = &m->fn;
	m->ln = (Perftools__Profiles__Line)PERFTOOLS__PROFILES__LINE__INIT;
	m->ln.function_id = 1;
	m->lnp = &m->ln;
	m->loc = (Perftools__Profiles__Location)PERFTOOLS__PROFILES__LOCATION__INIT;
	m->loc.id = 1;
	m->loc.n_line = 1;
	m->loc.line = &m->lnp;
	m->locp = &m->loc;
	m->lb = (Perftools__Profiles__Label)PERFTOOLS__PROFILES__LABEL__INIT;
	m->lb.key = 5;
	m->lb.str = 5;
	m->lbp = &m->lb;
	m->s = (Perftools__Profiles__Sample)PERFTOOLS__PROFILES__SAMPLE__INIT;
	m->locid[0] = 1;
	m->s.n_location_id = 1;
	m->s.location_id = m->locid;
	m->val[0] = 3;
	m->val[1] = 30;
	m->s.n_value = 2;
	m->s.value = m->val;
	m->s.n_label = 1;
	m->s.label = &m->lbp;
	m->sp = &m->s;
	m->p.n_sample_type = 2;
	m->p.sample_type = m->vtp;
	m->p.n_function = 1;
	m->p.function = &m->fnp;
	m->p.n_location = 1;
	m->p.location = &m->locp;
	m->p.n_sample = 1;
	m->p.sample = &m->sp;
	m->p.n_string_table = 6;
	m->p.string_table = m->strs;
}

/* Packs m and decodes it: 0 or the error, with the reason in *why. */
static int try_decode(const struct msg *m, const char **why)
{
	size_t len = perftools__profiles__profile__get_packed_size(&m->p);
	uint8_t *buf = malloc(len + 1);
	struct pprof_msg *pm = NULL;
	int r;

	assert_non_null(buf);
	perftools__profiles__profile__pack(&m->p, buf);
	r = pprof_decode(buf, len, &pm, why);
	pprof_msg_free(pm);
	free(buf);
	return r;
}

static void expect_bad(struct msg *m, const char *reason_part)
{
	const char *why = NULL;

	assert_int_equal(try_decode(m, &why), -EBADMSG);
	assert_non_null(why);
	if (!strstr(why, reason_part))
		fail_msg("reason '%s' does not say '%s'", why, reason_part);
	msg_init(m);
}

static void test_hostile(void **state)
{
	static char *bad_first[] = { "x", "samples", "count", "cpu", "nanoseconds", "f" };
	const char *why;
	struct msg m;

	(void)state;
	msg_init(&m);
	assert_int_equal(try_decode(&m, &why), 0);

	m.fn.name = 6;
	expect_bad(&m, "string table");
	m.fn.filename = -1;
	expect_bad(&m, "string table");
	m.lb.str = 1000;
	expect_bad(&m, "label");
	m.lb.key = 0;
	expect_bad(&m, "label");
	m.ln.function_id = 2;
	expect_bad(&m, "function that does not exist");
	m.locid[0] = 9;
	expect_bad(&m, "location that does not exist");
	m.loc.mapping_id = 3;
	expect_bad(&m, "mapping that does not exist");
	m.val[0] = -1;
	expect_bad(&m, "negative");
	m.s.n_value = 1;
	expect_bad(&m, "number of values");
	m.val[0] = INT64_MAX;
	expect_bad(&m, "2^50");
	m.loc.id = 0;
	expect_bad(&m, "id is 0");
	m.p.string_table = bad_first;
	expect_bad(&m, "empty string");
	m.vt[0].type = 3; /* cpu/count, cpu/nanoseconds: no samples/count */
	expect_bad(&m, "not a CPU sample profile");
	m.p.n_sample_type = 0;
	m.s.n_value = 0;
	expect_bad(&m, "no sample types");
	m.p.period = -5;
	expect_bad(&m, "negative");

	/* Not protobuf, empty, and a truncated gzip stream. */
	{
		struct pprof_msg *pm = NULL;
		uint8_t junk[] = "this is not a profile at all \xff\xff\xff\xff";
		uint8_t *gz;
		size_t len;

		assert_int_equal(pprof_decode(junk, sizeof(junk), &pm, &why), -EBADMSG);
		assert_int_equal(pprof_decode(junk, 0, &pm, &why), -EBADMSG);
		assert_non_null(strstr(why, "empty"));
		assert_int_equal(gzip_compress(junk, sizeof(junk), &gz, &len), 0);
		assert_int_equal(pprof_decode(gz, len - 6, &pm, &why), -EBADMSG);
		assert_non_null(strstr(why, "gzip"));
		free(gz);
	}
}

/* Foreign files may give one address to different functions: they must stay apart. */
static void test_same_address_other_function(void **state)
{
	struct profile *q = profile_new();
	static char *strs[] = { "", "samples", "count", "cpu", "nanoseconds", "g" };
	struct pprof_msg *pm;
	struct msg m;
	uint8_t *buf;
	size_t len;
	uint64_t got;
	char *s;

	(void)state;
	for (int i = 0; i < 2; i++) {
		msg_init(&m);
		if (i)
			m.p.string_table = strs; /* same (mapping 0, address 0), function "g" */
		len = perftools__profiles__profile__get_packed_size(&m.p);
		buf = malloc(len);
		perftools__profiles__profile__pack(&m.p, buf);
		pm = decode_ok(buf, len);
		assert_int_equal(pprof_msg_merge(pm, q, NULL, 0, i == 0, &got), 0);
		pprof_msg_free(pm);
		free(buf);
	}
	s = folded(q);
	assert_string_equal(s, "unknown;f 3\nunknown;g 3\n");
	free(s);
	profile_free(q);
}

static void test_gunzip_bounds(void **state)
{
	uint8_t *zeros = calloc(1, 100000), *gz, *gz2, *out, *cat;
	size_t len, len2, olen;

	(void)state;
	assert_non_null(zeros);
	assert_int_equal(gzip_compress(zeros, 100000, &gz, &len), 0);
	assert_int_equal(gzip_decompress(gz, len, 99999, &out, &olen), -EFBIG);
	assert_int_equal(gzip_decompress(gz, len, 100000, &out, &olen), 0);
	assert_int_equal(olen, 100000);
	free(out);
	/* Two members are one file; other bytes after the stream are refused. */
	assert_int_equal(gzip_compress("ab", 2, &gz2, &len2), 0);
	cat = malloc(len + len2 + 1);
	memcpy(cat, gz, len);
	memcpy(cat + len, gz2, len2);
	assert_int_equal(gzip_decompress(cat, len + len2, 200000, &out, &olen), 0);
	assert_int_equal(olen, 100002);
	assert_memory_equal(out + 100000, "ab", 2);
	free(out);
	cat[len] = 'x';
	assert_int_equal(gzip_decompress(cat, len + 1, 200000, &out, &olen), -EBADMSG);
	assert_int_equal(gzip_decompress(gz, len - 1, 200000, &out, &olen), -EBADMSG);
	free(cat);
	free(gz);
	free(gz2);
	free(zeros);
}

static void test_times(void **state)
{
	const int64_t s = 1000000000LL, now = 1714557600LL * s; /* 2024-05-01T10:00:00Z */
	int64_t t, a, b;

	(void)state;
	setenv("TZ", "UTC", 1);
	assert_int_equal(time_parse("2024-05-01T10:00:00Z", now, &t), 0);
	assert_int_equal(t, now);
	assert_int_equal(time_parse("2024-05-01T12:00:00.25+02:00", now, &t), 0);
	assert_int_equal(t, now + s / 4);
	assert_int_equal(time_parse("2024-05-01 09:30", now, &t), 0);
	assert_int_equal(t, now - 1800 * s);
	assert_int_equal(time_parse("-1h30m", now, &t), 0);
	assert_int_equal(t, now - 5400 * s);
	assert_int_equal(time_parse("now", now, &t), 0);
	assert_int_equal(t, now);
	assert_int_equal(time_parse("09:15", now, &t), 0);
	assert_int_equal(t, now - 2700 * s);
	assert_int_equal(time_parse("23:00", now, &t), 0); /* still ahead today: yesterday's */
	assert_int_equal(t, now - 11 * 3600 * s);
	const char *bad[] = { "", "yesterday", "25:00", "10:60", "2024-13-01T00:00:00Z", "2024-05-01T10:00:00+2",
			      "2024-05-01T10:00:00Zx", "-", "-5x", "10:00:00.", "1h" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (time_parse(bad[i], now, &t) != -EINVAL)
			fail_msg("'%s' was accepted", bad[i]);
	assert_int_equal(time_range_parse("-2h..-1h", now, &a, &b), 0);
	assert_int_equal(a, now - 7200 * s);
	assert_int_equal(b, now - 3600 * s);
	assert_int_equal(time_range_parse("..", now, &a, &b), 0);
	assert_int_equal(a, INT64_MIN);
	assert_int_equal(b, now);
	assert_int_equal(time_range_parse("2024-05-01T09:00:00.5Z..2024-05-01T09:30:00Z", now, &a, &b), 0);
	assert_int_equal(a, now - 3600 * s + s / 2);
	/* The end of a range: the first such clock time after its start, even ahead of now. */
	assert_int_equal(time_range_parse("09:00..11:00", now, &a, &b), 0);
	assert_int_equal(a, now - 3600 * s);
	assert_int_equal(b, now + 3600 * s);
	assert_int_equal(time_range_parse("23:00..01:00", now, &a, &b), 0); /* yesterday 23:00 to 01:00 today */
	assert_int_equal(a, now - 11 * 3600 * s);
	assert_int_equal(b, now - 9 * 3600 * s);
	assert_int_equal(time_range_parse("09:00..09:00", now, &a, &b), 0); /* a whole day */
	assert_int_equal(b - a, 86400 * s);
	assert_int_equal(time_parse_end("11:00", now, INT64_MIN, &t), 0); /* no start: time_parse's rule */
	assert_int_equal(t, now - 23 * 3600 * s);
	assert_int_equal(time_parse_end("-1h", now, now - 7200 * s, &t), 0);
	assert_int_equal(t, now - 3600 * s);
	assert_int_equal(time_parse_end("24:00", now, now, &t), -EINVAL);
	assert_int_equal(time_range_parse("-1h..-2h", now, &a, &b), -EINVAL);
	assert_int_equal(time_range_parse("-1h", now, &a, &b), -EINVAL);
}

static const struct view_func *func_named(const struct view *v, const char *name)
{
	for (uint32_t f = 1; f <= v->nfuncs; f++)
		if (strcmp(view_str(v, v->funcs[f].name), name) == 0)
			return &v->funcs[f];
	fail_msg("no function %s", name);
	return NULL;
}

static void test_view_and_gate(void **state)
{
	struct profile *p = sample_profile(), *q = profile_new();
	struct diff_row *rows;
	struct view *v;
	size_t n;
	FILE *devnull = fopen("/dev/null", "w");

	(void)state;
	/* The new side: all in main -> rec -> leaf. */
	{
		struct prof_frame fr[] = { { .function = "main" }, { .function = "rec" }, { .function = "leaf" } };
		uint32_t map, l[3];

		assert_int_equal(profile_mapping(q, &(struct prof_mapping_in){ .key = 1, .limit = 10 }, &map), 0);
		for (int i = 0; i < 3; i++)
			assert_int_equal(profile_add_location(q, map, i, &fr[i], 1, true, &l[i]), 0);
		assert_int_equal(profile_add_sample(q, 0, (uint32_t[]){ l[2], l[1], l[0] }, 3, 40), 0);
	}
	assert_int_equal(view_new(false, &v), 0);
	assert_int_equal(view_add_profile(v, p, VIEW_BASE), 0);
	assert_int_equal(view_add_profile(v, q, VIEW_NEW), 0);
	assert_int_equal(view_finish(v), 0);
	assert_int_equal(v->total[0], 10);
	assert_int_equal(v->total[1], 40);
	assert_int_equal(func_named(v, "rec")->total[0], 2); /* once per sample, not per frame */
	assert_int_equal(func_named(v, "leaf")->self[0], 7);
	assert_int_equal(func_named(v, "work")->total[1], 0);
	assert_int_equal(v->max_depth, 4);

	assert_int_equal(diff_rows(v, 3, &rows, &n), 0);
	assert_int_equal(n, 4);
	/* rec: 20% -> 100% total; work: 80% -> 0% ("gone"): equal changes, sorted by name. */
	assert_string_equal(view_str(v, v->funcs[rows[0].func].name), "rec");
	assert_true(rows[0].d_total > 79.99 && rows[0].d_total < 80.01);
	assert_true(rows[1].d_total < -79.99);
	/* sqrt(.2*.8/10 + 0) = 12.6 pp, x3 = 37.9: 80 grows past 5 + 37.9, but not past 45. */
	assert_true(rows[0].noise_total > 37.9 && rows[0].noise_total < 38.0);
	/* leaf: 70% -> 100% (+30), within 5 + 3 x 14.5 pp of noise. */
	assert_int_equal(diff_judge(v, rows, n, &(struct diff_gate){ .on = true, .max_pp = 5, .sigmas = 3 }, devnull), 1);
	assert_true(rows[0].offender_total);
	assert_int_equal(diff_judge(v, rows, n, &(struct diff_gate){ .on = true, .max_pp = 45, .sigmas = 3 }, devnull), 0);
	free(rows);
	view_free(v);
	profile_free(p);
	profile_free(q);
	fclose(devnull);
}

static void test_json_escaping(void **state)
{
	struct sbuf b = {};

	(void)state;
	assert_int_equal(json_str(&b, "</script><b>\"&\\\n\xff\xc3\xa9\xe2\x80\xa8"), 0);
	assert_string_equal(b.s, "\"\\u003c/script\\u003e\\u003cb\\u003e\\\"\\u0026\\\\\\n\\ufffd\xc3\xa9\\u2028\"");
	b.len = 0;
	assert_int_equal(json_num(&b, 12.5, 4), 0);
	assert_int_equal(sbuf_putc(&b, ' '), 0);
	assert_int_equal(json_num(&b, -0.00001, 4), 0);
	assert_int_equal(sbuf_putc(&b, ' '), 0);
	assert_int_equal(json_num(&b, 1.0 / 0.0, 4), 0);
	assert_int_equal(sbuf_putc(&b, ' '), 0);
	assert_int_equal(json_num(&b, 3.0, 2), 0);
	assert_string_equal(b.s, "12.5 0 0 3");
	sbuf_free(&b);
}

/* Names with escape sequences, C1 codes or broken UTF-8 print as '?', the rest as is. */
static void test_printable(void **state)
{
	char buf[32];
	const char *clean = "ns::f(int)";

	(void)state;
	assert_ptr_equal(printable(clean, buf, sizeof(buf)), clean);
	assert_string_equal(printable("a\x1b[31mb\n", buf, sizeof(buf)), "a?[31mb?");
	assert_string_equal(printable("\xc2\x9b" "2J \xc3\xa9 \xff", buf, sizeof(buf)), "?2J \xc3\xa9 ?");
	assert_string_equal(printable("\x7f\xed\xa0\x80", buf, sizeof(buf)), "????"); /* a surrogate: 3 bad bytes */
	assert_string_equal(printable("\x01" "bcdefghijklmnopqrstuvwxyz0123456789", buf, 8), "?bcdefg");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_same_address_other_function),
		cmocka_unit_test(test_gunzip_bounds),
		cmocka_unit_test(test_times),
		cmocka_unit_test(test_view_and_gate),
		cmocka_unit_test(test_json_escaping),
		cmocka_unit_test(test_printable),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
