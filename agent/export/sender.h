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
	int64_t queued_unix_ns; /* when first queued; set by sender_enqueue when 0 */
	/* When set, sender_request_free() calls it first. A request read back from the
	 * spool removes its file this way once it is finished with for good: delivered,
	 * refused or dropped. sender_stop() hands requests back without freeing them. */
	void (*on_free)(struct sender_request *req);
	void *on_free_ctx;
};

/* A backend whose 2xx answer does not say it took the request (gRPC-web: the
 * grpc-status) checks each 2xx answer with a function of this type. */
enum sender_verdict {
	SENDER_REPLY_SENT,
	SENDER_REPLY_RETRY,    /* the backend is busy or down: the request stays queued */
	SENDER_REPLY_REJECTED, /* the backend will not take it: dropped, counted failed */
};

struct sender_reply {
	const uint8_t *body; /* the start of the answer's body (the sender keeps a bounded part) */
	size_t len;
	/* The value of the answer's header name (any case), or NULL; valid during the check. */
	const char *(*header)(const struct sender_reply *r, const char *name);
	void *ctx; /* the sender's, for header() */
};

/* Fills what (one line for the log, without the path) unless it returns SENT. */
typedef enum sender_verdict (*sender_reply_check_fn)(const struct sender_reply *r, char *what, size_t whatlen);

/* name is for logs ("pyroscope"); t is copied. */
int sender_new(const char *name, const struct http_target *t, struct sender **ret);
/* Queues req (taking ownership, even on error). When the queue would exceed the
 * target's buffer_bytes, the oldest requests are dropped and counted. */
int sender_enqueue(struct sender *s, struct sender_request *req);
/* Waits until the queue is empty or deadline_ms passed; returns requests left. */
int sender_flush(struct sender *s, uint32_t deadline_ms);
/* Checks every 2xx answer with check from now on; call before the first enqueue. */
void sender_set_reply_check(struct sender *s, sender_reply_check_fn check);
void sender_get_stats(struct sender *s, struct export_stats *ret);
/* Stops delivery now, cutting a transfer under way short, and hands back what was
 * not delivered, oldest first, in a malloc'ed array the caller frees (with each
 * request). Afterwards only sender_get_stats and sender_free may be called. */
int sender_stop(struct sender *s, struct sender_request ***ret, size_t *n);
void sender_free(struct sender *s); /* stops the thread; drops (and counts) what is queued; accepts NULL */
void sender_request_free(struct sender_request *req);

#endif
