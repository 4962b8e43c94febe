/* test_exporters.c: unit tests of the Pyroscope (ingest, push) and Parca (gRPC-web)
 * exporters: what they send and how they read the answers, against httpsrv.h. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "aggregate.h"
#include "clock.h"
#include "encode.h"
#include "export.h"
#include "export_parca.h"
#include "export_pyroscope.h"
#include "parca_profilestore.pb-c.h"
#include "pyroscope_push.pb-c.h"
#include "sender.h"
#include "testutil.h"
#include "httpsrv.h"

/* ---- exporter tests ---- */

struct fixture {
	struct profile *prof[3];
	struct export_series series[3];
	struct export_batch batch;
	uint8_t *pprof[3];
	size_t pprof_len[3];
};

static const struct series_label labels_a[] = {
	{ "service_name", "my app{x}" },
	{ "host_name", "h,1" },
	{ "env", "a=b c" },
	{ "9bad-name", "v}" },
	{ "empty", "" },
};
static const struct series_label labels_b[] = {
	{ "host_name", "h2" },
	{ "service_name", "svc" },
	{ "note", "a\"b\\c\nd\xff" },
};
static const struct series_label labels_c[] = {
	{ "service_name", "idle" },
};

static void fixture_init(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	f->prof[0] = test_profile(5);
	f->prof[1] = test_profile(0); /* no samples: skipped */
	f->prof[2] = test_profile(7);
	f->series[0] = (struct export_series){ labels_a, 5, f->prof[0] };
	f->series[1] = (struct export_series){ labels_c, 1, f->prof[1] };
	f->series[2] = (struct export_series){ labels_b, 3, f->prof[2] };
	for (int i = 0; i < 3; i++)
		assert_int_equal(encode_pprof(f->prof[i], &f->pprof[i], &f->pprof_len[i]), 0);
	f->batch = (struct export_batch){
		.series = f->series,
		.nseries = 3,
		.start_unix_ns = 1700000000500000000LL,
		.end_unix_ns = 1700000010200000000LL,
		.period_ns = 10000000,
	};
}

static void fixture_fini(struct fixture *f)
{
	for (int i = 0; i < 3; i++) {
		profile_free(f->prof[i]);
		free(f->pprof[i]);
	}
}

static void run_exporter(struct exporter *e, const struct export_batch *b, struct export_stats *st)
{
	assert_int_equal(e->ops->submit(e, b), 0);
	assert_int_equal(e->ops->flush(e, 5000), 0);
	e->ops->get_stats(e, st);
	e->ops->free(e);
}

static void test_pyroscope_ingest(void **state)
{
	struct export_stats st;
	struct http_target t;
	struct exporter *e;
	struct fixture f;
	struct srv s;
	char url[64];

	(void)state;
	fixture_init(&f);
	srv_init(&s, 200);
	srv_start(&s, 0);
	target_init(&t, url, sizeof(url), s.port);
	assert_int_equal(exporter_pyroscope_new(&t, PYRO_API_INGEST, &e), 0);
	assert_string_equal(e->ops->kind, "pyroscope");
	assert_string_equal(e->name, "pyroscope");
	run_exporter(e, &f.batch, &st);

	assert_int_equal(st.sent, 2);
	assert_int_equal(s.n, 2);
	/* name = my_app_x_{host_name=h_1,env=a=b c,_9bad_name=v_} (the space of the app name
	 * is '_': Pyroscope takes only [A-Za-z0-9_.-/] there), percent-encoded by libcurl
	 * (libcurl writes the hex digits in lowercase once the query is in a CURLU) */
	assert_string_equal(s.recs[0].uri,
			    "/ingest?name=my_app_x_%7bhost_name%3dh_1%2cenv%3da%3db%20c%2c_9bad_name%3dv_%7d"
			    "&from=1700000000&until=1700000011&format=pprof&spyName=prowl&sampleRate=100");
	assert_string_equal(s.recs[1].uri,
			    "/ingest?name=svc%7bhost_name%3dh2%2cnote%3da%22b%5cc%0ad%ff%7d"
			    "&from=1700000000&until=1700000011&format=pprof&spyName=prowl&sampleRate=100");
	assert_string_equal(hdr(&s.recs[0], "Content-Type"), "application/octet-stream");
	assert_int_equal(s.recs[0].len, f.pprof_len[0]);
	assert_memory_equal(s.recs[0].body, f.pprof[0], f.pprof_len[0]);
	assert_int_equal(s.recs[1].len, f.pprof_len[2]);
	assert_memory_equal(s.recs[1].body, f.pprof[2], f.pprof_len[2]);
	srv_fini(&s);
	fixture_fini(&f);
}

static void check_label(const Prowl__Pyroscope__Push__V1__LabelPair *l, const char *name, const char *value)
{
	assert_string_equal(l->name, name);
	assert_string_equal(l->value, value);
}

static void test_pyroscope_push(void **state)
{
	Prowl__Pyroscope__Push__V1__PushRequest *pr;
	Prowl__Pyroscope__Push__V1__RawProfileSeries *ps;
	struct export_stats st;
	struct http_target t;
	struct exporter *e;
	struct fixture f;
	struct srv s;
	char url[64];

	(void)state;
	fixture_init(&f);
	srv_init(&s, 200);
	srv_start(&s, 0);
	target_init(&t, url, sizeof(url), s.port);
	t.tenant = "t1";
	assert_int_equal(exporter_pyroscope_new(&t, PYRO_API_PUSH, &e), 0);
	run_exporter(e, &f.batch, &st);

	assert_int_equal(st.sent, 1);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.recs[0].uri, "/push.v1.PusherService/Push");
	assert_string_equal(hdr(&s.recs[0], "Content-Type"), "application/proto");
	assert_string_equal(hdr(&s.recs[0], "Connect-Protocol-Version"), "1");
	assert_string_equal(hdr(&s.recs[0], "X-Scope-OrgID"), "t1");
	pr = prowl__pyroscope__push__v1__push_request__unpack(NULL, s.recs[0].len, s.recs[0].body);
	assert_non_null(pr);
	assert_int_equal(pr->n_series, 2);

	ps = pr->series[0];
	assert_int_equal(ps->n_labels, 5);
	check_label(ps->labels[0], "__name__", "process_cpu");
	check_label(ps->labels[1], "service_name", "my app{x}");
	check_label(ps->labels[2], "host_name", "h,1");
	check_label(ps->labels[3], "env", "a=b c");
	check_label(ps->labels[4], "9bad-name", "v}");
	assert_int_equal(ps->n_samples, 1);
	assert_int_equal(ps->samples[0]->raw_profile.len, f.pprof_len[0]);
	assert_memory_equal(ps->samples[0]->raw_profile.data, f.pprof[0], f.pprof_len[0]);

	ps = pr->series[1];
	assert_int_equal(ps->n_labels, 4);
	check_label(ps->labels[0], "__name__", "process_cpu");
	check_label(ps->labels[1], "service_name", "svc");
	check_label(ps->labels[2], "host_name", "h2");
	check_label(ps->labels[3], "note", "a\"b\\c\nd\xff");
	assert_int_equal(ps->n_samples, 1);
	assert_int_equal(ps->samples[0]->raw_profile.len, f.pprof_len[2]);
	assert_memory_equal(ps->samples[0]->raw_profile.data, f.pprof[2], f.pprof_len[2]);
	prowl__pyroscope__push__v1__push_request__free_unpacked(pr, NULL);
	srv_fini(&s);
	fixture_fini(&f);
}

static void check_parca_label(const Prowl__Parca__Profilestore__V1alpha1__Label *l, const char *name,
			      const char *value)
{
	assert_string_equal(l->name, name);
	assert_string_equal(l->value, value);
}

/* Parca's successful gRPC-web answer: an empty reply frame, then the trailer frame. */
static const char parca_ok[] = "\0\0\0\0\0\x80\0\0\0\x1fgrpc-status: 0\r\ngrpc-message: \r\n";

static void test_parca_grpc_web(void **state)
{
	Prowl__Parca__Profilestore__V1alpha1__WriteRawRequest *wr;
	Prowl__Parca__Profilestore__V1alpha1__RawProfileSeries *ps;
	const struct rec *rc;
	struct export_stats st;
	struct http_target t;
	struct exporter *e;
	struct fixture f;
	struct srv s;
	char url[64];

	(void)state;
	fixture_init(&f);
	srv_init(&s, 200);
	s.reply = parca_ok;
	s.reply_len = sizeof(parca_ok) - 1;
	srv_start(&s, 0);
	target_init(&t, url, sizeof(url), s.port);
	assert_int_equal(exporter_parca_new(&t, &e), 0);
	assert_string_equal(e->ops->kind, "parca");
	run_exporter(e, &f.batch, &st);

	assert_int_equal(st.sent, 1);
	assert_int_equal(st.failed, 0);
	assert_int_equal(s.n, 1);
	rc = &s.recs[0];
	assert_string_equal(rc->uri, "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw");
	assert_string_equal(hdr(rc, "Content-Type"), "application/grpc-web+proto");
	/* one uncompressed frame, as long as the body */
	assert_true(rc->len > 5);
	assert_int_equal(rc->body[0], 0);
	assert_int_equal((size_t)rc->body[1] << 24 | (size_t)rc->body[2] << 16 | (size_t)rc->body[3] << 8 | rc->body[4],
			 rc->len - 5);
	wr = prowl__parca__profilestore__v1alpha1__write_raw_request__unpack(NULL, rc->len - 5, rc->body + 5);
	assert_non_null(wr);
	assert_false(wr->normalized);
	assert_int_equal(wr->n_series, 2); /* the empty series is skipped */

	ps = wr->series[0];
	assert_non_null(ps->labels);
	assert_int_equal(ps->labels->n_labels, 5);
	check_parca_label(ps->labels->labels[0], "__name__", "parca_agent_cpu");
	check_parca_label(ps->labels->labels[1], "service_name", "my app{x}");
	check_parca_label(ps->labels->labels[2], "host_name", "h,1");
	check_parca_label(ps->labels->labels[3], "env", "a=b c");
	check_parca_label(ps->labels->labels[4], "9bad-name", "v}");
	assert_int_equal(ps->n_samples, 1);
	assert_int_equal(ps->samples[0]->raw_profile.len, f.pprof_len[0]);
	assert_memory_equal(ps->samples[0]->raw_profile.data, f.pprof[0], f.pprof_len[0]);

	ps = wr->series[1];
	assert_int_equal(ps->labels->n_labels, 4);
	check_parca_label(ps->labels->labels[0], "__name__", "parca_agent_cpu");
	check_parca_label(ps->labels->labels[1], "service_name", "svc");
	check_parca_label(ps->labels->labels[2], "host_name", "h2");
	check_parca_label(ps->labels->labels[3], "note", "a\"b\\c\nd\xff");
	assert_int_equal(ps->samples[0]->raw_profile.len, f.pprof_len[2]);
	assert_memory_equal(ps->samples[0]->raw_profile.data, f.pprof[2], f.pprof_len[2]);
	prowl__parca__profilestore__v1alpha1__write_raw_request__free_unpacked(wr, NULL);
	srv_fini(&s);
	fixture_fini(&f);
}

/* HTTP 200 is not success in gRPC-web: a grpc-status other than 0 (here trailers-only,
 * as headers) retries when the server is unavailable and fails the call otherwise; an
 * answer with no grpc-status at all (not a gRPC-web server) fails it too. */
static void test_parca_grpc_status(void **state)
{
	static const struct {
		const char *code;
		bool retry;
	} cases[] = { { "14", true }, { "8", true }, { "3", false }, { "16", false }, { NULL, false } };
	struct export_stats st;
	struct http_target t;
	struct exporter *e;
	struct fixture f;
	struct srv s;
	char url[64], want[64], *log;

	(void)state;
	fixture_init(&f);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		srv_init(&s, 200);
		s.reply = "{}";
		if (cases[i].code) {
			s.reply_hdr[0] = "grpc-status";
			s.reply_hdr[1] = cases[i].code;
		}
		srv_start(&s, 0);
		target_init(&t, url, sizeof(url), s.port);
		t.max_retries = 2;
		capture_begin();
		assert_int_equal(exporter_parca_new(&t, &e), 0);
		assert_int_equal(e->ops->submit(e, &f.batch), 0);
		assert_int_equal(e->ops->flush(e, 10000), 0);
		e->ops->get_stats(e, &st);
		e->ops->free(e);
		log = capture_end();
		snprintf(want, sizeof(want), cases[i].retry ? "failed: gRPC status %s " : "rejected: gRPC status %s ",
			 cases[i].code);
		assert_non_null(strstr(log, cases[i].code ? want : "rejected: HTTP 2xx without a grpc-status"));
		free(log);
		assert_int_equal(st.sent, 0);
		assert_int_equal(srv_count(&s), cases[i].retry ? 3 : 1);
		assert_int_equal(st.failed, cases[i].retry ? 0 : 1);
		assert_int_equal(st.dropped, cases[i].retry ? 1 : 0);
		srv_fini(&s);
	}
	fixture_fini(&f);
}

static void test_exporter_nothing_to_send(void **state)
{
	struct export_stats st;
	struct http_target t;
	struct exporter *e;
	struct srv s;
	struct profile *empty = profile_new();
	struct export_series ser = { labels_c, 1, empty };
	struct export_batch b = { .series = &ser, .nseries = 1, .period_ns = 10000000 };
	char url[64];

	(void)state;
	srv_init(&s, 200);
	srv_start(&s, 0);
	target_init(&t, url, sizeof(url), s.port);
	assert_int_equal(exporter_pyroscope_new(&t, PYRO_API_PUSH, &e), 0);
	run_exporter(e, &b, &st);
	assert_int_equal(exporter_parca_new(&t, &e), 0);
	run_exporter(e, &b, &st);
	assert_int_equal(exporter_pyroscope_new(&t, PYRO_API_INGEST, &e), 0);
	run_exporter(e, &b, &st);
	assert_int_equal(st.sent, 0);
	assert_int_equal(srv_count(&s), 0);
	profile_free(empty);
	srv_fini(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pyroscope_ingest),
		cmocka_unit_test(test_pyroscope_push),
		cmocka_unit_test(test_parca_grpc_web),
		cmocka_unit_test(test_parca_grpc_status),
		cmocka_unit_test(test_exporter_nothing_to_send),
	};

	/* Small backoff keeps the retry tests fast (Retry-After is still honoured). */
	setenv("PROWL_TEST_BACKOFF_MS", "20", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
