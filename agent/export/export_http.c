/* export_http.c: the shared base of the HTTP exporters: construction of the sender
 * and the flush/get_stats/free operations that only pass through to it. */
#include "export_http.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "sender.h"

int exporter_http_init(struct exporter_http *h, const struct exporter_ops *ops, const char *name,
		       const struct http_target *t)
{
	int r;

	h->base.ops = ops;
	h->base.name = strdup(name);
	if (!h->base.name)
		return -ENOMEM;
	r = sender_new(h->base.name, t, &h->snd);
	if (r < 0) {
		exporter_http_destroy(h);
		return r;
	}
	return 0;
}

int exporter_http_new(size_t size, const struct exporter_ops *ops, const char *name, const struct http_target *t,
		      struct exporter **ret)
{
	struct exporter_http *h;
	int r;

	if (!t || !ret || size < sizeof(*h))
		return -EINVAL;
	h = calloc(1, size);
	if (!h)
		return -ENOMEM;
	r = exporter_http_init(h, ops, name, t);
	if (r < 0) {
		free(h);
		return r;
	}
	*ret = &h->base;
	return 0;
}

int exporter_http_flush(struct exporter *e, uint32_t deadline_ms)
{
	return sender_flush(((struct exporter_http *)e)->snd, deadline_ms);
}

void exporter_http_get_stats(struct exporter *e, struct export_stats *ret)
{
	sender_get_stats(((struct exporter_http *)e)->snd, ret);
}

int exporter_http_requeue(struct exporter *e, struct sender_request *req)
{
	return sender_enqueue(((struct exporter_http *)e)->snd, req);
}

int exporter_http_take_pending(struct exporter *e, struct sender_request ***ret, size_t *n)
{
	return sender_stop(((struct exporter_http *)e)->snd, ret, n);
}

void exporter_http_destroy(struct exporter_http *h)
{
	sender_free(h->snd);
	h->snd = NULL;
	free(h->base.name);
	h->base.name = NULL;
}

void exporter_http_free(struct exporter *e)
{
	if (!e)
		return;
	exporter_http_destroy((struct exporter_http *)e);
	free(e);
}

const char *export_series_service(const struct export_series *s)
{
	const char *v = export_series_label(s, LABEL_SERVICE_NAME);

	return v && *v ? v : EXPORT_DEFAULT_SERVICE;
}

bool export_label_is_extra(const struct series_label *l)
{
	return l->name && *l->name && l->value && *l->value && strcmp(l->name, EXPORT_NAME_LABEL) != 0 &&
	       strcmp(l->name, LABEL_SERVICE_NAME) != 0;
}

bool export_series_has_samples(const struct export_series *s)
{
	struct profile_stats st;

	if (!s->prof)
		return false;
	profile_get_stats(s->prof, &st);
	return st.samples > 0 || st.stacks > 0; /* off-CPU samples count no samples, only time */
}

size_t export_batch_count(const struct export_batch *b, size_t *ret_labels)
{
	size_t n = 0;

	*ret_labels = 0;
	for (size_t i = 0; i < b->nseries; i++) {
		if (!export_series_has_samples(&b->series[i]))
			continue;
		n++;
		*ret_labels += 2 + b->series[i].nlabels;
	}
	return n;
}

bool export_series_sent_label(const struct export_series *s, const char *profile_name, size_t k,
			      const char **name, const char **value)
{
	if (k == 0) {
		*name = EXPORT_NAME_LABEL;
		*value = profile_name;
	} else if (k == 1) {
		*name = LABEL_SERVICE_NAME;
		*value = export_series_service(s);
	} else if (export_label_is_extra(&s->labels[k - 2])) {
		*name = s->labels[k - 2].name;
		*value = s->labels[k - 2].value;
	} else {
		return false;
	}
	return true;
}
