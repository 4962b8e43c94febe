/* export.h: the export stage's common interface. Each backend (local directory,
 * Pyroscope, OTLP, Parca) encodes a window's series and hands bytes to its sender. */
#ifndef PROWL_EXPORT_H
#define PROWL_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct profile;
struct sender_request;

/* A series label (Prometheus style name=value). */
struct series_label {
	const char *name;
	const char *value;
};

/* One series of one window: the series' labels (service_name, host_name, static
 * labels, namespace/pod/container/node or container_id, relabeled) and its
 * aggregated profile. Sample labels (pid, process_name, tid, thread_name) live
 * inside the profile's label sets. resource holds OTLP resource attributes that
 * are not series labels (k8s.pod.uid, container.id), already under their
 * semantic-convention names. */
struct export_series {
	const struct series_label *labels;
	size_t nlabels;
	const struct profile *prof;
	const struct series_label *resource;
	size_t nresource;
};

/* Each profile of a series carries its labels as pprof comments "series_label
 * NAME=VALUE", so that files on disk say which series they are (prowl report --label). */
#define PROWL_SERIES_LABEL_COMMENT "series_label "

/* The value of s's series label called name, or NULL if it has none. */
static inline const char *export_series_label(const struct export_series *s, const char *name)
{
	for (size_t i = 0; i < s->nlabels; i++)
		if (s->labels[i].name && strcmp(s->labels[i].name, name) == 0)
			return s->labels[i].value;
	return NULL;
}

/* A container's id: the series label (outside pods, and in a pod whose container
 * the API server cannot name) and the OTLP resource attribute discovery sets for a
 * pod's container, whose "container" label names it. */
#define SERIES_CONTAINER_ID "container_id"
#define RESOURCE_CONTAINER_ID "container.id"

/* The id of the one container series s belongs to: its container_id label, else its
 * resource's container.id; NULL when it has neither (it may span containers). */
static inline const char *export_series_container_id(const struct export_series *s)
{
	const char *v = export_series_label(s, SERIES_CONTAINER_ID);

	for (size_t i = 0; !v && i < s->nresource; i++)
		if (s->resource[i].name && strcmp(s->resource[i].name, RESOURCE_CONTAINER_ID) == 0)
			v = s->resource[i].value;
	return v;
}

/* Everything gathered in one export window. */
struct export_batch {
	const struct export_series *series;
	size_t nseries;
	int64_t start_unix_ns, end_unix_ns; /* wall-clock window */
	int64_t period_ns;                  /* 1e9 / frequency */
};

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
