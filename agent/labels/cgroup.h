/* cgroup.h: a process's identity from its cgroup paths: the systemd unit, the
 * container id and runtime, and the Kubernetes pod UID; cached per cgroup id. */
#ifndef PROWL_CGROUP_H
#define PROWL_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CGROUP_PATH_MAX    1024 /* bytes of a path kept (longer ones are cut) */
#define CONTAINER_ID_LEN   64   /* hex digits */
#define POD_UID_LEN        36   /* 8-4-4-4-12 */

enum container_runtime {
	RUNTIME_NONE = 0,
	RUNTIME_CONTAINERD, /* cri-containerd-<id>.scope */
	RUNTIME_CRIO,       /* crio-<id>.scope */
	RUNTIME_DOCKER,     /* docker-<id>.scope, /docker/<id> */
	RUNTIME_PODMAN,     /* libpod-<id>.scope, libpod-<id> */
	RUNTIME_CRI,        /* /kubepods/<qos>/pod<uid>/<id> (cgroupfs driver): any CRI runtime */
};

struct cgroup_info {
	char path[CGROUP_PATH_MAX]; /* the cgroup v2 path, else the v1 path the container came from */
	char unit[256];             /* innermost systemd unit ("nginx.service"), "" if none */
	char container_id[CONTAINER_ID_LEN + 1]; /* "" if none */
	char pod_uid[POD_UID_LEN + 1];           /* dashed form, "" if none */
	enum container_runtime runtime;
	bool from_v1;   /* the container was found on a v1 hierarchy (hybrid hosts) */
	bool in_kubepods; /* under a kubepods cgroup and not under a user's session:
			   * only such containers are matched to Kubernetes pods */
};

/* Parses the text of /proc/PID/cgroup (v2 "0::/path" and v1 "N:ctrl:/path"
 * lines). The v2 path wins; v1 lines are read when it names no container.
 * Never fails: what is not found stays empty. */
void cgroup_parse(const char *text, struct cgroup_info *ret);

/* The runtime's name for labels and logs: "containerd", "cri-o", ... */
const char *container_runtime_name(enum container_runtime r);

/* A cache of parsed cgroups keyed by the cgroup v2 id BPF reports, so that the
 * processes of one container parse its path once. Bounded: cleared when full. */
struct cgroup_cache;

int cgroup_cache_new(uint32_t max_entries, struct cgroup_cache **ret);
void cgroup_cache_free(struct cgroup_cache *c); /* accepts NULL */
/* The identity of pid, whose sample carried cgroup_id: from the cache, else
 * read from <proc_root>/<pid>/cgroup and cached when the v2 path names a container
 * (what a v2 cgroup holds otherwise, a hybrid host's v1 hierarchies may split).
 * Returns 0, or -ENOENT when
 * the process is gone (ret is then empty). */
int cgroup_cache_lookup(struct cgroup_cache *c, const char *proc_root, uint32_t pid, uint64_t cgroup_id,
			struct cgroup_info *ret);
size_t cgroup_cache_mem_bytes(const struct cgroup_cache *c);

#endif
