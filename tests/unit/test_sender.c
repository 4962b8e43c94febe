/* test_sender.c: unit tests of the HTTP sender (delivery, retries, buffer cap, bounded
 * flush, TLS) against a recording libmicrohttpd server (httpsrv.h). */

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

/* ---- sender tests ---- */

/* Sends one request over t and waits for the queue to drain; returns what was
 * logged meanwhile (malloc'ed) and the stats in *st. */
static char *deliver_one(const struct http_target *t, const char *path, const char *body, size_t len,
			 struct export_stats *st)
{
	struct sender *snd;

	capture_begin();
	assert_int_equal(sender_new("test", t, &snd), 0);
	assert_int_equal(sender_enqueue(snd, make_req(path, (const uint8_t *)body, len)), 0);
	assert_int_equal(sender_flush(snd, 5000), 0);
	sender_get_stats(snd, st);
	sender_free(snd);
	return capture_end();
}

static void test_delivery_headers(void **state)
{
	struct sender_request *req;
	struct export_stats st;
	struct http_target t;
	struct sender *snd;
	struct srv s;
	uint8_t body[200000];
	char url[64], path[32], *log;

	(void)state;
	for (size_t i = 0; i < sizeof(body); i++)
		body[i] = (uint8_t)((i * 7) % 251); /* binary, with zero bytes */
	srv_init(&s, 200);
	srv_start(&s, 0);
	target_init(&t, url, sizeof(url), s.port);
	strcat(url, "/"); /* a trailing slash must not double */
	t.basic_user = "alice";
	t.basic_password = "s3cr3t!";
	t.tenant = "team-a";

	capture_begin();
	assert_int_equal(sender_new("test", &t, &snd), 0);
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "/p/%d?x=%d", i, i);
		req = make_req(path, body, sizeof(body) - (size_t)i);
		req->content_encoding = strdup("gzip");
		req->headers = calloc(2, sizeof(char *));
		req->headers[0] = strdup("X-Extra: yes");
		assert_int_equal(sender_enqueue(snd, req), 0);
	}
	assert_int_equal(sender_flush(snd, 5000), 0);
	sender_get_stats(snd, &st);
	sender_free(snd);
	log = capture_end();

	assert_int_equal(st.sent, 3);
	assert_int_equal(st.retried + st.failed + st.dropped, 0);
	assert_int_equal(st.bytes_sent, 3 * sizeof(body) - 3);
	assert_int_equal(st.queue_items, 0);
	assert_int_equal(st.queue_bytes, 0);
	assert_int_equal(s.n, 3);
	for (int i = 0; i < 3; i++) {
		struct rec *r = &s.recs[i];

		snprintf(path, sizeof(path), "/p/%d?x=%d", i, i);
		assert_string_equal(r->method, "POST");
		assert_string_equal(r->uri, path);
		assert_string_equal(hdr(r, "Authorization"), "Basic YWxpY2U6czNjcjN0IQ==");
		assert_string_equal(hdr(r, "X-Scope-OrgID"), "team-a");
		assert_string_equal(hdr(r, "Content-Type"), "application/octet-stream");
		assert_string_equal(hdr(r, "Content-Encoding"), "gzip");
		assert_string_equal(hdr(r, "X-Extra"), "yes");
		assert_null(hdr(r, "Expect"));
		assert_non_null(hdr(r, "User-Agent"));
		assert_true(strncmp(hdr(r, "User-Agent"), "prowl/", 6) == 0);
		assert_int_equal(r->len, sizeof(body) - (size_t)i);
		assert_memory_equal(r->body, body, r->len);
	}
	assert_int_equal(s.connections, 1); /* keep-alive: one connection for all */
	assert_null(strstr(log, "s3cr3t"));
	free(log);
	srv_fini(&s);

	/* Bearer token; no basic credentials. */
	srv_init(&s, 204);
	srv_start(&s, 0);
	target_init(&t, url, sizeof(url), s.port);
	t.bearer_token = "tok-123";
	assert_int_equal(sender_new("test", &t, &snd), 0);
	assert_int_equal(sender_enqueue(snd, make_req("/x", (const uint8_t *)"hi", 2)), 0);
	assert_int_equal(sender_flush(snd, 5000), 0);
	sender_free(snd);
	assert_int_equal(s.n, 1);
	assert_string_equal(hdr(&s.recs[0], "Authorization"), "Bearer tok-123");
	assert_null(hdr(&s.recs[0], "X-Scope-OrgID"));
	assert_null(hdr(&s.recs[0], "Content-Encoding"));
	assert_memory_equal(s.recs[0].body, "hi", 2);
	srv_fini(&s);
}

static void test_retry_503(void **state)
{
	struct export_stats st;
	struct http_target t;
	struct srv s;
	char url[64], *log;
	int ok = 0;

	(void)state;
	srv_init(&s, 200);
	s.fail_n = 2;
	s.fail_status = 503;
	s.reply = "overloaded";
	srv_start(&s, 0);
	target_init(&t, url, sizeof(url), s.port);
	log = deliver_one(&t, "/ingest?a=1", "payload", 7, &st);

	assert_int_equal(s.n, 3);
	for (int i = 0; i < s.n; i++) {
		assert_int_equal(s.recs[i].len, 7);
		assert_memory_equal(s.recs[i].body, "payload", 7);
		ok += s.recs[i].status == 200;
	}
	assert_int_equal(ok, 1); /* accepted exactly once */
	assert_int_equal(st.sent, 1);
	assert_int_equal(st.retried, 2);
	assert_int_equal(st.failed, 0);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(count_substr(log, "HTTP 503: overloaded"), 1); /* one warning per outage */
	assert_non_null(strstr(log, "test: backend reachable again after 2 failed attempts"));
	free(log);
	srv_fini(&s);
}

/* Which answers are retried, per status: the server answers code once, then 200. A
 * retried request reaches it twice and is sent; a refused one once, and fails. The
 * retried ones: 429 and the 5xx of a server down or overloaded, 500 among them; not
 * 501 and 505, which no retry changes (docs/decisions.md), nor 4xx or 3xx. */
static void test_retry_by_status(void **state)
{
	static const struct {
		int code;
		bool retried;
	} cases[] = {
		{ 429, true },  { 500, true },  { 502, true },  { 503, true },  { 504, true },  { 507, true },
		{ 599, true },  { 400, false }, { 401, false }, { 404, false }, { 413, false }, { 428, false },
		{ 501, false }, { 505, false }, { 308, false },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct export_stats st;
		struct http_target t;
		struct srv s;
		char url[64], *log;

		srv_init(&s, 200);
		s.fail_n = 1;
		s.fail_status = cases[i].code;
		s.reply = "no";
		srv_start(&s, 0);
		target_init(&t, url, sizeof(url), s.port);
		t.max_retries = 3;
		log = deliver_one(&t, "/x", "b", 1, &st);
		if (s.n != (cases[i].retried ? 2 : 1) || st.sent != (cases[i].retried ? 1u : 0u) ||
		    st.retried != (cases[i].retried ? 1u : 0u) || st.failed != (cases[i].retried ? 0u : 1u) ||
		    st.dropped != 0) {
			print_error("HTTP %d must %sbe retried: the server got %d requests; sent %" PRIu64
				    ", retried %" PRIu64 ", failed %" PRIu64 ", dropped %" PRIu64 "\n",
				    cases[i].code, cases[i].retried ? "" : "not ", s.n, st.sent, st.retried, st.failed,
				    st.dropped);
			fail();
		}
		if (!cases[i].retried) {
			char want[96];

			snprintf(want, sizeof(want), "POST /x rejected with HTTP %d: no\n", cases[i].code);
			assert_int_equal(count_substr(log, want), 1);
		}
		free(log);
		srv_fini(&s);
	}
}

static void test_retry_after_429(void **state)
{
	struct export_stats st;
	struct http_target t;
	struct sender *snd;
	struct srv s;
	char url[64];
	int64_t gap;

	(void)state;
	srv_init(&s, 200);
	s.fail_n = 1;
	s.fail_status = 429;
	s.retry_after = 1;
	srv_start(&s, 0);
	target_init(&t, url, sizeof(url), s.port);
	assert_int_equal(sender_new("test", &t, &snd), 0);
	assert_int_equal(sender_enqueue(snd, make_req("/x", (const uint8_t *)"b", 1)), 0);
	assert_int_equal(sender_flush(snd, 5000), 0);
	sender_get_stats(snd, &st);
	sender_free(snd);

	assert_int_equal(s.n, 2);
	gap = s.recs[1].t_ns - s.recs[0].t_ns;
	assert_true(gap >= 950000000); /* Retry-After: 1, not the 20 ms test backoff */
	assert_true(gap < 3000000000);
	assert_int_equal(st.retried, 1);
	assert_int_equal(st.sent, 1);
	srv_fini(&s);
}

static void test_no_retry_400(void **state)
{
	struct export_stats st;
	struct http_target t;
	struct sender *snd;
	struct srv s;
	char url[64], *log;

	(void)state;
	srv_init(&s, 400);
	s.reply = "bad profile:\nmissing name";
	srv_start(&s, 0);
	target_init(&t, url, sizeof(url), s.port);
	t.bearer_token = "very-secret-token";
	capture_begin();
	assert_int_equal(sender_new("test", &t, &snd), 0);
	assert_int_equal(sender_enqueue(snd, make_req("/ingest?name=x", (const uint8_t *)"b", 1)), 0);
	assert_int_equal(sender_flush(snd, 5000), 0);
	sleep_ms(200); /* a retry would show up by now */
	sender_get_stats(snd, &st);
	sender_free(snd);
	log = capture_end();

	assert_int_equal(s.n, 1);
	assert_int_equal(st.failed, 1);
	assert_int_equal(st.retried, 0);
	assert_int_equal(st.sent, 0);
	assert_int_equal(st.queue_items, 0);
	assert_int_equal(count_substr(log, "prowl: error: test: POST /ingest rejected with HTTP 400: bad profile:\\x0amissing name\n"), 1);
	assert_null(strstr(log, "very-secret-token"));
	free(log);
	srv_fini(&s);
}

static void test_max_retries(void **state)
{
	struct export_stats st;
	struct http_target t;
	struct srv s;
	char url[64], *log;

	(void)state;
	srv_init(&s, 502);
	srv_start(&s, 0);
	target_init(&t, url, sizeof(url), s.port);
	t.max_retries = 2;
	log = deliver_one(&t, "/x", "b", 1, &st);

	assert_int_equal(s.n, 3); /* first try + 2 retries */
	assert_int_equal(st.retried, 2);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.sent, 0);
	assert_non_null(strstr(log, "after 3 failed attempts"));
	free(log);
	srv_fini(&s);
}

static void test_refused_then_recovers(void **state)
{
	struct export_stats st;
	struct http_target t;
	struct sender *snd;
	struct srv s;
	uint16_t port = dead_port();
	char url[64], *log;

	(void)state;
	srv_init(&s, 200);
	target_init(&t, url, sizeof(url), port);
	capture_begin();
	assert_int_equal(sender_new("test", &t, &snd), 0);
	assert_int_equal(sender_enqueue(snd, make_req("/x", (const uint8_t *)"late", 4)), 0);
	sleep_ms(300);
	sender_get_stats(snd, &st);
	assert_true(st.retried >= 1);
	assert_int_equal(st.queue_items, 1);
	srv_start(&s, port);
	assert_int_equal(sender_flush(snd, 5000), 0);
	sender_get_stats(snd, &st);
	sender_free(snd);
	log = capture_end();

	assert_int_equal(s.n, 1);
	assert_memory_equal(s.recs[0].body, "late", 4);
	assert_int_equal(st.sent, 1);
	assert_int_equal(st.dropped + st.failed, 0);
	assert_int_equal(count_substr(log, "retrying with backoff"), 1);
	assert_non_null(strstr(log, "backend reachable again after"));
	free(log);
	srv_fini(&s);
}

static void test_buffer_cap_drops_oldest(void **state)
{
	struct export_stats st;
	struct http_target t;
	struct sender *snd;
	struct srv s;
	uint16_t port = dead_port();
	uint8_t body[1000];
	char url[64], *log;

	(void)state;
	srv_init(&s, 200);
	target_init(&t, url, sizeof(url), port);
	t.buffer_bytes = 3000;
	capture_begin();
	assert_int_equal(sender_new("test", &t, &snd), 0);
	for (int i = 0; i < 5; i++) {
		memset(body, 'A' + i, sizeof(body));
		assert_int_equal(sender_enqueue(snd, make_req("/x", body, sizeof(body))), 0);
	}
	/* Larger than the whole buffer: dropped at once. */
	{
		uint8_t *big = calloc(1, 4000);

		assert_int_equal(sender_enqueue(snd, make_req("/x", big, 4000)), 0);
		free(big);
	}
	sender_get_stats(snd, &st);
	assert_int_equal(st.dropped, 3);
	assert_int_equal(st.queue_items, 3);
	assert_int_equal(st.queue_bytes, 3000);
	/* Let an attempt on a dropped request that was already under way end first:
	 * one that reached the server would count as sent after all. */
	sleep_ms(200);
	srv_start(&s, port);
	assert_int_equal(sender_flush(snd, 5000), 0);
	sender_get_stats(snd, &st);
	sender_free(snd);
	log = capture_end();

	assert_int_equal(st.sent, 3);
	assert_int_equal(st.dropped, 3);
	assert_int_equal(s.n, 3);
	for (int i = 0; i < 3; i++) {
		memset(body, 'C' + i, sizeof(body));
		assert_int_equal(s.recs[i].len, sizeof(body));
		assert_memory_equal(s.recs[i].body, body, sizeof(body)); /* newest kept, in order */
	}
	assert_int_equal(count_substr(log, "send buffer full"), 1); /* one warning per burst */
	assert_non_null(strstr(log, "3 queued profiles were dropped"));
	free(log);
	srv_fini(&s);
}

/* A server that takes requests and holds every answer for 10 s; t points at it. */
static void start_hung(struct srv *s, struct http_target *t, char *url, size_t size)
{
	srv_init(s, 200);
	s->hang_ms = 10000;
	srv_start(s, 0);
	target_init(t, url, size, s->port);
	t->timeout_ms = 20000;
}

static void test_flush_bounded_when_hung(void **state)
{
	struct http_target t;
	struct sender *snd;
	struct srv s;
	char url[64], *log;
	int64_t t0, dt;

	(void)state;
	start_hung(&s, &t, url, sizeof(url));
	capture_begin();
	assert_int_equal(sender_new("test", &t, &snd), 0);
	assert_int_equal(sender_enqueue(snd, make_req("/x", (const uint8_t *)"b", 1)), 0);
	t0 = (int64_t)clock_mono_ns();
	assert_int_equal(sender_flush(snd, 500), 1);
	dt = (int64_t)clock_mono_ns() - t0;
	assert_true(dt >= 450000000 && dt < 1500000000);
	t0 = (int64_t)clock_mono_ns();
	sender_free(snd); /* aborts the hung transfer */
	dt = (int64_t)clock_mono_ns() - t0;
	log = capture_end();
	assert_true(dt < 1500000000);
	assert_non_null(strstr(log, "1 queued profiles (1 bytes) not delivered before shutdown"));
	free(log);
	srv_fini(&s);
}

/* A 400 with a 200 MB body: the transfer stops after 64 KiB, the rejection is
 * still a rejection, and the log quotes the first 256 bytes, escaped. */
static void test_huge_error_body(void **state)
{
	struct export_stats st;
	struct http_target t;
	struct srv s;
	char url[64], *log, want[300];

	(void)state;
	srv_init(&s, 400);
	s.big_reply = 200ull << 20;
	srv_start(&s, 0);
	target_init(&t, url, sizeof(url), s.port);
	log = deliver_one(&t, "/ingest", "b", 1, &st);
	srv_halt(&s);

	assert_int_equal(s.n, 1);
	assert_int_equal(st.failed, 1);
	assert_int_equal(st.retried, 0);
	/* 64 KiB, plus what the loopback socket buffers held when the client hung up. */
	assert_true(s.big_sent < (32u << 20));
	strcpy(want, "B\\x01\\\\");
	memset(want + strlen(want), 'x', 253);
	strcpy(want + 7 + 253, "...\n");
	assert_int_equal(count_substr(log, "rejected with HTTP 400: "), 1);
	assert_non_null(strstr(log, want));
	free(log);
	srv_fini(&s);
}

/* sender_stop hands back, oldest first, what a hung backend did not take (the
 * request under way first), and nothing is counted as dropped. */
static void test_stop_hands_back(void **state)
{
	struct sender_request **reqs;
	struct export_stats st;
	struct http_target t;
	struct sender *snd;
	struct srv s;
	char url[64], *log;
	size_t n;

	(void)state;
	start_hung(&s, &t, url, sizeof(url));
	capture_begin();
	assert_int_equal(sender_new("test", &t, &snd), 0);
	assert_int_equal(sender_enqueue(snd, make_req("/a", (const uint8_t *)"1", 1)), 0);
	assert_int_equal(sender_enqueue(snd, make_req("/b", (const uint8_t *)"22", 2)), 0);
	assert_int_equal(sender_enqueue(snd, make_req("/c", (const uint8_t *)"333", 3)), 0);
	assert_int_equal(sender_flush(snd, 300), 3);
	assert_int_equal(sender_stop(snd, &reqs, &n), 0);
	sender_get_stats(snd, &st);
	sender_free(snd);
	log = capture_end();

	assert_int_equal(n, 3);
	assert_string_equal(reqs[0]->path, "/a");
	assert_string_equal(reqs[1]->path, "/b");
	assert_string_equal(reqs[2]->path, "/c");
	assert_true(reqs[0]->queued_unix_ns > 0 && reqs[0]->queued_unix_ns <= reqs[2]->queued_unix_ns);
	for (size_t i = 0; i < n; i++)
		sender_request_free(reqs[i]);
	free(reqs);
	assert_int_equal(st.dropped + st.sent + st.failed, 0);
	assert_int_equal(st.queue_items, 0);
	assert_null(strstr(log, "not delivered"));
	free(log);
	srv_fini(&s);
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = calloc(1, 65536);
	size_t n;

	assert_non_null(f);
	assert_non_null(buf);
	n = fread(buf, 1, 65535, f);
	assert_true(n > 0);
	fclose(f);
	return buf;
}

/* Sends one request over t; returns the stats after the queue drained. */
static void send_one(const struct http_target *t, struct export_stats *st)
{
	struct sender *snd;

	assert_int_equal(sender_new("tls", t, &snd), 0);
	assert_int_equal(sender_enqueue(snd, make_req("/x", (const uint8_t *)"tls", 3)), 0);
	assert_int_equal(sender_flush(snd, 5000), 0);
	sender_get_stats(snd, st);
	sender_free(snd);
}

/* TLS: verification on by default, ca_file, client cert/key, insecure_skip_verify.
 * Needs the openssl command to make a throwaway certificate; skipped without it. */
static void test_tls(void **state)
{
	char dir[] = "/tmp/prowl-test-tls-XXXXXX", cmd[512], cert[64], key[64], url[64], *log;
	struct export_stats st;
	struct http_target t;
	struct srv s;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
		 "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout %s -out %s >/dev/null 2>&1",
		 key, cert);
	if (system(cmd) != 0 || !MHD_is_feature_supported(MHD_FEATURE_TLS)) {
		rmdir(dir);
		skip();
	}
	srv_init(&s, 200);
	s.tls_key = read_text(key);
	s.tls_cert = read_text(cert);
	srv_start(&s, 0);
	memset(&t, 0, sizeof(t));
	snprintf(url, sizeof(url), "https://127.0.0.1:%u", s.port);
	t.url = url;
	t.timeout_ms = 5000;

	capture_begin();
	send_one(&t, &st); /* self-signed: refused by default */
	log = capture_end();
	assert_int_equal(st.failed, 1);
	assert_int_equal(st.sent + st.retried, 0);
	assert_non_null(strstr(log, "prowl: error: tls: POST /x failed: "));
	free(log);

	t.ca_file = cert;
	t.cert_file = cert; /* a client certificate the server does not ask for */
	t.key_file = key;
	send_one(&t, &st);
	assert_int_equal(st.sent, 1);

	t.ca_file = NULL;
	t.cert_file = t.key_file = NULL;
	t.insecure_skip_verify = true;
	send_one(&t, &st);
	assert_int_equal(st.sent, 1);

	t.cert_file = "/nonexistent/cert.pem";
	capture_begin();
	send_one(&t, &st); /* a configuration error: not retried */
	log = capture_end();
	assert_int_equal(st.failed, 1);
	assert_int_equal(st.retried, 0);
	free(log);

	assert_int_equal(s.n, 2);
	free(s.tls_key);
	free(s.tls_cert);
	srv_fini(&s);
	unlink(cert);
	unlink(key);
	rmdir(dir);
}

static void test_bad_args(void **state)
{
	struct http_target t = { 0 };
	struct sender *snd;

	(void)state;
	assert_int_equal(sender_new("test", &t, &snd), -EINVAL);
	t.url = "http://127.0.0.1:1";
	t.tenant = "a\r\nX-Evil: 1";
	assert_int_equal(sender_new("test", &t, &snd), -EINVAL);
	t.tenant = NULL;
	assert_int_equal(sender_new("test", &t, &snd), 0);
	assert_int_equal(sender_enqueue(snd, NULL), -EINVAL);
	assert_int_equal(sender_flush(snd, 0), 0);
	sender_free(snd);
	sender_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_delivery_headers),
		cmocka_unit_test(test_retry_503),
		cmocka_unit_test(test_retry_by_status),
		cmocka_unit_test(test_retry_after_429),
		cmocka_unit_test(test_no_retry_400),
		cmocka_unit_test(test_max_retries),
		cmocka_unit_test(test_refused_then_recovers),
		cmocka_unit_test(test_buffer_cap_drops_oldest),
		cmocka_unit_test(test_flush_bounded_when_hung),
		cmocka_unit_test(test_huge_error_body),
		cmocka_unit_test(test_stop_hands_back),
		cmocka_unit_test(test_tls),
		cmocka_unit_test(test_bad_args),
	};

	/* Small backoff keeps the retry tests fast (Retry-After is still honoured). */
	setenv("PROWL_TEST_BACKOFF_MS", "20", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
