/* kube.h: the agent's Kubernetes client: lists and watches the pods of this node
 * on a thread of its own; the sampling path reads what it knows under a short lock. */
#ifndef PROWL_KUBE_H
#define PROWL_KUBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "labelset.h"

struct kube;

struct kube_opts {
	const char *api_url;      /* https://host:port, no trailing '/' */
	const char *token_file;   /* re-read when it changes; NULL or missing: no token */
	const char *ca_file;      /* TLS trust; NULL or missing: the system's CAs */
	const char *node_name;
	uint32_t max_pods;            /* pods kept (0: 4096) */
	uint32_t relist_interval_ms;  /* at most one relist for unknown containers per this (0: 10 s) */
	uint32_t watch_timeout_s;     /* server-side watch timeout (0: 5-10 min, random) */
};

/* A pod's metadata copied out for one process; free with kube_meta_free. */
struct kube_meta {
	char *ns, *pod, *pod_uid, *node;
	char *container;        /* NULL when the container is not known yet */
	struct labelset labels; /* the pod's labels */
	uint64_t version;       /* changes whenever the pod does */
};

struct kube_stats {
	uint64_t list_requests, watch_requests, errors, events, relists, outages;
	uint64_t bytes;          /* response bytes read */
	uint64_t pods_rejected;  /* not kept: more than max_pods */
	uint32_t pods, deleted_pods;
	size_t mem_bytes;
	bool synced;             /* a list succeeded and the watch is not in an outage */
};

/* Starts the client thread. The options are copied. Returns 0 or -ENOMEM; the
 * API server being unreachable is not an error (it is retried with backoff,
 * logged once per outage and counted). */
int kube_start(const struct kube_opts *o, struct kube **ret);
/* Stops the thread (aborting a transfer in flight) and frees everything; accepts NULL. */
void kube_stop(struct kube *k);

/* What is known of the container cid, else of the pod pod_uid (either may be
 * NULL or ""). Returns 0 when the container is known (meta->container set), 1
 * when only its pod is, or -ENOENT; -ENOMEM. meta is overwritten. */
int kube_lookup(struct kube *k, const char *cid, const char *pod_uid, struct kube_meta *meta);
void kube_meta_free(struct kube_meta *m);
/* The version kube_lookup would report, without copying anything (0: unknown). */
uint64_t kube_version(struct kube *k, const char *cid, const char *pod_uid);

/* Asks for one relist because cid belongs to a pod the client does not know:
 * once per container id, and at most once per relist_interval_ms overall. */
void kube_want_relist(struct kube *k, const char *cid);

/* Changes whenever any pod does: callers re-check their processes then. */
uint64_t kube_generation(struct kube *k);

/* Frees deleted pods whose containers in_use() says have no live process;
 * in_use is called under the client's lock and must not call back into it. */
void kube_gc(struct kube *k, bool (*in_use)(void *ctx, const char *cid), void *ctx);

void kube_get_stats(struct kube *k, struct kube_stats *ret);

#endif
