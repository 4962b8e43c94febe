/* kube_pod.h: the pods of this node as the agent keeps them: parsed from the API
 * server's JSON (hostile input, bounded), stored by UID with an index by container id. */
#ifndef PROWL_KUBE_POD_H
#define PROWL_KUBE_POD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "labelset.h"
#include "u64map.h"

#define KUBE_JSON_DEPTH      64   /* nesting json-c accepts (a pod is about 12 deep) */
#define KUBE_MAX_POD_LABELS  64   /* pod labels kept per pod; more are ignored */
#define KUBE_MAX_CONTAINERS  64   /* containers (init, regular, ephemeral) per pod */
#define KUBE_MAX_NAME        253  /* a namespace, pod or node name (DNS subdomain) */

struct json_object;

struct kube_container {
	char *name;
	char id[65]; /* 64 hex digits, "" until the container runs */
};

struct kube_pod {
	char *uid, *name, *ns, *node;
	struct labelset labels; /* the pod's labels as they are (names unchanged) */
	struct kube_container *containers;
	size_t ncontainers;
	char *single;    /* the name of the only container when the pod has exactly one
			  * and no init or ephemeral ones, else NULL */
	uint64_t version; /* store generation of its last change */
	bool deleted;
};

/* Builds a pod from one Pod object. Returns 0, -EINVAL for an object that is
 * not a pod of the expected shape (no uid, name or namespace, names too long),
 * or -ENOMEM. Labels, containers and container ids past the limits or of the
 * wrong shape are skipped. */
int kube_pod_from_json(struct json_object *obj, struct kube_pod **ret);
void kube_pod_free(struct kube_pod *p); /* accepts NULL */

/* "containerd://<64 hex>" (any scheme) -> the id; false when it is not one. */
bool kube_container_id(const char *s, char out[65]);

/* Pods by UID, with the containers' ids indexed. Not thread-safe: kube.c locks. */
struct kube_store {
	struct kube_pod **pods;
	size_t n, cap;
	struct u64map by_uid;  /* hash(uid) -> index + 1 */
	struct u64map by_cid;  /* hash(container id) -> index + 1 */
	uint64_t generation;   /* bumped on every change */
	uint32_t max_pods;
	uint64_t rejected;     /* pods not stored because the store was full */
};

void kube_store_init(struct kube_store *s, uint32_t max_pods);
void kube_store_free(struct kube_store *s);
/* Adds p or replaces the pod with its UID (takes ownership, frees p on error).
 * Returns 0, -ENOSPC (full: p freed, counted) or -ENOMEM. */
int kube_store_put(struct kube_store *s, struct kube_pod *p);
/* Marks the pod with uid deleted (it stays until kube_store_gc frees it). */
void kube_store_delete(struct kube_store *s, const char *uid);
/* A full list: marks deleted every pod whose UID is not in pods[0..n), then
 * puts each of pods (ownership taken). */
int kube_store_replace(struct kube_store *s, struct kube_pod **pods, size_t n);
const struct kube_pod *kube_store_by_uid(const struct kube_store *s, const char *uid);
const struct kube_pod *kube_store_by_container(const struct kube_store *s, const char *cid);
/* Frees deleted pods none of whose container ids in_use() says is still used
 * by a live process. Returns the number freed. */
size_t kube_store_gc(struct kube_store *s, bool (*in_use)(void *ctx, const char *cid), void *ctx);
size_t kube_store_live(const struct kube_store *s);
size_t kube_store_mem_bytes(const struct kube_store *s);

#endif
