/* kube_pod.c: Pod JSON to struct kube_pod (only the fields labels need, every one
 * checked and bounded), and the store of this node's pods indexed by UID and container id. */
#include "kube_pod.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "intern.h"

/* The member key of o as a string, or NULL when absent or of another type. */
static const char *str_at(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static struct json_object *obj_at(struct json_object *o, const char *key, json_type type)
{
	struct json_object *v;

	if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, type))
		return NULL;
	return v;
}

/* Printable text (no control characters) of at most max bytes. json-c has
 * already decoded the escapes; a string with an embedded NUL reads short,
 * which is harmless. */
static bool text_ok(const char *s, size_t max)
{
	size_t n = 0;

	if (!s || !*s)
		return false;
	for (; s[n]; n++)
		if ((unsigned char)s[n] < 0x20 || s[n] == 0x7f || n >= max)
			return false;
	return true;
}

static bool is_hex64(const char *s)
{
	for (int i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[64] == 0;
}

bool kube_container_id(const char *s, char out[65])
{
	const char *sep = s ? strstr(s, "://") : NULL;
	const char *id = sep ? sep + 3 : s;

	if (!id || strlen(id) != 64 || !is_hex64(id))
		return false;
	memcpy(out, id, 65);
	return true;
}

void kube_pod_free(struct kube_pod *p)
{
	if (!p)
		return;
	free(p->uid);
	free(p->name);
	free(p->ns);
	free(p->node);
	labelset_free(&p->labels);
	for (size_t i = 0; i < p->ncontainers; i++)
		free(p->containers[i].name);
	free(p->containers);
	free(p->single);
	free(p);
}

static struct kube_container *container_named(struct kube_pod *p, const char *name)
{
	for (size_t i = 0; i < p->ncontainers; i++)
		if (strcmp(p->containers[i].name, name) == 0)
			return &p->containers[i];
	return NULL;
}

/* Adds the containers of a spec list (names) or a status list (names and ids). */
static int add_containers(struct kube_pod *p, struct json_object *arr, bool status)
{
	size_t n = arr ? json_object_array_length(arr) : 0;

	for (size_t i = 0; i < n && p->ncontainers < KUBE_MAX_CONTAINERS; i++) {
		struct json_object *c = json_object_array_get_idx(arr, i);
		const char *name = str_at(c, "name"), *cid = status ? str_at(c, "containerID") : NULL;
		struct kube_container *k;

		if (!text_ok(name, KUBE_MAX_NAME))
			continue;
		k = container_named(p, name);
		if (!k) {
			k = &p->containers[p->ncontainers];
			memset(k, 0, sizeof(*k));
			k->name = strdup(name);
			if (!k->name)
				return -ENOMEM;
			p->ncontainers++;
		}
		if (cid)
			kube_container_id(cid, k->id);
	}
	return 0;
}

static int add_labels(struct kube_pod *p, struct json_object *labels)
{
	if (!labels)
		return 0;
	json_object_object_foreach(labels, key, val)
	{
		const char *v = json_object_is_type(val, json_type_string) ? json_object_get_string(val) : NULL;

		if (p->labels.n >= KUBE_MAX_POD_LABELS)
			break;
		/* Kubernetes allows 317-byte keys and 63-byte values; anything else
		 * did not come from a real API server and is left out. */
		if (!text_ok(key, 317) || !text_ok(v, LABEL_VALUE_MAX))
			continue;
		if (labelset_set(&p->labels, key, v) < 0)
			return -ENOMEM;
	}
	return 0;
}

int kube_pod_from_json(struct json_object *obj, struct kube_pod **ret)
{
	struct json_object *md = obj_at(obj, "metadata", json_type_object), *spec = obj_at(obj, "spec", json_type_object);
	struct json_object *st = obj_at(obj, "status", json_type_object), *regular;
	const char *uid = str_at(md, "uid"), *name = str_at(md, "name"), *ns = str_at(md, "namespace");
	const char *node = str_at(spec, "nodeName");
	struct kube_pod *p;
	int r;

	if (!text_ok(uid, 64 + 1) || !text_ok(name, KUBE_MAX_NAME) || !text_ok(ns, KUBE_MAX_NAME) ||
	    (node && *node && !text_ok(node, KUBE_MAX_NAME)))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->containers = calloc(KUBE_MAX_CONTAINERS, sizeof(*p->containers));
	p->uid = strdup(uid);
	p->name = strdup(name);
	p->ns = strdup(ns);
	p->node = strdup(node ? node : "");
	r = p->containers && p->uid && p->name && p->ns && p->node ? 0 : -ENOMEM;
	if (r == 0)
		r = add_labels(p, obj_at(md, "labels", json_type_object));
	/* Spec first (names of containers not started yet), then the statuses (ids). */
	regular = obj_at(spec, "containers", json_type_array);
	if (r == 0)
		r = add_containers(p, regular, false);
	if (r == 0 && regular && json_object_array_length(regular) == 1 && p->ncontainers == 1 &&
	    !obj_at(spec, "initContainers", json_type_array) && !obj_at(spec, "ephemeralContainers", json_type_array)) {
		p->single = strdup(p->containers[0].name);
		r = p->single ? 0 : -ENOMEM;
	}
	if (r == 0)
		r = add_containers(p, obj_at(spec, "initContainers", json_type_array), false);
	if (r == 0)
		r = add_containers(p, obj_at(st, "initContainerStatuses", json_type_array), true);
	if (r == 0)
		r = add_containers(p, obj_at(st, "containerStatuses", json_type_array), true);
	if (r == 0)
		r = add_containers(p, obj_at(st, "ephemeralContainerStatuses", json_type_array), true);
	if (r < 0) {
		kube_pod_free(p);
		return r;
	}
	/* Give back the room of containers the pod does not have. */
	if (p->ncontainers < KUBE_MAX_CONTAINERS) {
		struct kube_container *c = realloc(p->containers, (p->ncontainers ? p->ncontainers : 1) * sizeof(*c));

		if (c)
			p->containers = c;
	}
	*ret = p;
	return 0;
}

/* ---- the store ---- */

void kube_store_init(struct kube_store *s, uint32_t max_pods)
{
	memset(s, 0, sizeof(*s));
	s->max_pods = max_pods ? max_pods : 4096;
}

void kube_store_free(struct kube_store *s)
{
	for (size_t i = 0; i < s->n; i++)
		kube_pod_free(s->pods[i]);
	free(s->pods);
	u64map_free(&s->by_uid);
	u64map_free(&s->by_cid);
	memset(s, 0, sizeof(*s));
}

static uint64_t key_of(const char *s)
{
	return hash_bytes(s, strlen(s));
}

static ssize_t index_of(const struct u64map *m, const char *key, struct kube_pod *const *pods, bool cid)
{
	uint64_t v;
	const struct kube_pod *p;

	if (!u64map_get(m, key_of(key), &v))
		return -1;
	p = pods[v - 1];
	if (!cid)
		return strcmp(p->uid, key) == 0 ? (ssize_t)(v - 1) : -1;
	for (size_t i = 0; i < p->ncontainers; i++)
		if (strcmp(p->containers[i].id, key) == 0)
			return (ssize_t)(v - 1);
	return -1; /* a 64-bit hash collision, which only a forged id could make: a miss */
}

static void unindex(struct kube_store *s, size_t i)
{
	const struct kube_pod *p = s->pods[i];
	uint64_t v;

	if (u64map_get(&s->by_uid, key_of(p->uid), &v) && v == i + 1)
		u64map_del(&s->by_uid, key_of(p->uid));
	for (size_t c = 0; c < p->ncontainers; c++)
		if (p->containers[c].id[0] && u64map_get(&s->by_cid, key_of(p->containers[c].id), &v) && v == i + 1)
			u64map_del(&s->by_cid, key_of(p->containers[c].id));
}

static int reindex(struct kube_store *s, size_t i)
{
	const struct kube_pod *p = s->pods[i];
	int r = u64map_put(&s->by_uid, key_of(p->uid), i + 1);

	for (size_t c = 0; r == 0 && c < p->ncontainers; c++)
		if (p->containers[c].id[0])
			r = u64map_put(&s->by_cid, key_of(p->containers[c].id), i + 1);
	return r;
}

/* Removes pods[i], moving the last pod into its slot. */
static void remove_at(struct kube_store *s, size_t i)
{
	unindex(s, i);
	kube_pod_free(s->pods[i]);
	s->n--;
	if (i != s->n) {
		unindex(s, s->n);
		s->pods[i] = s->pods[s->n];
		reindex(s, i); /* cannot fail: the maps just lost as many keys */
	}
}

int kube_store_put(struct kube_store *s, struct kube_pod *p)
{
	ssize_t i = index_of(&s->by_uid, p->uid, s->pods, false);
	int r;

	p->version = ++s->generation;
	if (i >= 0) {
		unindex(s, (size_t)i);
		kube_pod_free(s->pods[i]);
		s->pods[i] = p;
		return reindex(s, (size_t)i);
	}
	if (kube_store_live(s) >= s->max_pods) {
		s->rejected++;
		kube_pod_free(p);
		return -ENOSPC;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct kube_pod **np = realloc(s->pods, cap * sizeof(*np));

		if (!np) {
			kube_pod_free(p);
			return -ENOMEM;
		}
		s->pods = np;
		s->cap = cap;
	}
	s->pods[s->n++] = p;
	r = reindex(s, s->n - 1);
	if (r < 0)
		remove_at(s, s->n - 1);
	return r;
}

void kube_store_delete(struct kube_store *s, const char *uid)
{
	ssize_t i = index_of(&s->by_uid, uid, s->pods, false);

	if (i >= 0 && !s->pods[i]->deleted) {
		s->pods[i]->deleted = true;
		s->pods[i]->version = ++s->generation;
	}
}

int kube_store_replace(struct kube_store *s, struct kube_pod **pods, size_t n)
{
	struct u64map listed = {};
	int r = 0;

	for (size_t i = 0; i < n && r == 0; i++)
		r = u64map_put(&listed, key_of(pods[i]->uid), 1);
	for (size_t i = 0; i < s->n && r == 0; i++)
		if (!s->pods[i]->deleted && !u64map_get(&listed, key_of(s->pods[i]->uid), NULL)) {
			s->pods[i]->deleted = true;
			s->pods[i]->version = ++s->generation;
		}
	u64map_free(&listed);
	for (size_t i = 0; i < n; i++) {
		if (r < 0) {
			kube_pod_free(pods[i]);
			continue;
		}
		if (kube_store_put(s, pods[i]) == -ENOMEM)
			r = -ENOMEM;
	}
	return r;
}

const struct kube_pod *kube_store_by_uid(const struct kube_store *s, const char *uid)
{
	ssize_t i = index_of(&s->by_uid, uid, s->pods, false);

	return i >= 0 ? s->pods[i] : NULL;
}

const struct kube_pod *kube_store_by_container(const struct kube_store *s, const char *cid)
{
	ssize_t i = index_of(&s->by_cid, cid, s->pods, true);

	return i >= 0 ? s->pods[i] : NULL;
}

size_t kube_store_gc(struct kube_store *s, bool (*in_use)(void *ctx, const char *cid), void *ctx)
{
	size_t freed = 0;

	for (size_t i = s->n; i-- > 0;) {
		const struct kube_pod *p = s->pods[i];
		bool used = false;

		if (!p->deleted)
			continue;
		for (size_t c = 0; c < p->ncontainers && !used; c++)
			used = p->containers[c].id[0] && in_use && in_use(ctx, p->containers[c].id);
		if (used)
			continue;
		remove_at(s, i);
		freed++;
	}
	if (freed)
		s->generation++;
	return freed;
}

size_t kube_store_live(const struct kube_store *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->n; i++)
		n += !s->pods[i]->deleted;
	return n;
}

size_t kube_store_mem_bytes(const struct kube_store *s)
{
	size_t b = s->cap * sizeof(*s->pods) + u64map_mem_bytes(&s->by_uid) + u64map_mem_bytes(&s->by_cid);

	for (size_t i = 0; i < s->n; i++) {
		const struct kube_pod *p = s->pods[i];

		b += sizeof(*p) + strlen(p->uid) + strlen(p->name) + strlen(p->ns) + strlen(p->node) + 4 +
		     labelset_mem_bytes(&p->labels) + p->ncontainers * sizeof(*p->containers);
		for (size_t c = 0; c < p->ncontainers; c++)
			b += strlen(p->containers[c].name) + 1;
	}
	return b;
}
