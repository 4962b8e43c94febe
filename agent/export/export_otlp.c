/* export_otlp.c: the OTLP exporter: encodes a window's batch as one OTLP profiles
 * request, gzips it and queues one POST /v1development/profiles on its sender. */
#include "export_otlp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "encode_otlp.h"
#include "export_http.h"
#include "gzip.h"
#include "log.h"
#include "sender.h"

static bool batch_has_samples(const struct export_batch *b)
{
	for (size_t i = 0; i < b->nseries; i++)
		if (export_series_has_samples(&b->series[i]))
			return true;
	return false;
}

static int otlp_submit(struct exporter *e, const struct export_batch *b)
{
	struct exporter_http *o = (struct exporter_http *)e;
	struct sender_request *req = NULL;
	uint8_t *raw = NULL, *gz = NULL;
	size_t rawlen, gzlen;
	int r;

	if (!b)
		return -EINVAL;
	if (!batch_has_samples(b))
		return 0;
	r = encode_otlp(b, &raw, &rawlen);
	if (r < 0)
		goto out;
	r = gzip_compress(raw, rawlen, &gz, &gzlen);
	if (r < 0)
		goto out;
	req = calloc(1, sizeof(*req));
	if (!req) {
		r = -ENOMEM;
		goto out;
	}
	req->body = gz;
	req->len = gzlen;
	gz = NULL;
	req->path = strdup(OTLP_PROFILES_PATH);
	req->content_type = strdup("application/x-protobuf");
	req->content_encoding = strdup("gzip");
	if (!req->path || !req->content_type || !req->content_encoding) {
		r = -ENOMEM;
		goto out;
	}
	/* The sender owns req from here, even on error. */
	r = sender_enqueue(o->snd, req);
	req = NULL;
out:
	if (req)
		sender_request_free(req);
	free(raw);
	free(gz);
	if (r < 0)
		log_error_errno(r, "%s: cannot encode or queue the profiles request", e->name);
	return r;
}

static const struct exporter_ops otlp_ops = {
	.kind = "otlp",
	.submit = otlp_submit,
	.flush = exporter_http_flush,
	.get_stats = exporter_http_get_stats,
	.free = exporter_http_free,
	.requeue = exporter_http_requeue,
	.take_pending = exporter_http_take_pending,
};

int exporter_otlp_new(const struct http_target *t, struct exporter **ret)
{
	return exporter_http_new(sizeof(struct exporter_http), &otlp_ops, "otlp", t, ret);
}
