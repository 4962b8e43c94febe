/* metrics.c: serves /metrics and /healthz with libmicrohttpd; the agent supplies
 * the renderers, this file only does HTTP and address parsing. */
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"
#include "log.h"
#include "parse.h"

/* Idle connections are closed after CONN_TIMEOUT_S, so that clients that connect
 * and send nothing cannot hold the endpoint; CONN_LIMIT connections at once, at most
 * CONN_PER_IP of them from one address, leave room for the liveness probe and the
 * scraper next to a crowd of idle ones (fds and 32 KiB of buffer each). */
#define CONN_TIMEOUT_S   5u
#define CONN_LIMIT       256u
#define CONN_PER_IP      128u
/* libmicrohttpd's own messages: at most LOG_BURST a minute (a client can cause one
 * per connection), then one line that says how many were left out. */
#define LOG_BURST        10u
#define LOG_WINDOW_NS    (60ull * 1000000000ull)

struct metrics_server {
	struct MHD_Daemon *d;
	metrics_render_fn render;
	metrics_health_fn health;
	void *ctx;
	unsigned int port;
	pthread_mutex_t log_lock;
	uint64_t log_window_start;
	unsigned int log_count, log_skipped;
};

/* MHD_OPTION_EXTERNAL_LOGGER: libmicrohttpd's messages as prowl's own lines, in
 * the configured log format, rate-limited. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct metrics_server *m = cls;
	uint64_t now = clock_mono_ns();
	unsigned int skipped = 0;
	char buf[512];
	size_t n;

	pthread_mutex_lock(&m->log_lock);
	if (now - m->log_window_start >= LOG_WINDOW_NS) {
		skipped = m->log_skipped;
		m->log_window_start = now;
		m->log_count = m->log_skipped = 0;
	}
	if (m->log_count >= LOG_BURST) {
		m->log_skipped++;
		pthread_mutex_unlock(&m->log_lock);
		return;
	}
	m->log_count++;
	pthread_mutex_unlock(&m->log_lock);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		buf[--n] = 0;
	if (skipped)
		log_warn("metrics endpoint: %u more messages in the last minute were not logged", skipped);
	log_warn("metrics endpoint: %s", buf);
}

void metrics_emit(FILE *f, const char *name, const char *type, const char *help, const char *labels, double v)
{
	if (help)
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
	fprintf(f, "%s%s%s%s %.17g\n", name, labels ? "{" : "", labels ? labels : "", labels ? "}" : "", v);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status, const char *type, char *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ret;

	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", type);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct metrics_server *m = cls;
	char *body = NULL;
	size_t len = 0;
	FILE *f;
	bool ok = true;

	(void)version;
	(void)upload;
	(void)upload_size;
	(void)con_cls;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", strdup("method not allowed\n"), 19);
	f = open_memstream(&body, &len);
	if (!f)
		return MHD_NO;
	if (strcmp(url, "/metrics") == 0) {
		m->render(m->ctx, f);
	} else if (strcmp(url, "/healthz") == 0) {
		ok = m->health ? m->health(m->ctx, f) : true;
		fputs(ok ? "ok\n" : "\n", f);
	} else {
		fputs("not found: try /metrics or /healthz\n", f);
		fclose(f);
		return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", body, len);
	}
	fclose(f);
	return reply(c, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
		     strcmp(url, "/metrics") == 0 ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain", body, len);
}

/* Parses "HOST:PORT", "[V6]:PORT" or ":PORT" into a socket address. */
static int parse_address(const char *addr, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[128];
	const char *colon;
	uint64_t port;

	if (addr[0] == '[') {
		const char *end = strchr(addr, ']');

		if (!end || end[1] != ':' || (size_t)(end - addr - 1) >= sizeof(host))
			return -EINVAL;
		memcpy(host, addr + 1, end - addr - 1);
		host[end - addr - 1] = 0;
		colon = end + 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon || (size_t)(colon - addr) >= sizeof(host))
			return -EINVAL;
		memcpy(host, addr, colon - addr);
		host[colon - addr] = 0;
	}
	if (parse_u64_range(colon + 1, 0, 65535, &port) < 0)
		return -EINVAL;
	memset(ss, 0, sizeof(*ss));
	if (!host[0] || strchr(host, ':') == NULL) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		if (!host[0])
			in->sin_addr.s_addr = htonl(INADDR_ANY);
		else if (strcmp(host, "localhost") == 0)
			in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		else if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
			return -EINVAL;
		*len = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
			return -EINVAL;
		*len = sizeof(*in6);
	}
	return 0;
}

int metrics_server_start(const char *address, metrics_render_fn render, metrics_health_fn health, void *ctx,
			 struct metrics_server **ret)
{
	struct metrics_server *m;
	struct sockaddr_storage ss;
	socklen_t len;
	const union MHD_DaemonInfo *info;
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;

	if (parse_address(address, &ss, &len) < 0) {
		log_error("invalid metrics address '%s': use HOST:PORT, e.g. 127.0.0.1:9464", address);
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->render = render;
	m->health = health;
	m->ctx = ctx;
	pthread_mutex_init(&m->log_lock, NULL);
	m->log_window_start = clock_mono_ns();
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* The logger first: libmicrohttpd uses its own for options before it. */
	m->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, m, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, m,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT, CONN_LIMIT,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, CONN_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT,
				CONN_TIMEOUT_S, MHD_OPTION_END);
	if (!m->d) {
		int e = errno ? errno : EADDRINUSE;

		pthread_mutex_destroy(&m->log_lock);
		free(m);
		log_error("cannot serve metrics on %s: %s: choose another metrics address or disable metrics",
			  address, strerror(e));
		return -e;
	}
	info = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_BIND_PORT);
	m->port = info ? info->port : 0;
	*ret = m;
	return 0;
}

unsigned int metrics_server_port(const struct metrics_server *m) { return m->port; }

void metrics_server_stop(struct metrics_server *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->d);
	pthread_mutex_destroy(&m->log_lock);
	free(m);
}
