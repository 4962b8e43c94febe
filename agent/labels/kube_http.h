/* kube_http.h: one GET to the Kubernetes API server over libcurl: the bearer token
 * re-read when its file changes, TLS verified against the CA file, bounded bodies, streams split into lines. */
#ifndef PROWL_KUBE_HTTP_H
#define PROWL_KUBE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;
struct kube_http;

struct kube_http_opts {
	const char *api_url;    /* no trailing '/' */
	const char *token_file; /* NULL: no token */
	const char *ca_file;    /* NULL or unreadable: the system's CAs */
};

/* One request and what came of it. */
struct kube_get {
	size_t max;       /* bytes of the body, or with line() of one line */
	long timeout_ms;  /* the whole transfer */
	/* Streams: called for every line of a 200 answer; false ends the transfer. */
	bool (*line)(void *ctx, const char *line, size_t len);
	/* Called about once a second with the answer's status (0 before it):
	 * true aborts the transfer. */
	bool (*tick)(void *ctx, long status);
	void *ctx;
	/* Results. */
	char *body;       /* without line(): the 200 answer's body, NUL-terminated (caller frees) */
	size_t len;
	uint64_t bytes;   /* read off the wire */
	char why[256];    /* what went wrong */
};

int kube_http_new(const struct kube_http_opts *o, struct kube_http **ret);
void kube_http_free(struct kube_http *h); /* accepts NULL */

/* GET path (starting with '/', its query percent-encoded: url_escape) on the
 * API server, joined to api_url by url_join. Returns 0 after a 200 answer read to
 * its end, 1 when line() or tick() ended it, -ESTALE for 410 Gone, -EIO for
 * anything else (g->why says what, with the API server's message), -ENOMEM. */
int kube_http_get(struct kube_http *h, const char *path, struct kube_get *g);

/* Parses one JSON document of len bytes: strict, at most KUBE_JSON_DEPTH deep,
 * nothing but whitespace after it. NULL when it is not that. */
struct json_object *kube_json_parse(const char *s, size_t len);
/* o.a (or o.a.b) when it is a string, else NULL. */
const char *kube_json_str(struct json_object *o, const char *a, const char *b);

#endif
