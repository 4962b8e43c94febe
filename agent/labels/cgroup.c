/* cgroup.c: reads container ids, pod UIDs and systemd units out of cgroup paths
 * in the shapes containerd, CRI-O, Docker, Podman and the kubelet make (systemd and cgroupfs drivers). */
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "array_size.h"
#include "u64map.h"

static const struct {
	const char *prefix;
	enum container_runtime rt;
} scope_shapes[] = {
	{ "cri-containerd-", RUNTIME_CONTAINERD },
	{ "crio-", RUNTIME_CRIO },
	{ "docker-", RUNTIME_DOCKER },
	{ "libpod-", RUNTIME_PODMAN },
};

const char *container_runtime_name(enum container_runtime r)
{
	switch (r) {
	case RUNTIME_CONTAINERD: return "containerd";
	case RUNTIME_CRIO: return "cri-o";
	case RUNTIME_DOCKER: return "docker";
	case RUNTIME_PODMAN: return "podman";
	case RUNTIME_CRI: return "cri";
	default: return "";
	}
}

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static bool starts(const char *c, size_t n, const char *prefix)
{
	size_t p = strlen(prefix);

	return n >= p && memcmp(c, prefix, p) == 0;
}

static bool ends(const char *c, size_t n, const char *suffix)
{
	size_t s = strlen(suffix);

	return n >= s && memcmp(c + n - s, suffix, s) == 0;
}

/* A pod UID of 36 characters, with '-' (cgroupfs) or '_' (systemd slices) between
 * the groups 8-4-4-4-12 of lowercase hex. Writes the dashed form. */
static bool pod_uid(const char *s, size_t n, char *out)
{
	if (n != POD_UID_LEN)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool sep = i == 8 || i == 13 || i == 18 || i == 23;

		if (sep ? (s[i] != '-' && s[i] != '_') : !is_hex(s + i, 1))
			return false;
		out[i] = sep ? '-' : s[i];
	}
	out[n] = 0;
	return true;
}

/* One path component c[0..n); prev is the component before it (or NULL). */
static void component(const char *c, size_t n, const char *prev, size_t pn, struct cgroup_info *ci, bool *kube,
		      bool *user)
{
	size_t idlen = CONTAINER_ID_LEN;

	if (starts(c, n, "kubepods"))
		*kube = true;
	if ((n == 10 && memcmp(c, "user.slice", 10) == 0) || starts(c, n, "user@"))
		*user = true;
	/* The systemd driver: kubepods[-<qos>]-pod<uid>.slice. */
	if (starts(c, n, "kubepods") && ends(c, n, ".slice") && n > 6 + 3 + POD_UID_LEN &&
	    memcmp(c + n - 6 - POD_UID_LEN - 3, "pod", 3) == 0)
		pod_uid(c + n - 6 - POD_UID_LEN, POD_UID_LEN, ci->pod_uid);
	/* The cgroupfs driver: /kubepods[/<qos>]/pod<uid>. */
	if (*kube && n == 3 + POD_UID_LEN && starts(c, n, "pod"))
		pod_uid(c + 3, POD_UID_LEN, ci->pod_uid);
	/* A cgroupsPath left as written ("<slice>:<prefix>:<id>"), seen under
	 * containerd.service on some v1 hosts with the systemd driver: the slice
	 * gives the pod, "<prefix>-<id>" the container. */
	if (n > idlen + 2 && c[n - idlen - 1] == ':' && is_hex(c + n - idlen, idlen)) {
		const char *c1 = memchr(c, ':', n - idlen - 1);
		char full[CONTAINER_ID_LEN + 40];
		size_t sl;

		if (c1) {
			sl = (size_t)(c + n - idlen - 1 - (c1 + 1));
			component(c, (size_t)(c1 - c), prev, pn, ci, kube, user);
			if (sl < 24) {
				snprintf(full, sizeof(full), "%.*s-%.*s", (int)sl, c1 + 1, (int)idlen, c + n - idlen);
				component(full, strlen(full), prev, pn, ci, kube, user);
			}
			return;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(scope_shapes); i++) {
		size_t pl = strlen(scope_shapes[i].prefix), rest;

		if (!starts(c, n, scope_shapes[i].prefix))
			continue;
		rest = n - pl;
		if (rest == idlen + 6 && ends(c, n, ".scope"))
			rest -= 6;
		if (rest == idlen && is_hex(c + pl, idlen)) {
			memcpy(ci->container_id, c + pl, idlen);
			ci->container_id[idlen] = 0;
			ci->runtime = scope_shapes[i].rt;
		}
		return;
	}
	/* The cgroupfs shapes: a bare id under /docker or under a kubepods pod. */
	if (n == idlen && is_hex(c, idlen) && prev) {
		if (pn == 6 && memcmp(prev, "docker", 6) == 0)
			ci->runtime = RUNTIME_DOCKER;
		else if (*kube && pn == 3 + POD_UID_LEN && starts(prev, pn, "pod"))
			ci->runtime = RUNTIME_CRI;
		else
			return;
		memcpy(ci->container_id, c, idlen);
		ci->container_id[idlen] = 0;
	}
}

/* Walks the components of path[0..len): the innermost match of each kind wins. */
static void parse_path(const char *path, size_t len, struct cgroup_info *ci)
{
	const char *p = path, *end = path + len, *prev = NULL;
	size_t pn = 0;
	bool kube = false, user = false;

	while (p < end) {
		const char *c = p;
		size_t n;

		while (p < end && *p != '/')
			p++;
		n = (size_t)(p - c);
		if (n) {
			component(c, n, prev, pn, ci, &kube, &user);
			if (n > 8 && ends(c, n, ".service") && n < sizeof(ci->unit)) {
				memcpy(ci->unit, c, n);
				ci->unit[n] = 0;
			}
			prev = c;
			pn = n;
		}
		if (p < end)
			p++;
	}
	ci->in_kubepods = kube && !user && ci->container_id[0];
}

static void set_path(struct cgroup_info *ci, const char *path, size_t len)
{
	if (len >= sizeof(ci->path))
		len = sizeof(ci->path) - 1;
	memcpy(ci->path, path, len);
	ci->path[len] = 0;
}

/* One line of /proc/PID/cgroup: "hierarchy-id:controllers:path". */
struct cg_line {
	const char *id, *ctrl, *path;
	size_t idlen, ctrllen, pathlen;
};

#define MAX_LINES 64 /* hierarchies in /proc/PID/cgroup (about 13 on a hybrid host) */

/* The lines of text that have the "id:controllers:path" shape, up to max. */
static size_t split_lines(const char *text, struct cg_line *out, size_t max)
{
	size_t n = 0;

	for (const char *line = text; line && *line && n < max;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		const char *c1 = memchr(line, ':', len), *c2 = NULL;

		if (c1)
			c2 = memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line));
		if (c2)
			out[n++] = (struct cg_line){
				.id = line, .idlen = (size_t)(c1 - line),
				.ctrl = c1 + 1, .ctrllen = (size_t)(c2 - c1 - 1),
				.path = c2 + 1, .pathlen = len - (size_t)(c2 + 1 - line),
			};
		line = nl ? nl + 1 : NULL;
	}
	return n;
}

static bool is_v2(const struct cg_line *l)
{
	return l->idlen == 1 && l->id[0] == '0' && l->ctrllen == 0;
}

static bool is_systemd(const struct cg_line *l)
{
	return l->ctrllen == 12 && memcmp(l->ctrl, "name=systemd", 12) == 0;
}

void cgroup_parse(const char *text, struct cgroup_info *ret)
{
	struct cg_line lines[MAX_LINES];
	size_t n = split_lines(text, lines, MAX_LINES);
	struct cgroup_info ci;

	memset(ret, 0, sizeof(*ret));
	/* The v2 path is the process's cgroup, whatever it holds. */
	for (size_t i = 0; i < n; i++)
		if (is_v2(&lines[i])) {
			parse_path(lines[i].path, lines[i].pathlen, ret);
			set_path(ret, lines[i].path, lines[i].pathlen);
			break;
		}
	/* Hybrid and v1 hosts: a container on a v1 hierarchy, name=systemd first
	 * (it holds the whole tree), then the controllers. */
	for (int pass = 0; pass < 2 && !ret->container_id[0]; pass++)
		for (size_t i = 0; i < n; i++) {
			if (is_v2(&lines[i]) || is_systemd(&lines[i]) != (pass == 0))
				continue;
			memset(&ci, 0, sizeof(ci));
			parse_path(lines[i].path, lines[i].pathlen, &ci);
			if (!ret->unit[0] && ci.unit[0])
				memcpy(ret->unit, ci.unit, sizeof(ci.unit));
			if (!ci.container_id[0])
				continue;
			memcpy(ret->container_id, ci.container_id, sizeof(ci.container_id));
			memcpy(ret->pod_uid, ci.pod_uid, sizeof(ci.pod_uid));
			ret->runtime = ci.runtime;
			ret->in_kubepods = ci.in_kubepods;
			ret->from_v1 = true;
			set_path(ret, lines[i].path, lines[i].pathlen);
			break;
		}
	/* A v1-only host: the path of name=systemd. */
	for (size_t i = 0; i < n && !ret->path[0]; i++)
		if (is_systemd(&lines[i]))
			set_path(ret, lines[i].path, lines[i].pathlen);
}

/* ---- the cache ---- */

/* A cgroup_info without its fixed buffers: the cache holds thousands. */
struct entry {
	char *path, *unit;
	char container_id[CONTAINER_ID_LEN + 1];
	char pod_uid[POD_UID_LEN + 1];
	uint8_t runtime;
	bool in_kubepods;
};

struct cgroup_cache {
	struct u64map map; /* cgroup id -> struct entry * */
	uint32_t max;
	size_t bytes;
};

int cgroup_cache_new(uint32_t max_entries, struct cgroup_cache **ret)
{
	struct cgroup_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->max = max_entries ? max_entries : 4096;
	*ret = c;
	return 0;
}

static void cache_clear(struct cgroup_cache *c)
{
	uint32_t pos = 0;
	uint64_t k, v;

	while (u64map_next(&c->map, &pos, &k, &v)) {
		struct entry *e = (struct entry *)(uintptr_t)v;

		free(e->path);
		free(e->unit);
		free(e);
	}
	u64map_free(&c->map);
	c->bytes = 0;
}

void cgroup_cache_free(struct cgroup_cache *c)
{
	if (!c)
		return;
	cache_clear(c);
	free(c);
}

/* Reads a small /proc file whole (bounded). */
static int read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;

	if (fd < 0)
		return -errno;
	while (len + 1 < size) {
		ssize_t r = read(fd, buf + len, size - 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	buf[len] = 0;
	return (int)len;
}

static void from_entry(const struct entry *e, struct cgroup_info *ret)
{
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->path, sizeof(ret->path), "%s", e->path);
	snprintf(ret->unit, sizeof(ret->unit), "%s", e->unit);
	memcpy(ret->container_id, e->container_id, sizeof(e->container_id));
	memcpy(ret->pod_uid, e->pod_uid, sizeof(e->pod_uid));
	ret->runtime = (enum container_runtime)e->runtime;
	ret->in_kubepods = e->in_kubepods;
}

static void cache_put(struct cgroup_cache *c, uint64_t id, const struct cgroup_info *ci)
{
	struct entry *e = calloc(1, sizeof(*e));

	if (!e)
		return; /* only the cache misses out */
	e->path = strdup(ci->path);
	e->unit = strdup(ci->unit);
	memcpy(e->container_id, ci->container_id, sizeof(e->container_id));
	memcpy(e->pod_uid, ci->pod_uid, sizeof(e->pod_uid));
	e->runtime = (uint8_t)ci->runtime;
	e->in_kubepods = ci->in_kubepods;
	if (!e->path || !e->unit || u64map_put(&c->map, id, (uint64_t)(uintptr_t)e) < 0) {
		free(e->path);
		free(e->unit);
		free(e);
		return;
	}
	c->bytes += sizeof(*e) + strlen(e->path) + strlen(e->unit) + 2;
}

int cgroup_cache_lookup(struct cgroup_cache *c, const char *proc_root, uint32_t pid, uint64_t cgroup_id,
			struct cgroup_info *ret)
{
	char path[128], text[8192];
	uint64_t v;
	int r;

	if (cgroup_id && u64map_get(&c->map, cgroup_id, &v)) {
		from_entry((const struct entry *)(uintptr_t)v, ret);
		return 0;
	}
	snprintf(path, sizeof(path), "%s/%u/cgroup", proc_root, pid);
	r = read_small(path, text, sizeof(text));
	if (r < 0) {
		memset(ret, 0, sizeof(*ret));
		return -ENOENT;
	}
	cgroup_parse(text, ret);
	/* Cached by the v2 id only when the v2 path names a container: every process
	 * of that cgroup is then in it. Otherwise (no container, or one on a v1
	 * hierarchy of a hybrid host) other processes of the same v2 cgroup may be in
	 * other containers, so each process reads its own file. */
	if (!cgroup_id || ret->from_v1 || !ret->container_id[0])
		return 0;
	if (c->map.count >= c->max)
		cache_clear(c);
	cache_put(c, cgroup_id, ret);
	return 0;
}

size_t cgroup_cache_mem_bytes(const struct cgroup_cache *c)
{
	return u64map_mem_bytes(&c->map) + c->bytes;
}
