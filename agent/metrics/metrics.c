/* metrics.c: serves /metrics and /healthz with libmicrohttpd on a socket from
 * netaddr.c; the agent supplies the renderers, this file only does HTTP. */
#include "metrics.h"

#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "netaddr.h"

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
#define LOG_WINDOW_NS    (60ull * NSEC_PER_SEC)
#define LISTEN_BACKLOG   64

struct metrics_server {
	struct MHD_Daemon *d;
	metrics_render_fn render;
	metrics_health_fn health;
	void *ctx;
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

int metrics_server_start(const char *address, metrics_render_fn render, metrics_health_fn health, void *ctx,
			 struct metrics_server **ret)
{
	struct metrics_server *m;
	struct netaddr na;
	const char *why;
	int fd;

	/* The parser the configuration check uses: what --check accepts starts here. */
	if (netaddr_parse(address, &na, &why) < 0) {
		log_error("invalid metrics address '%s': %s", address, why);
		return -EINVAL;
	}
	fd = netaddr_listen(&na, LISTEN_BACKLOG);
	if (fd < 0) {
		log_error("cannot serve metrics on %s: %s: choose another metrics address or disable metrics", address,
			  strerror(-fd));
		return fd;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		close(fd);
		return -ENOMEM;
	}
	m->render = render;
	m->health = health;
	m->ctx = ctx;
	pthread_mutex_init(&m->log_lock, NULL);
	m->log_window_start = clock_mono_ns();
	/* The logger first: libmicrohttpd uses its own for options before it. It owns fd
	 * from here on, and closes it on failure too. */
	m->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG, 0, NULL, NULL,
				handle, m, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, m, MHD_OPTION_LISTEN_SOCKET, fd,
				MHD_OPTION_CONNECTION_LIMIT, CONN_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT, CONN_PER_IP,
				MHD_OPTION_CONNECTION_TIMEOUT, CONN_TIMEOUT_S, MHD_OPTION_END);
	if (!m->d) {
		int e = errno ? errno : ENOMEM;

		pthread_mutex_destroy(&m->log_lock);
		free(m);
		log_error("cannot serve metrics on %s: %s: choose another metrics address or disable metrics",
			  address, strerror(e));
		return -e;
	}
	*ret = m;
	return 0;
}

void metrics_server_stop(struct metrics_server *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->d);
	pthread_mutex_destroy(&m->log_lock);
	free(m);
}
