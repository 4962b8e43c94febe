/* export_otlp.c: the OTLP exporter: encodes a window's batch as one OTLP profiles
 * request, gzips it and queues one POST /v1development/profiles on its sender. */
#include "export_otlp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "encode_otlp.h"
#include "gzip.h"
#include "log.h"
#include "sender.h"

struct exporter_otlp {
	struct exporter base;
	struct sender *snd;
};

static bool batch_has_samples(const struct export_batch *b)
{
	for (size_t i = 0; i < b->nseries; i++) {
		struct profile_stats st;

		if (!b->series[i].prof)
			continue;
		profile_get_stats(b->series[i].prof, &st);
		if (st.samples > 0)
			return true;
	}
	return false;
}

static int otlp_submit(struct exporter *e, const struct export_batch *b)
{
	struct exporter_otlp *o = (struct exporter_otlp *)e;
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

static int otlp_flush(struct exporter *e, uint32_t deadline_ms)
{
	return sender_flush(((struct exporter_otlp *)e)->snd, deadline_ms);
}

static void otlp_get_stats(struct exporter *e, struct export_stats *ret)
{
	sender_get_stats(((struct exporter_otlp *)e)->snd, ret);
}

static void otlp_free(struct exporter *e)
{
	struct exporter_otlp *o = (struct exporter_otlp *)e;

	if (!o)
		return;
	sender_free(o->snd);
	free(o->base.name);
	free(o);
}

static const struct exporter_ops otlp_ops = {
	.kind = "otlp",
	.submit = otlp_submit,
	.flush = otlp_flush,
	.get_stats = otlp_get_stats,
	.free = otlp_free,
};

int exporter_otlp_new(const struct http_target *t, struct exporter **ret)
{
	struct exporter_otlp *o;
	int r;

	if (!t || !ret)
		return -EINVAL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->base.ops = &otlp_ops;
	o->base.name = strdup("otlp");
	if (!o->base.name) {
		r = -ENOMEM;
		goto fail;
	}
	r = sender_new(o->base.name, t, &o->snd);
	if (r < 0)
		goto fail;
	*ret = &o->base;
	return 0;
fail:
	otlp_free(&o->base);
	return r;
}
