/* export_pyroscope.c: the Pyroscope exporter: encodes each series to gzip'ed pprof and
 * queues it on its sender, as one /ingest request per series or one Push per window. */
#include "export_pyroscope.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "encode.h"
#include "export_http.h"
#include "log.h"
#include "pyroscope_push.pb-c.h"
#include "sender.h"
#include "url.h"

/* Pyroscope's name for CPU profiles (profile type process_cpu:cpu:nanoseconds:cpu:nanoseconds). */
#define PROFILE_NAME    "process_cpu"
#define INGEST_PATH     "/ingest"
#define PUSH_PATH       "/push.v1.PusherService/Push"

typedef Prowl__Pyroscope__Push__V1__PushRequest pb_push_request;
typedef Prowl__Pyroscope__Push__V1__RawProfileSeries pb_series;
typedef Prowl__Pyroscope__Push__V1__LabelPair pb_label;
typedef Prowl__Pyroscope__Push__V1__RawSample pb_sample;

/* Owns nothing beyond its exporter_http, so exporter_http_free() frees it. */
struct exporter_pyroscope {
	struct exporter_http http;
	enum pyroscope_api api;
};

static int queue_request(struct sender *snd, char *path, const char *content_type, const char *extra_header,
			 uint8_t *body, size_t len)
{
	struct sender_request *req = calloc(1, sizeof(*req));

	if (!req) {
		free(path);
		free(body);
		return -ENOMEM;
	}
	req->path = path;
	req->body = body;
	req->len = len;
	req->content_type = strdup(content_type);
	if (!req->content_type)
		goto oom;
	if (extra_header) {
		req->headers = calloc(2, sizeof(char *));
		if (!req->headers || !(req->headers[0] = strdup(extra_header)))
			goto oom;
	}
	return sender_enqueue(snd, req);
oom:
	sender_request_free(req);
	return -ENOMEM;
}

static bool is_alpha(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* The ingest key "app{k=v,...}" has no escape syntax: a label name may only hold
 * [A-Za-z0-9_] (not starting with a digit) and '{', '}' and ',' would end a name
 * or a value early, so such characters become '_'. */
static void put_key_name(FILE *f, const char *s)
{
	if (is_digit((unsigned char)*s))
		fputc('_', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		fputc(is_alpha(c) || is_digit(c) || c == '_' ? c : '_', f);
	}
}

static void put_key_value(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc(*s == '{' || *s == '}' || *s == ',' ? '_' : *s, f);
}

/* Pyroscope refuses (HTTP 400) an application name with any character outside
 * [A-Za-z0-9_.-/] ("memfd:x", "getty@tty1"): each such byte becomes '_'. */
static void put_app_name(FILE *f, const char *s)
{
	if (!*s)
		fputc('_', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		fputc(is_alpha(c) || is_digit(c) || c == '_' || c == '.' || c == '-' || c == '/' ? c : '_', f);
	}
}

/* Builds "/ingest?name=<app{k=v,...}>&from=...". */
static int ingest_path(const struct export_series *s, const struct export_batch *b, char **ret)
{
	int64_t from = b->start_unix_ns / NSEC_PER_SEC, until = (b->end_unix_ns + NSEC_PER_SEC - 1) / NSEC_PER_SEC;
	char *key = NULL, *path = NULL, *esc = NULL;
	size_t keylen = 0, pathlen = 0;
	bool first = true;
	FILE *f;

	f = open_memstream(&key, &keylen);
	if (!f)
		return -ENOMEM;
	put_app_name(f, export_series_service(s));
	fputc('{', f);
	for (size_t i = 0; i < s->nlabels; i++) {
		const struct series_label *l = &s->labels[i];

		if (!export_label_is_extra(l))
			continue;
		if (!first)
			fputc(',', f);
		first = false;
		put_key_name(f, l->name);
		fputc('=', f);
		put_key_value(f, l->value);
	}
	fputc('}', f);
	if (fclose(f) != 0) {
		free(key);
		return -ENOMEM;
	}

	if (until <= from)
		until = from + 1;
	f = open_memstream(&path, &pathlen);
	if (!f) {
		free(key);
		return -ENOMEM;
	}
	esc = url_escape(key);
	fprintf(f, INGEST_PATH "?name=%s", esc ? esc : "");
	fprintf(f, "&from=%" PRId64 "&until=%" PRId64 "&format=pprof&spyName=prowl", from, until);
	if (b->period_ns > 0)
		fprintf(f, "&sampleRate=%" PRId64, (NSEC_PER_SEC + b->period_ns / 2) / b->period_ns);
	free(key);
	if (fclose(f) != 0 || !esc) {
		free(esc);
		free(path);
		return -ENOMEM;
	}
	free(esc);
	*ret = path;
	return 0;
}

static int submit_ingest(struct exporter_pyroscope *p, const struct export_batch *b)
{
	int ret = 0;

	for (size_t i = 0; i < b->nseries; i++) {
		const struct export_series *s = &b->series[i];
		uint8_t *buf = NULL;
		char *path = NULL;
		size_t len;
		int r;

		if (!export_series_has_samples(s))
			continue;
		r = encode_pprof(s->prof, &buf, &len);
		if (r == 0)
			r = ingest_path(s, b, &path);
		if (r == 0) {
			r = queue_request(p->http.snd, path, "application/octet-stream", NULL, buf, len);
			buf = NULL;
		}
		free(buf);
		if (r < 0 && ret == 0)
			ret = log_error_errno(r, "%s: cannot queue the profile of %s", p->http.base.name, export_series_service(s));
	}
	return ret;
}

static int submit_push(struct exporter_pyroscope *p, const struct export_batch *b)
{
	pb_push_request req = PROWL__PYROSCOPE__PUSH__V1__PUSH_REQUEST__INIT;
	pb_series *series = NULL, **seriesp = NULL;
	pb_label *labels = NULL, **labelsp = NULL;
	pb_sample *samples = NULL, **samplesp = NULL;
	uint8_t **bufs = NULL, *body = NULL;
	size_t nser = 0, nlab = 0, ns = 0, nl = 0, len;
	char *path = NULL;
	int r = 0;

	nser = export_batch_count(b, &nlab);
	if (nser == 0)
		return 0;
	series = calloc(nser, sizeof(*series));
	seriesp = calloc(nser, sizeof(*seriesp));
	samples = calloc(nser, sizeof(*samples));
	samplesp = calloc(nser, sizeof(*samplesp));
	bufs = calloc(nser, sizeof(*bufs));
	labels = calloc(nlab, sizeof(*labels));
	labelsp = calloc(nlab, sizeof(*labelsp));
	path = strdup(PUSH_PATH);
	if (!series || !seriesp || !samples || !samplesp || !bufs || !labels || !labelsp || !path) {
		r = -ENOMEM;
		goto out;
	}

	for (size_t i = 0; i < b->nseries; i++) {
		const struct export_series *s = &b->series[i];
		pb_series *ps = &series[ns];
		pb_sample *sm = &samples[ns];
		size_t first = nl;

		if (!export_series_has_samples(s))
			continue;
		r = encode_pprof(s->prof, &bufs[ns], &len);
		if (r < 0)
			goto out;
		prowl__pyroscope__push__v1__raw_sample__init(sm);
		sm->raw_profile.data = bufs[ns];
		sm->raw_profile.len = len;
		samplesp[ns] = sm;

		for (size_t k = 0; k < 2 + s->nlabels; k++) {
			const char *name, *value;

			if (!export_series_sent_label(s, PROFILE_NAME, k, &name, &value))
				continue;
			prowl__pyroscope__push__v1__label_pair__init(&labels[nl]);
			labels[nl].name = (char *)name;
			labels[nl].value = (char *)value;
			labelsp[nl] = &labels[nl];
			nl++;
		}

		prowl__pyroscope__push__v1__raw_profile_series__init(ps);
		ps->labels = &labelsp[first];
		ps->n_labels = nl - first;
		ps->samples = &samplesp[ns];
		ps->n_samples = 1;
		seriesp[ns] = ps;
		ns++;
	}
	req.series = seriesp;
	req.n_series = ns;
	len = prowl__pyroscope__push__v1__push_request__get_packed_size(&req);
	body = malloc(len ? len : 1);
	if (!body) {
		r = -ENOMEM;
		goto out;
	}
	prowl__pyroscope__push__v1__push_request__pack(&req, body);
	/* Connect unary call over HTTP/1.1: the body is the bare message. */
	r = queue_request(p->http.snd, path, "application/proto", "Connect-Protocol-Version: 1", body, len);
	path = NULL;
	body = NULL;
out:
	if (r < 0)
		log_error_errno(r, "%s: cannot build or queue a push request", p->http.base.name);
	if (bufs)
		for (size_t i = 0; i < nser; i++)
			free(bufs[i]);
	free(bufs);
	free(series);
	free(seriesp);
	free(samples);
	free(samplesp);
	free(labels);
	free(labelsp);
	free(body);
	free(path);
	return r;
}

static int pyro_submit(struct exporter *e, const struct export_batch *b)
{
	struct exporter_pyroscope *p = (struct exporter_pyroscope *)e;

	return p->api == PYRO_API_PUSH ? submit_push(p, b) : submit_ingest(p, b);
}

static const struct exporter_ops pyro_ops = {
	.kind = "pyroscope",
	.submit = pyro_submit,
	.flush = exporter_http_flush,
	.get_stats = exporter_http_get_stats,
	.free = exporter_http_free,
	.requeue = exporter_http_requeue,
	.take_pending = exporter_http_take_pending,
};

int exporter_pyroscope_new(const struct http_target *t, enum pyroscope_api api, struct exporter **ret)
{
	struct exporter *e;
	int r;

	if (!t || !ret || (api != PYRO_API_INGEST && api != PYRO_API_PUSH))
		return -EINVAL;
	r = exporter_http_new(sizeof(struct exporter_pyroscope), &pyro_ops, "pyroscope", t, &e);
	if (r < 0)
		return r;
	((struct exporter_pyroscope *)e)->api = api;
	*ret = e;
	return 0;
}
