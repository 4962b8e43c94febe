/* discover.h: a process's identity: its discovery labels (__meta_process_*,
 * __meta_container_id, __meta_kubernetes_*), the default series labels, then relabel_configs. */
#ifndef PROWL_DISCOVER_H
#define PROWL_DISCOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgroup.h"
#include "window.h"
#include "labelset.h"

struct kube;
struct relabel;

struct discover_opts {
	const char *proc_root;          /* "/proc" */
	const char *hostname;
	const struct series_label *static_labels;
	size_t nstatic;
	struct kube *kube;              /* NULL: not in Kubernetes */
	const struct relabel *relabel;  /* NULL: no rules */
	struct cgroup_cache *cgroups;
};

/* What discovery found for one process. */
struct identity {
	struct labelset labels;   /* the series labels after relabeling, sorted, no "__" ones */
	struct labelset resource; /* OTLP resource attributes that are not labels: k8s.pod.uid,
				   * container.id (kept while the pod/container labels are) */
	bool keep;                /* false: relabeling dropped the process */
	char container_id[CONTAINER_ID_LEN + 1];
	char pod_uid[POD_UID_LEN + 1];
	bool in_pod;              /* in a kubepods cgroup while Kubernetes is on */
	bool pod_known;           /* ... and its pod is known */
	bool container_known;     /* ... and so is its container */
	uint64_t pod_version;     /* of the pod metadata used; 0 when none */
};

/* Discovers process pid (its sample's cgroup id and process name pcomm) and
 * relabels it. Returns 0 or -ENOMEM; a process that is gone gets what can be
 * known from its sample. When the container is in a pod the client does not
 * know, a (rate-limited) relist is asked for. */
int discover(const struct discover_opts *o, uint32_t pid, uint64_t cgroup_id, const char *pcomm,
	     struct identity *ret);
void identity_free(struct identity *id);

/* The Kubernetes pod metadata version the process would get now (0: none), to
 * tell whether its identity is stale; cheap (no allocation beyond a lookup). */
uint64_t discover_pod_version(const struct discover_opts *o, const struct identity *id);

/* The names of the default series labels discovery may set besides the static
 * ones (namespace, pod, container, node, container_id), for rules that match them. */
size_t discover_label_names(const char **ret, size_t max);

#endif
