/* test_sender.c: unit tests of the HTTP export path: the sender (delivery, retries,
 * buffer cap, bounded flush) and the Pyroscope and Parca exporters, against libmicrohttpd. */
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

#define MAX_RECS    64
#define MAX_HEADERS 32

/* ---- a recording HTTP server ---- */

struct rec {
	char *method, *uri; /* uri raw, with the query string */
	char *hname[MAX_HEADERS], *hvalue[MAX_HEADERS];
	int nh;
	uint8_t *body;
	size_t len;
	int status; /* what the server answered */
	int64_t t_ns;
};

struct conn_state {
	char *uri;
	bool started;
	uint8_t *buf;
	size_t len, cap;
};

struct srv {
	struct MHD_Daemon *d;
	uint16_t port;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct rec recs[MAX_RECS];
	int n;
	int status;      /* answer once the first fail_n are done */
	int fail_n;      /* the first fail_n requests get fail_status */
	int fail_status;
	int retry_after; /* seconds, sent with fail_status when > 0 */
	const char *reply;
	size_t reply_len;       /* when > 0: reply is binary, this long */
	const char *reply_hdr[2]; /* an extra header of every answer: name, value */
	uint64_t big_reply; /* answer with this many bytes ('x') instead of reply */
	uint64_t big_sent;  /* ... of which the client took this many */
	int hang_ms;     /* hold each answer this long (until stopped) */
	char *tls_key, *tls_cert; /* PEM: serve HTTPS */
	bool stopping;
	int connections;
};

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct conn_state *cs = calloc(1, sizeof(*cs));

	(void)cls;
	(void)c;
	if (cs)
		cs->uri = strdup(uri);
	return cs;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct conn_state *cs = *con_cls;

	(void)cls;
	(void)c;
	(void)toe;
	if (!cs)
		return;
	free(cs->uri);
	free(cs->buf);
	free(cs);
	*con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct srv *s = cls;

	(void)c;
	(void)socket_context;
	if (toe != MHD_CONNECTION_NOTIFY_STARTED)
		return;
	pthread_mutex_lock(&s->lock);
	s->connections++;
	pthread_mutex_unlock(&s->lock);
}

static enum MHD_Result on_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct rec *r = cls;

	(void)kind;
	if (r->nh < MAX_HEADERS) {
		r->hname[r->nh] = strdup(key);
		r->hvalue[r->nh] = strdup(value ? value : "");
		r->nh++;
	}
	return MHD_YES;
}

static ssize_t big_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct srv *s = cls;
	size_t n = s->big_reply - pos < max ? (size_t)(s->big_reply - pos) : max;

	memset(buf, 'x', n);
	/* "B", a control character and a backslash first: the log escapes them. */
	for (uint64_t p = pos; p < 3 && p < pos + n; p++)
		buf[p - pos] = "B\x01\\"[p];
	pthread_mutex_lock(&s->lock);
	s->big_sent = pos + n;
	pthread_mutex_unlock(&s->lock);
	return (ssize_t)n;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	struct srv *s = cls;
	struct conn_state *cs = *con_cls;
	struct MHD_Response *resp;
	struct rec *r = NULL;
	enum MHD_Result ret;
	int status;

	(void)url;
	(void)version;
	if (!cs)
		return MHD_NO;
	if (!cs->started) {
		cs->started = true;
		return MHD_YES;
	}
	if (*upload_data_size) {
		if (cs->len + *upload_data_size > cs->cap) {
			cs->cap = (cs->len + *upload_data_size) * 2;
			cs->buf = realloc(cs->buf, cs->cap);
			if (!cs->buf)
				return MHD_NO;
		}
		memcpy(cs->buf + cs->len, upload_data, *upload_data_size);
		cs->len += *upload_data_size;
		*upload_data_size = 0;
		return MHD_YES;
	}

	pthread_mutex_lock(&s->lock);
	status = s->n < s->fail_n ? s->fail_status : s->status;
	if (s->n < MAX_RECS) {
		r = &s->recs[s->n++];
		r->method = strdup(method);
		r->uri = cs->uri;
		cs->uri = NULL;
		r->body = cs->buf;
		r->len = cs->len;
		cs->buf = NULL;
		r->status = status;
		r->t_ns = (int64_t)clock_mono_ns();
		MHD_get_connection_values(c, MHD_HEADER_KIND, on_header, r);
	}
	if (s->hang_ms) {
		int64_t until = (int64_t)clock_mono_ns() + (int64_t)s->hang_ms * 1000000;
		struct timespec ts = { .tv_sec = until / 1000000000, .tv_nsec = until % 1000000000 };

		while (!s->stopping)
			if (pthread_cond_timedwait(&s->cond, &s->lock, &ts) == ETIMEDOUT)
				break;
	}
	pthread_mutex_unlock(&s->lock);

	if (s->big_reply)
		resp = MHD_create_response_from_callback(s->big_reply, 65536, big_body, s, NULL);
	else
		resp = MHD_create_response_from_buffer(s->reply_len ? s->reply_len : strlen(s->reply ? s->reply : ""),
						       (void *)(s->reply ? s->reply : ""), MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return MHD_NO;
	if (s->reply_hdr[0])
		MHD_add_response_header(resp, s->reply_hdr[0], s->reply_hdr[1]);
	if (status == s->fail_status && s->retry_after > 0) {
		char v[16];

		snprintf(v, sizeof(v), "%d", s->retry_after);
		MHD_add_response_header(resp, "Retry-After", v);
	}
	ret = MHD_queue_response(c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* Starts s on 127.0.0.1:port (0 = ephemeral). Keeps the recorded requests. */
static void srv_start(struct srv *s, uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	const union MHD_DaemonInfo *info;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s->stopping = false;
	if (s->tls_key)
		s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_TLS,
					port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
					MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL, MHD_OPTION_NOTIFY_COMPLETED,
					on_completed, NULL, MHD_OPTION_HTTPS_MEM_KEY, s->tls_key,
					MHD_OPTION_HTTPS_MEM_CERT, s->tls_cert, MHD_OPTION_END);
	else
		s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, port, NULL,
					NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
					MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL, MHD_OPTION_NOTIFY_COMPLETED,
					on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
					MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
	assert_non_null(s->d);
	info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	assert_non_null(info);
	s->port = info->port;
}

static void srv_init(struct srv *s, int status)
{
	pthread_condattr_t ca;

	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	s->status = status;
	s->fail_status = -1;
}

static void srv_halt(struct srv *s)
{
	if (!s->d)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	MHD_stop_daemon(s->d);
	s->d = NULL;
}

static void srv_fini(struct srv *s)
{
	srv_halt(s);
	for (int i = 0; i < s->n; i++) {
		struct rec *r = &s->recs[i];

		free(r->method);
		free(r->uri);
		free(r->body);
		for (int k = 0; k < r->nh; k++) {
			free(r->hname[k]);
			free(r->hvalue[k]);
		}
	}
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
}

static int srv_count(struct srv *s)
{
	int n;

	pthread_mutex_lock(&s->lock);
	n = s->n;
	pthread_mutex_unlock(&s->lock);
	return n;
}

static const char *hdr(const struct rec *r, const char *name)
{
	for (int i = 0; i < r->nh; i++)
		if (strcasecmp(r->hname[i], name) == 0)
			return r->hvalue[i];
	return NULL;
}

/* A port nothing listens on: bind an ephemeral one, then close it. */
static uint16_t dead_port(void)
{
	struct srv s;
	uint16_t port;

	srv_init(&s, 200);
	srv_start(&s, 0);
	port = s.port;
	srv_fini(&s);
	return port;
}

static void target_init(struct http_target *t, char *url, size_t urlsz, uint16_t port)
{
	memset(t, 0, sizeof(*t));
	snprintf(url, urlsz, "http://127.0.0.1:%u", port);
	t->url = url;
	t->timeout_ms = 5000;
}

static struct sender_request *make_req(const char *path, const uint8_t *body, size_t len)
{
	struct sender_request *req = calloc(1, sizeof(*req));

	assert_non_null(req);
	req->path = strdup(path);
	req->content_type = strdup("application/octet-stream");
	req->body = malloc(len ? len : 1);
	assert_non_null(req->path);
	assert_non_null(req->body);
	memcpy(req->body, body, len);
	req->len = len;
	return req;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

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
