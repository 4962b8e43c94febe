/* export_http.h: what the HTTP exporters (Pyroscope, OTLP, Parca) share: a base
 * whose delivery is one sender, so flush, stats and free pass straight through to it. */
#ifndef PROWL_EXPORT_HTTP_H
#define PROWL_EXPORT_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "label_names.h"

struct sender;

/* Labels every HTTP backend sends first: the profile's name and its service. */
#define EXPORT_NAME_LABEL      "__name__"
#define EXPORT_DEFAULT_SERVICE "unknown_service"

/* Embedded first in each HTTP backend's own struct (or used as it is). */
struct exporter_http {
	struct exporter base;
	struct sender *snd;
};

/* Sets h's ops, a copy of name, and a sender for t (t is copied). On error h owns
 * nothing (the caller still frees h itself). Returns 0 or a negative errno. */
int exporter_http_init(struct exporter_http *h, const struct exporter_ops *ops, const char *name,
		       const struct http_target *t);

/* Allocates size bytes (zeroed; size >= sizeof(struct exporter_http), the backend's
 * struct embedding exporter_http first), initialises them as exporter_http_init()
 * does and returns the exporter in *ret. Returns 0 or a negative errno. */
int exporter_http_new(size_t size, const struct exporter_ops *ops, const char *name, const struct http_target *t,
		      struct exporter **ret);

/* exporter_ops entries for any struct that embeds exporter_http first. */
int exporter_http_flush(struct exporter *e, uint32_t deadline_ms);
void exporter_http_get_stats(struct exporter *e, struct export_stats *ret);
int exporter_http_requeue(struct exporter *e, struct sender_request *req);
int exporter_http_take_pending(struct exporter *e, struct sender_request ***ret, size_t *n);
/* exporter_http_destroy() then frees e itself: for backends that own nothing more.
 * Accepts NULL. A backend that owns more frees that, calls exporter_http_destroy()
 * and frees itself. */
void exporter_http_free(struct exporter *e);
/* Stops and frees the sender (dropping what it holds) and frees the name; not h. */
void exporter_http_destroy(struct exporter_http *h);

/* s's service_name, or "unknown_service" when it has none or an empty one. */
const char *export_series_service(const struct export_series *s);
/* Whether l is sent besides __name__ and service_name: named, with a value. */
bool export_label_is_extra(const struct series_label *l);
/* Whether s has a profile with at least one sample: empty series are not sent. */
bool export_series_has_samples(const struct export_series *s);
/* How many series of b have samples, and in *ret_labels at most how many labels a
 * backend sends for them (export_series_sent_label's slots). */
size_t export_batch_count(const struct export_batch *b, size_t *ret_labels);
/* Slot k (0 .. 2 + s->nlabels - 1) of the labels a backend sends for s: __name__ =
 * profile_name, service_name, then each extra label; false for a slot not sent. */
bool export_series_sent_label(const struct export_series *s, const char *profile_name, size_t k,
			      const char **name, const char **value);

#endif
