/* export.h: the export stage's common interface. Each backend (local directory,
 * Pyroscope, OTLP, Parca) encodes a window's series and hands bytes to its sender. */
#ifndef PROWL_EXPORT_H
#define PROWL_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "window.h"

struct sender_request;

/* Connection options shared by the HTTP backends. Strings may be NULL. */
struct http_target {
	char *url;              /* base URL, e.g. http://127.0.0.1:4040 */
	char *basic_user;
	char *basic_password;   /* secret */
	char *bearer_token;     /* secret */
	char *tenant;           /* X-Scope-OrgID */
	char *ca_file;
	char *cert_file, *key_file;
	bool insecure_skip_verify;
	uint32_t timeout_ms;     /* per request; default 10000 */
	uint64_t buffer_bytes;   /* queue cap; default 64 MiB; oldest dropped past it */
	uint32_t max_retries;    /* 0 = retry until dropped by the buffer cap */
};

/* Delivery counters, per exporter. */
struct export_stats {
	uint64_t sent, retried, dropped, failed; /* requests */
	uint64_t bytes_sent;
	uint64_t queue_items, queue_bytes;       /* waiting to be delivered */
	uint64_t kept_files, kept_bytes, removed; /* dir: profiles on disk; removed by retention */
};

struct exporter;

struct exporter_ops {
	const char *kind; /* "dir", "pyroscope", "otlp", "parca" */
	/* Encodes and queues the batch; never blocks on the network. */
	int (*submit)(struct exporter *e, const struct export_batch *b);
	/* Waits until the queue is empty or deadline_ms passed; returns items left. */
	int (*flush)(struct exporter *e, uint32_t deadline_ms);
	void (*get_stats)(struct exporter *e, struct export_stats *ret);
	void (*free)(struct exporter *e);
	/* Exporters with a send queue (HTTP) only, NULL otherwise. requeue: queues a
	 * request read back from the spool (taking it). take_pending: stops delivery
	 * and hands back what was not delivered, oldest first (see sender_stop). */
	int (*requeue)(struct exporter *e, struct sender_request *req);
	int (*take_pending)(struct exporter *e, struct sender_request ***ret, size_t *n);
};

struct exporter {
	const struct exporter_ops *ops;
	char *name; /* for logs and metrics, e.g. "pyroscope" */
};

#endif
