/* export_parca.c: the Parca exporter: encodes each series to gzip'ed pprof and queues
 * one JSON WriteRaw request per window (base64 profiles) on its sender. */
#include "export_parca.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encode.h"
#include "escape.h"
#include "export_http.h"
#include "log.h"
#include "sender.h"

/* Parca requires __name__. Its own eBPF agent names on-CPU profiles
 * "parca_agent_cpu", and Parca's UI lists and pre-selects profile types by that
 * name, so prowl's profiles appear next to (and compare with) the agent's. */
#define PROFILE_NAME    "parca_agent_cpu"
#define WRITERAW_PATH   "/api/profiles/writeraw"

/* Standard base64 with padding (RFC 4648 section 4). */
static void put_base64(FILE *f, const uint8_t *p, size_t len)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char out[4];

	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		size_t left = len - i;

		if (left > 1)
			v |= (uint32_t)p[i + 1] << 8;
		if (left > 2)
			v |= p[i + 2];
		out[0] = tab[(v >> 18) & 63];
		out[1] = tab[(v >> 12) & 63];
		out[2] = left > 1 ? tab[(v >> 6) & 63] : '=';
		out[3] = left > 2 ? tab[v & 63] : '=';
		fwrite(out, 1, 4, f);
	}
}

static void put_label(FILE *f, bool first, const char *name, const char *value)
{
	if (!first)
		fputc(',', f);
	fputs("{\"name\":", f);
	escape_json(f, name);
	fputs(",\"value\":", f);
	escape_json(f, value);
	fputc('}', f);
}

static int put_series(FILE *f, const struct export_series *s)
{
	uint8_t *buf;
	size_t len;
	int r;

	r = encode_pprof(s->prof, &buf, &len);
	if (r < 0)
		return r;
	fputs("{\"labels\":{\"labels\":[", f);
	put_label(f, true, EXPORT_NAME_LABEL, PROFILE_NAME);
	put_label(f, false, LABEL_SERVICE_NAME, export_series_service(s));
	for (size_t i = 0; i < s->nlabels; i++) {
		const struct series_label *l = &s->labels[i];

		if (!export_label_is_extra(l))
			continue;
		put_label(f, false, l->name, l->value);
	}
	fputs("]},\"samples\":[{\"rawProfile\":\"", f);
	put_base64(f, buf, len);
	fputs("\"}]}", f);
	free(buf);
	return 0;
}

static int parca_submit(struct exporter *e, const struct export_batch *b)
{
	struct exporter_http *p = (struct exporter_http *)e;
	struct sender_request *req = NULL;
	char *json = NULL;
	size_t len = 0, n = 0;
	FILE *f = NULL;
	int r = 0;

	for (size_t i = 0; i < b->nseries; i++)
		if (export_series_has_samples(&b->series[i]))
			n++;
	if (n == 0)
		return 0;
	f = open_memstream(&json, &len);
	if (!f) {
		r = -ENOMEM;
		goto out;
	}
	fputs("{\"series\":[", f);
	n = 0;
	for (size_t i = 0; i < b->nseries; i++) {
		if (!export_series_has_samples(&b->series[i]))
			continue;
		if (n++)
			fputc(',', f);
		r = put_series(f, &b->series[i]);
		if (r < 0)
			goto out;
	}
	fputs("]}", f);
	r = fclose(f) == 0 ? 0 : -ENOMEM;
	f = NULL;
	if (r < 0)
		goto out;

	req = calloc(1, sizeof(*req));
	if (!req) {
		r = -ENOMEM;
		goto out;
	}
	req->path = strdup(WRITERAW_PATH);
	req->content_type = strdup("application/json");
	req->body = (uint8_t *)json;
	req->len = len;
	json = NULL;
	if (!req->path || !req->content_type) {
		r = -ENOMEM;
		goto out;
	}
	r = sender_enqueue(p->snd, req);
	req = NULL;
out:
	if (f)
		fclose(f);
	free(json);
	sender_request_free(req);
	if (r < 0)
		log_error_errno(r, "%s: cannot build or queue a write request", p->base.name);
	return r;
}

static const struct exporter_ops parca_ops = {
	.kind = "parca",
	.submit = parca_submit,
	.flush = exporter_http_flush,
	.get_stats = exporter_http_get_stats,
	.free = exporter_http_free,
	.requeue = exporter_http_requeue,
	.take_pending = exporter_http_take_pending,
};

int exporter_parca_new(const struct http_target *t, struct exporter **ret)
{
	return exporter_http_new(sizeof(struct exporter_http), &parca_ops, "parca", t, ret);
}
