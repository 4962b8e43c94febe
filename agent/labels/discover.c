/* discover.c: builds a process's discovery labels from /proc, its cgroup and the
 * Kubernetes client, adds the default series labels and runs relabel_configs once. */
#include "discover.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "array_size.h"
#include "kube.h"
#include "relabel.h"
#include "escape.h"
#include "label_names.h"

static const char *const default_names[] = { "namespace", "pod", "container", "node", LABEL_CONTAINER_ID };

size_t discover_label_names(const char **ret, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(default_names) && n < max; i++)
		ret[n++] = default_names[i];
	return n;
}

void identity_free(struct identity *id)
{
	labelset_free(&id->labels);
	labelset_free(&id->resource);
}

/* The executable's path, " (deleted)" removed; "" for kernel threads. */
static void executable(const char *proc_root, uint32_t pid, char *buf, size_t n)
{
	char path[128];
	ssize_t len;

	snprintf(path, sizeof(path), "%s/%u/exe", proc_root, pid);
	len = readlink(path, buf, n - 1);
	if (len <= 0) {
		buf[0] = 0;
		return;
	}
	buf[len] = 0;
	if (len > 10 && strcmp(buf + len - 10, " (deleted)") == 0)
		buf[len - 10] = 0;
}

/* A kernel thread: /proc/PID exists but has no exe. */
static bool kernel_thread(const char *proc_root, uint32_t pid)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/%u", proc_root, pid);
	return access(path, F_OK) == 0;
}

/* "__meta_kubernetes_pod_label_" + the label's name with every character
 * outside [a-zA-Z0-9_] as '_', as Prometheus's Kubernetes discovery does. */
static int pod_label(struct labelset *s, const char *prefix, const char *name, const char *value)
{
	char key[LABEL_NAME_MAX + 64];
	size_t n = (size_t)snprintf(key, sizeof(key), "%s", prefix);

	for (const char *p = name; *p && n + 1 < sizeof(key); p++)
		key[n++] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ? *p : '_';
	key[n] = 0;
	return labelset_set(s, key, value);
}

static int kube_labels(struct labelset *s, const struct kube_meta *m)
{
	int r = 0;

	r = r ?: labelset_set(s, "__meta_kubernetes_namespace", m->ns);
	r = r ?: labelset_set(s, "__meta_kubernetes_pod_name", m->pod);
	r = r ?: labelset_set(s, "__meta_kubernetes_pod_uid", m->pod_uid);
	r = r ?: labelset_set(s, "__meta_kubernetes_node_name", m->node);
	if (m->container)
		r = r ?: labelset_set(s, "__meta_kubernetes_pod_container_name", m->container);
	for (size_t i = 0; r == 0 && i < m->labels.n; i++) {
		r = pod_label(s, "__meta_kubernetes_pod_label_", m->labels.v[i].name, m->labels.v[i].value);
		r = r ?: pod_label(s, "__meta_kubernetes_pod_labelpresent_", m->labels.v[i].name, "true");
	}
	/* The default series labels of a pod's process. */
	r = r ?: labelset_set(s, "namespace", m->ns);
	r = r ?: labelset_set(s, "pod", m->pod);
	r = r ?: labelset_set(s, "node", m->node);
	if (m->container)
		r = r ?: labelset_set(s, "container", m->container);
	return r;
}

/* service_name of a pod's process: app.kubernetes.io/name, else app, else
 * <namespace>/<container>; NULL when none of them is known. */
static const char *pod_service(const struct kube_meta *m, char *buf, size_t n)
{
	const char *v = labelset_get(&m->labels, "app.kubernetes.io/name");

	if (!v)
		v = labelset_get(&m->labels, "app");
	if (v)
		return v;
	if (!m->container)
		return NULL;
	snprintf(buf, n, "%s/%s", m->ns, m->container);
	return buf;
}

/* The default service_name outside a pod: the systemd unit (without
 * ".service") unless the process is in a container, else the executable's name. */
static void host_service(const struct cgroup_info *ci, const char *exe, const char *pcomm, char *buf, size_t n)
{
	const char *base = strrchr(exe, '/');

	if (ci->unit[0] && !ci->container_id[0]) {
		snprintf(buf, n, "%.*s", (int)(strlen(ci->unit) - 8), ci->unit);
		return;
	}
	if (*exe) {
		snprintf(buf, n, "%s", base ? base + 1 : exe);
		return;
	}
	snprintf(buf, n, "%s", pcomm[0] ? pcomm : "unknown");
}

/* Label values become valid UTF-8 without control characters, cut to
 * LABEL_VALUE_MAX bytes; labels with names relabeling made invalid go. */
static int finish(struct labelset *s)
{
	char buf[3 * LABEL_VALUE_MAX + 4];
	int r = 0;

	for (size_t i = s->n; i-- > 0;) {
		const char *v = s->v[i].value;
		size_t len = strlen(v), o;

		if (!label_name_valid(s->v[i].name, strlen(s->v[i].name)) || strlen(s->v[i].name) > LABEL_NAME_MAX) {
			labelset_del(s, s->v[i].name);
			continue;
		}
		if (len > LABEL_VALUE_MAX)
			len = LABEL_VALUE_MAX;
		o = utf8_text(v, len, buf);
		/* A cut in the middle of a character left U+FFFD at the end: fine. */
		if (o != strlen(v) || memcmp(buf, v, o) != 0) {
			char name[LABEL_NAME_MAX + 1];

			snprintf(name, sizeof(name), "%s", s->v[i].name);
			r = labelset_setn(s, name, buf, o);
			if (r < 0)
				return r;
		}
	}
	labelset_sort(s);
	return 0;
}

static int base_labels(const struct discover_opts *o, uint32_t pid, const char *pcomm, const char *exe,
		       const struct cgroup_info *ci, struct labelset *s)
{
	char num[16];
	int r = 0;

	snprintf(num, sizeof(num), "%u", pid);
	r = r ?: labelset_set(s, "__meta_process_pid", num);
	r = r ?: labelset_set(s, "__meta_process_comm", pcomm);
	r = r ?: labelset_set(s, "__meta_process_executable", exe);
	r = r ?: labelset_set(s, "__meta_process_cgroup", ci->path);
	r = r ?: labelset_set(s, "__meta_systemd_unit", ci->unit);
	r = r ?: labelset_set(s, "__meta_container_id", ci->container_id);
	r = r ?: labelset_set(s, "__meta_container_runtime", container_runtime_name(ci->runtime));
	if (o->hostname && *o->hostname)
		r = r ?: labelset_set(s, LABEL_HOST_NAME, o->hostname);
	for (size_t i = 0; r == 0 && i < o->nstatic; i++)
		r = labelset_set(s, o->static_labels[i].name, o->static_labels[i].value);
	return r;
}

/* Kubernetes metadata of a process in a pod's cgroup, into s and id. */
static int pod_identity(const struct discover_opts *o, const struct cgroup_info *ci, struct labelset *s,
			struct identity *id, char *svc, size_t n)
{
	struct kube_meta m;
	const char *ps;
	int r = kube_lookup(o->kube, ci->container_id, ci->pod_uid, &m);

	if (r == -ENOMEM)
		return r;
	if (r == -ENOENT) {
		kube_want_relist(o->kube, ci->container_id);
		return 0;
	}
	id->pod_known = true;
	id->container_known = r == 0;
	id->pod_version = m.version;
	r = kube_labels(s, &m);
	ps = r == 0 ? pod_service(&m, svc, n) : NULL;
	if (ps && ps != svc)
		snprintf(svc, n, "%s", ps);
	else if (!ps)
		svc[0] = 0;
	if (r == 0 && !id->pod_uid[0])
		snprintf(id->pod_uid, sizeof(id->pod_uid), "%s", m.pod_uid);
	kube_meta_free(&m);
	return r;
}

int discover(const struct discover_opts *o, uint32_t pid, uint64_t cgroup_id, const char *pcomm,
	     struct identity *id)
{
	struct labelset s = {};
	struct cgroup_info ci = {};
	char exe[4096] = "", svc[512] = "";
	int r = 0;

	memset(id, 0, sizeof(*id));
	id->keep = true;
	if (pid == 0) {
		snprintf(svc, sizeof(svc), "idle");
	} else {
		executable(o->proc_root, pid, exe, sizeof(exe));
		if (o->cgroups)
			cgroup_cache_lookup(o->cgroups, o->proc_root, pid, cgroup_id, &ci);
		if (!exe[0] && kernel_thread(o->proc_root, pid))
			snprintf(svc, sizeof(svc), "kernel");
	}
	memcpy(id->container_id, ci.container_id, sizeof(id->container_id));
	memcpy(id->pod_uid, ci.pod_uid, sizeof(id->pod_uid));
	r = base_labels(o, pid, pcomm, exe, &ci, &s);
	id->in_pod = o->kube && ci.in_kubepods;
	if (r == 0 && id->in_pod && !svc[0])
		r = pod_identity(o, &ci, &s, id, svc, sizeof(svc));
	/* The cgroup's container id, unless the API server names the container (its
	 * "container" label and the resource's container.id then say it): outside
	 * pods, and in a pod while the server is down or has no status for it yet. */
	if (r == 0 && ci.container_id[0] && !id->container_known)
		r = labelset_set(&s, LABEL_CONTAINER_ID, ci.container_id);
	if (r == 0 && !svc[0])
		host_service(&ci, exe, pcomm, svc, sizeof(svc));
	r = r ?: labelset_set(&s, LABEL_SERVICE_NAME, svc);
	if (r == 0 && o->relabel) {
		r = relabel_apply(o->relabel, &s);
		id->keep = r == 1;
		r = r < 0 ? r : 0;
	}
	if (r == 0 && id->keep) {
		labelset_drop_internal(&s);
		r = finish(&s);
	}
	/* The ids OTLP carries as resource attributes while the labels they
	 * refine are kept: a series without "pod" spans pods, one without
	 * "container" spans containers. */
	if (r == 0 && id->keep && id->pod_known && labelset_get(&s, "pod"))
		r = labelset_set(&id->resource, "k8s.pod.uid", id->pod_uid);
	if (r == 0 && id->keep && id->in_pod && ci.container_id[0] && labelset_get(&s, "container"))
		r = labelset_set(&id->resource, RESOURCE_CONTAINER_ID, ci.container_id);
	if (r < 0) {
		labelset_free(&s);
		identity_free(id);
		return r;
	}
	id->labels = s;
	return 0;
}

uint64_t discover_pod_version(const struct discover_opts *o, const struct identity *id)
{
	if (!o->kube || !id->in_pod)
		return 0;
	return kube_version(o->kube, id->container_id, id->pod_uid);
}
