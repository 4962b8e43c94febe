/* kube_http.c: GET requests to the Kubernetes API server (libcurl): bearer token
 * from a file that rotates, verified TLS, bounded answers, watch streams cut into lines. */
#include "kube_http.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "curlopt.h"
#include "kube_pod.h"
#include "log.h"
#include "url.h"

#define TOKEN_MAX          16384
#define ERROR_BODY_MAX     4096   /* bytes of an error answer kept for the message */
#define CONNECT_TIMEOUT_MS 10000

struct kube_http {
	char *api_url, *token_file, *ca_file;
	CURL *curl;
	char errbuf[CURL_ERROR_SIZE];
	char *token;
	struct stat token_st;
	bool token_warned;
	/* The transfer in flight. */
	struct kube_get *g;
	char *buf;  /* the body, or the partial line */
	size_t len, cap;
	char err[ERROR_BODY_MAX + 1];
	size_t errlen;
	bool ended; /* line() said stop */
};

static void set_why(struct kube_get *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_why(struct kube_get *g, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g->why, sizeof(g->why), fmt, ap);
	va_end(ap);
}

static void free_token(struct kube_http *h)
{
	if (h->token) {
		explicit_bzero(h->token, strlen(h->token));
		free(h->token);
	}
	h->token = NULL;
}

int kube_http_new(const struct kube_http_opts *o, struct kube_http **ret)
{
	struct kube_http *h = calloc(1, sizeof(*h));

	if (!h || curl_init() < 0) {
		free(h);
		return -ENOMEM;
	}
	h->api_url = strdup(o->api_url);
	h->token_file = o->token_file ? strdup(o->token_file) : NULL;
	h->ca_file = o->ca_file ? strdup(o->ca_file) : NULL;
	h->curl = curl_easy_init();
	if (!h->api_url || (o->token_file && !h->token_file) || (o->ca_file && !h->ca_file) || !h->curl) {
		kube_http_free(h);
		return -ENOMEM;
	}
	*ret = h;
	return 0;
}

void kube_http_free(struct kube_http *h)
{
	if (!h)
		return;
	if (h->curl)
		curl_easy_cleanup(h->curl);
	free_token(h);
	free(h->buf);
	free(h->api_url);
	free(h->token_file);
	free(h->ca_file);
	free(h);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Reads the token file again when it changed: projected service account tokens
 * rotate (the kubelet swaps a symlink, so the inode changes). */
static void load_token(struct kube_http *h)
{
	char buf[TOKEN_MAX + 1];
	struct stat st;
	size_t len;
	FILE *f;

	if (!h->token_file)
		return;
	if (stat(h->token_file, &st) < 0 || !(f = fopen(h->token_file, "re"))) {
		if (!h->token_warned)
			log_warn("cannot read kubernetes.token_file %s: %s; asking the API server without a token",
				 h->token_file, strerror(errno));
		h->token_warned = true;
		free_token(h);
		memset(&h->token_st, 0, sizeof(h->token_st));
		return;
	}
	if (h->token && same_file(&st, &h->token_st)) {
		fclose(f);
		return;
	}
	len = fread(buf, 1, TOKEN_MAX, f);
	fclose(f);
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
		len--;
	buf[len] = 0;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] <= 0x20 || buf[i] == 0x7f) {
			log_warn("kubernetes.token_file %s holds more than one word; not sending it", h->token_file);
			len = 0;
			break;
		}
	free_token(h);
	h->token = len ? strdup(buf) : NULL;
	explicit_bzero(buf, sizeof(buf));
	h->token_st = st;
	h->token_warned = false;
	log_debug("read the Kubernetes token from %s", h->token_file);
}

static bool buf_add(struct kube_http *h, const char *p, size_t n)
{
	if (h->len + n + 1 > h->g->max)
		return false;
	if (h->len + n + 1 > h->cap) {
		size_t cap = h->cap ? h->cap : 65536;
		char *nb;

		while (cap < h->len + n + 1)
			cap *= 2;
		nb = realloc(h->buf, cap);
		if (!nb)
			return false;
		h->buf = nb;
		h->cap = cap;
	}
	memcpy(h->buf + h->len, p, n);
	h->len += n;
	h->buf[h->len] = 0;
	return true;
}

static long status_of(struct kube_http *h)
{
	long code = 0;

	curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &code);
	return code;
}

/* Feeds a 200 stream's bytes to line(), one line at a time. */
static size_t stream(struct kube_http *h, const char *p, size_t n)
{
	struct kube_get *g = h->g;

	for (size_t i = 0; i < n;) {
		const char *nl = memchr(p + i, '\n', n - i);
		size_t take = nl ? (size_t)(nl - (p + i)) : n - i;

		if (!buf_add(h, p + i, take)) {
			set_why(g, "a watch event is larger than %zu MiB", g->max >> 20);
			return 0;
		}
		i += take;
		if (!nl)
			break;
		i++;
		if (h->len && !g->line(g->ctx, h->buf, h->len)) {
			h->ended = true;
			return 0;
		}
		h->len = 0;
	}
	return n;
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *ctx)
{
	struct kube_http *h = ctx;
	size_t n = size * nmemb;

	h->g->bytes += n;
	if (status_of(h) != 200) {
		/* An error answer: its start names the problem. */
		size_t room = ERROR_BODY_MAX - h->errlen;

		if (n < room)
			room = n;
		memcpy(h->err + h->errlen, p, room);
		h->errlen += room;
		h->err[h->errlen] = 0;
		return n;
	}
	if (h->g->line)
		return stream(h, p, n);
	if (buf_add(h, p, n))
		return n;
	set_why(h->g, "the answer is larger than %zu MiB", h->g->max >> 20);
	return 0;
}

static int on_progress(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct kube_http *h = ctx;

	(void)dt, (void)dn, (void)ut, (void)un;
	return h->g->tick && h->g->tick(h->g->ctx, status_of(h));
}

/* A fresh handle per request: libcurl 7.88 keeps the last header of a transfer in the
 * handle, even across curl_easy_reset, and an answer that opens with a folded line
 * reads it after it was freed (found by fuzz_http). Lists and watches are minutes
 * apart, so the lost connection reuse costs nothing. */
static int setup(struct kube_http *h, const char *url, struct curl_slist *hdrs, long timeout_ms)
{
	CURL *c = curl_easy_init();

	if (!c)
		return -ENOMEM;
	if (h->curl)
		curl_easy_cleanup(h->curl);
	h->curl = c;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_set_common(c, &(struct curl_io){
		.timeout_ms = timeout_ms, .connect_ms = CONNECT_TIMEOUT_MS, .errbuf = h->errbuf, .write = on_data,
		.progress = on_progress, .ctx = h, .verify = true,
		.ca_file = h->ca_file && access(h->ca_file, R_OK) == 0 ? h->ca_file : NULL,
	});
	curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
	return 0;
}

/* The message of a failed answer: its status, the Status object's message. */
static int answer_error(struct kube_http *h, struct kube_get *g, long code)
{
	struct json_object *st = h->errlen ? kube_json_parse(h->err, h->errlen) : NULL;
	const char *msg = st ? kube_json_str(st, "message", NULL) : NULL;

	set_why(g, "HTTP %ld%s%.160s%s", code, msg ? ": " : "", msg ? msg : "",
		code == 401 || code == 403 ? " (check kubernetes.token_file and that the ClusterRole grants pods "
					     "get/list/watch)" : "");
	json_object_put(st);
	if (code == 401)
		memset(&h->token_st, 0, sizeof(h->token_st)); /* read the token again next time */
	return code == 410 ? -ESTALE : -EIO;
}

int kube_http_get(struct kube_http *h, const char *path, struct kube_get *g)
{
	struct curl_slist *hdrs = NULL, *t;
	char *url = NULL, *auth = NULL;
	CURLcode rc;
	long code;
	int r = 0;

	load_token(h);
	g->body = NULL;
	g->len = 0;
	g->why[0] = 0;
	h->g = g;
	h->len = 0;
	if (h->buf)
		h->buf[0] = 0; /* an empty answer is "", not what the last transfer left */
	h->errlen = 0;
	h->ended = false;
	h->errbuf[0] = 0;
	r = url_join(h->api_url, path, &url);
	if (r < 0) {
		set_why(g, "cannot make a URL of %s and %s", h->api_url, path);
		return r;
	}
	if (h->token && asprintf(&auth, "Authorization: Bearer %s", h->token) < 0)
		auth = NULL;
	hdrs = curl_slist_append(NULL, "Accept: application/json");
	if (hdrs && auth && (t = curl_slist_append(hdrs, auth)))
		hdrs = t;
	if (!hdrs || setup(h, url, hdrs, g->timeout_ms) < 0) {
		rc = CURLE_OUT_OF_MEMORY;
		code = 0;
	} else {
		rc = curl_easy_perform(h->curl);
		code = status_of(h);
	}
	if (auth) {
		explicit_bzero(auth, strlen(auth));
		free(auth);
	}
	curl_slist_free_all(hdrs);
	free(url);
	if (rc == CURLE_ABORTED_BY_CALLBACK || (rc == CURLE_WRITE_ERROR && h->ended))
		r = 1;
	else if (rc != CURLE_OK && (code != 200 || !g->why[0]))
		set_why(g, "%s", h->errbuf[0] ? h->errbuf : curl_easy_strerror(rc));
	if (rc != CURLE_OK && r == 0)
		r = -EIO;
	else if (r == 0 && code != 200)
		r = answer_error(h, g, code);
	if (r == 0 && !g->line) {
		g->body = h->buf ? h->buf : strdup("");
		g->len = h->len;
		h->buf = NULL;
		h->cap = h->len = 0;
		if (!g->body)
			r = -ENOMEM;
	}
	/* Give back a big buffer: lists are rare. */
	if (h->cap > (1u << 20)) {
		free(h->buf);
		h->buf = NULL;
		h->cap = h->len = 0;
	}
	h->g = NULL;
	return r;
}

struct json_object *kube_json_parse(const char *s, size_t len)
{
	struct json_tokener *tok = json_tokener_new_ex(KUBE_JSON_DEPTH);
	struct json_object *o;

	if (!tok)
		return NULL;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	o = json_tokener_parse_ex(tok, s, (int)len);
	for (size_t i = o ? json_tokener_get_parse_end(tok) : len; i < len; i++)
		if (s[i] != ' ' && s[i] != '\n' && s[i] != '\r' && s[i] != '\t') {
			json_object_put(o);
			o = NULL;
			break;
		}
	json_tokener_free(tok);
	return o;
}

const char *kube_json_str(struct json_object *o, const char *a, const char *b)
{
	struct json_object *v;

	if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, a, &v))
		return NULL;
	if (b && (!json_object_is_type(v, json_type_object) || !json_object_object_get_ex(v, b, &v)))
		return NULL;
	return json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}
