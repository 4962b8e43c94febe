/* httpsrv.h: a recording HTTP server on libmicrohttpd for the export unit tests: it
 * keeps each request (method, headers, body) and answers with scripted faults. */
#ifndef PROWL_TEST_HTTPSRV_H
#define PROWL_TEST_HTTPSRV_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

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

static inline void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct conn_state *cs = calloc(1, sizeof(*cs));

	(void)cls;
	(void)c;
	if (cs)
		cs->uri = strdup(uri);
	return cs;
}

static inline void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
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

static inline void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
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

static inline enum MHD_Result on_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
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

static inline ssize_t big_body(void *cls, uint64_t pos, char *buf, size_t max)
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

static inline enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
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
static inline void srv_start(struct srv *s, uint16_t port)
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

static inline void srv_init(struct srv *s, int status)
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

static inline void srv_halt(struct srv *s)
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

static inline void srv_fini(struct srv *s)
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

static inline int srv_count(struct srv *s)
{
	int n;

	pthread_mutex_lock(&s->lock);
	n = s->n;
	pthread_mutex_unlock(&s->lock);
	return n;
}

static inline const char *hdr(const struct rec *r, const char *name)
{
	for (int i = 0; i < r->nh; i++)
		if (strcasecmp(r->hname[i], name) == 0)
			return r->hvalue[i];
	return NULL;
}

/* A port nothing listens on: bind an ephemeral one, then close it. */
static inline uint16_t dead_port(void)
{
	struct srv s;
	uint16_t port;

	srv_init(&s, 200);
	srv_start(&s, 0);
	port = s.port;
	srv_fini(&s);
	return port;
}

static inline void target_init(struct http_target *t, char *url, size_t urlsz, uint16_t port)
{
	memset(t, 0, sizeof(*t));
	snprintf(url, urlsz, "http://127.0.0.1:%u", port);
	t->url = url;
	t->timeout_ms = 5000;
}

static inline struct sender_request *make_req(const char *path, const uint8_t *body, size_t len)
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

static inline void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}


#endif
