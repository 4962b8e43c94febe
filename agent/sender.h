/* sender.h: asynchronous HTTP delivery for the exporters: a bounded queue drained
 * by one thread, with gzip, timeouts, TLS options, retry with backoff and counters. */
#ifndef PROWL_SENDER_H
#define PROWL_SENDER_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"

struct sender;

/* One HTTP POST. The sender owns every pointer once enqueued. */
struct sender_request {
	char *path;             /* appended to the target URL, e.g. "/ingest?name=..." */
	char *content_type;
	char *content_encoding; /* e.g. "gzip" when body is gzip'ed, or NULL */
	char **headers;         /* extra "Name: value" lines, NULL-terminated, or NULL */
	uint8_t *body;
	size_t len;
};

/* name is for logs ("pyroscope"); t is copied. */
int sender_new(const char *name, const struct http_target *t, struct sender **ret);
/* Queues req (taking ownership, even on error). When the queue would exceed the
 * target's buffer_bytes, the oldest requests are dropped and counted. */
int sender_enqueue(struct sender *s, struct sender_request *req);
/* Waits until the queue is empty or deadline_ms passed; returns requests left. */
int sender_flush(struct sender *s, uint32_t deadline_ms);
void sender_get_stats(struct sender *s, struct export_stats *ret);
void sender_free(struct sender *s); /* stops the thread; drops what is queued; accepts NULL */
void sender_request_free(struct sender_request *req);

#endif
