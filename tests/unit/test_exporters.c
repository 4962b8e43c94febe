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

/* The labels each backend must get for labels_a and labels_b, after its own __name__
 * (service_name first, the empty label left out). */
static const char *const want_a[][2] = {
	{ "service_name", "my app{x}" }, { "host_name", "h,1" }, { "env", "a=b c" }, { "9bad-name", "v}" },
};
static const char *const want_b[][2] = {
	{ "service_name", "svc" }, { "host_name", "h2" }, { "note", "a\"b\\c\nd\xff" },
};
#define NWANT(w) (sizeof(w) / sizeof((w)[0]))

/* A series' labels (Pyroscope's and Parca's label types both have name and value):
 * __name__ = metric, then want in order. */
#define check_series_labels(labels, n_labels, metric, want)                                 \
	do {                                                                                 \
		assert_int_equal((n_labels), 1 + NWANT(want));                               \
		assert_string_equal((labels)[0]->name, "__name__");                          \
		assert_string_equal((labels)[0]->value, (metric));                           \
		for (size_t k_ = 0; k_ < NWANT(want); k_++) {                                \
			assert_string_equal((labels)[k_ + 1]->name, (want)[k_][0]);          \
			assert_string_equal((labels)[k_ + 1]->value, (want)[k_][1]);         \
		}                                                                            \
	} while (0)

/* A series carries one raw profile: fixture profile i's pprof, byte for byte. */
static void check_raw(size_t n_samples, const ProtobufCBinaryData *raw, const struct fixture *f, int i)
{
	assert_int_equal(n_samples, 1);
	assert_int_equal(raw->len, f->pprof_len[i]);
	assert_memory_equal(raw->data, f->pprof[i], f->pprof_len[i]);
}

/* Starts s (set up by srv_init) and points t at it. */
static void serve(struct srv *s, struct http_target *t, char *url, size_t urlsz)
{
	srv_start(s, 0);
	target_init(t, url, urlsz, s->port);
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
	serve(&s, &t, url, sizeof(url));
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
	serve(&s, &t, url, sizeof(url));
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
	check_series_labels(ps->labels, ps->n_labels, "process_cpu", want_a);
	check_raw(ps->n_samples, &ps->samples[0]->raw_profile, &f, 0);
	ps = pr->series[1];
	check_series_labels(ps->labels, ps->n_labels, "process_cpu", want_b);
	check_raw(ps->n_samples, &ps->samples[0]->raw_profile, &f, 2);
	prowl__pyroscope__push__v1__push_request__free_unpacked(pr, NULL);
	srv_fini(&s);
	fixture_fini(&f);
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
	serve(&s, &t, url, sizeof(url));
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

	for (int k = 0; k < 2; k++) {
		ps = wr->series[k];
		assert_non_null(ps->labels);
		if (k == 0)
			check_series_labels(ps->labels->labels, ps->labels->n_labels, "parca_agent_cpu", want_a);
		else
			check_series_labels(ps->labels->labels, ps->labels->n_labels, "parca_agent_cpu", want_b);
		check_raw(ps->n_samples, &ps->samples[0]->raw_profile, &f, 2 * k);
	}
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
		serve(&s, &t, url, sizeof(url));
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
	serve(&s, &t, url, sizeof(url));
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
