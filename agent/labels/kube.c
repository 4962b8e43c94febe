/* kube.c: lists this node's pods from the Kubernetes API server, then keeps them
 * current with one watch (resourceVersion, bookmarks, backoff, relist on 410 Gone). */
#include "kube.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "clock.h"
#include "intern.h"
#include "kube_http.h"
#include "kube_pod.h"
#include "log.h"
#include "url.h"

#define LIST_PAGE       100          /* pods per list request: bounds the JSON held at once */
#define LIST_BODY_MAX   (64u << 20)  /* bytes of one list page */
#define EVENT_MAX       (4u << 20)   /* bytes of one watch event line */
#define BACKOFF_MIN_MS  1000
#define BACKOFF_MAX_MS  30000
#define LIST_TIMEOUT_MS 60000
#define ASKED_MAX       4096         /* container ids remembered as having asked for a relist */

/* How a watch ended. */
enum watch_end { W_CLOSED, W_GONE, W_ERROR, W_STOP, W_RELIST };

struct kube {
	struct kube_opts o;     /* strings owned */
	pthread_t thread;
	bool running;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* Under lock. */
	struct kube_store store;
	struct kube_stats st;
	struct u64map asked;
	uint64_t last_relist_ns;
	bool listed;
	/* Atomics: read by the transfer's progress callback. */
	int stop, relist_wanted;
	/* The thread's own. */
	struct kube_http *http;
	bool failing;           /* in an outage (read by the sampling side under lock via st) */
	char *rv;               /* resourceVersion the watch resumes from */
	bool watching;          /* the transfer is a watch */
	enum watch_end wend;
	bool watch_started;     /* the watch got its 200 answer */
	uint64_t watch_events;
	uint64_t last_list_ns;  /* when the last list succeeded */
	char why[256];
};

static bool flag(const int *f)
{
	return __atomic_load_n(f, __ATOMIC_RELAXED) != 0;
}

static void set_flag(int *f, int v)
{
	__atomic_store_n(f, v, __ATOMIC_RELAXED);
}

/* ---- outages ---- */

static void failed(struct kube *k)
{
	pthread_mutex_lock(&k->lock);
	k->st.errors++;
	if (!k->failing) {
		k->failing = true;
		k->st.outages++;
		log_warn("Kubernetes API server %s: %s; processes get their pod labels once it answers (retrying with "
			 "backoff; see prowl_kubernetes_errors_total)", k->o.api_url, k->why);
	} else {
		log_debug("Kubernetes API server %s: %s", k->o.api_url, k->why);
	}
	k->st.synced = false;
	pthread_mutex_unlock(&k->lock);
}

static void succeeded(struct kube *k)
{
	pthread_mutex_lock(&k->lock);
	if (k->failing)
		log_info("Kubernetes API server %s answers again: %zu pods on node %s", k->o.api_url,
			 kube_store_live(&k->store), k->o.node_name);
	else if (!k->listed)
		log_info("Kubernetes: %zu pods on node %s", kube_store_live(&k->store), k->o.node_name);
	k->failing = false;
	k->listed = true;
	k->st.synced = true;
	pthread_mutex_unlock(&k->lock);
}

static bool relist_due_locked(struct kube *k);

/* Waits ms, or less when stopped or (wake_on_relist) when a relist is due. */
static void nap(struct kube *k, uint64_t ms, bool wake_on_relist)
{
	uint64_t until = clock_mono_ns() + ms * 1000000ull;
	struct timespec ts = { .tv_sec = (time_t)(until / NSEC_PER_SEC), .tv_nsec = (long)(until % NSEC_PER_SEC) };

	pthread_mutex_lock(&k->lock);
	while (!flag(&k->stop) && clock_mono_ns() < until && !(wake_on_relist && relist_due_locked(k)))
		if (pthread_cond_timedwait(&k->cond, &k->lock, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&k->lock);
}

static uint64_t backoff_ms(unsigned int failures)
{
	uint64_t ms = BACKOFF_MIN_MS;
	uint32_t r = 0;

	for (unsigned int i = 1; i < failures && ms < BACKOFF_MAX_MS; i++)
		ms *= 2;
	if (ms > BACKOFF_MAX_MS)
		ms = BACKOFF_MAX_MS;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint32_t)clock_mono_ns();
	return ms * 4 / 5 + r % (ms * 2 / 5 + 1); /* +-20% so agents do not march in step */
}

/* ---- the watch ---- */

static void set_rv(struct kube *k, const char *rv)
{
	char *c;

	if (!rv || !*rv || strlen(rv) > 128)
		return;
	c = strdup(rv);
	if (!c)
		return;
	free(k->rv);
	k->rv = c;
}

/* One watch event line: applies it to the store. */
/* One watch event line: applies it to the store. Returns false when it ends the watch. */
static bool watch_event(void *ctx, const char *line, size_t len)
{
	struct kube *k = ctx;
	struct json_object *ev = kube_json_parse(line, len), *obj;
	const char *type;
	struct kube_pod *p = NULL;

	if (!ev || !json_object_is_type(ev, json_type_object) || !(type = kube_json_str(ev, "type", NULL)) ||
	    !json_object_object_get_ex(ev, "object", &obj) || !json_object_is_type(obj, json_type_object)) {
		log_debug("Kubernetes watch: ignoring an event that is not {type, object}");
		json_object_put(ev);
		return true;
	}
	k->watch_events++;
	if (strcmp(type, "ERROR") == 0) {
		struct json_object *code;
		int c = json_object_object_get_ex(obj, "code", &code) ? json_object_get_int(code) : 0;
		const char *msg = kube_json_str(obj, "message", NULL);

		k->wend = c == 410 ? W_GONE : W_ERROR;
		snprintf(k->why, sizeof(k->why), "watch error %d: %.160s", c, msg ? msg : "");
	} else if (strcmp(type, "BOOKMARK") == 0) {
		set_rv(k, kube_json_str(obj, "metadata", "resourceVersion"));
	} else if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0 || strcmp(type, "DELETED") == 0) {
		const char *node = kube_json_str(obj, "spec", "nodeName");
		int r = kube_pod_from_json(obj, &p);

		set_rv(k, kube_json_str(obj, "metadata", "resourceVersion"));
		if (r < 0 || (node && strcmp(node, k->o.node_name) != 0)) {
			kube_pod_free(p);
			log_debug("Kubernetes watch: ignoring a %s event of a pod it cannot use", type);
		} else {
			pthread_mutex_lock(&k->lock);
			k->st.events++;
			if (type[0] == 'D') {
				kube_store_delete(&k->store, p->uid);
				kube_pod_free(p);
			} else if (kube_store_put(&k->store, p) == -ENOSPC && k->store.rejected == 1) {
				log_warn("more than %u pods on node %s: the others get no pod labels", k->store.max_pods,
					 k->o.node_name);
			}
			pthread_mutex_unlock(&k->lock);
		}
	}
	json_object_put(ev);
	return k->wend == W_CLOSED;
}

/* Whether a relist was asked for and the rate limit allows it now; under lock. */
static bool relist_due_locked(struct kube *k)
{
	uint64_t interval = (uint64_t)k->o.relist_interval_ms * 1000000ull;

	return flag(&k->relist_wanted) && (!k->last_relist_ns || clock_mono_ns() >= k->last_relist_ns + interval);
}

static bool relist_due(struct kube *k)
{
	bool due;

	if (!flag(&k->relist_wanted))
		return false;
	pthread_mutex_lock(&k->lock);
	due = relist_due_locked(k);
	pthread_mutex_unlock(&k->lock);
	return due;
}

/* Every second of a transfer: a watch that answers 200 ends an outage right
 * away (not when it closes); a stop or a due relist aborts. */
static bool tick(void *ctx, long status)
{
	struct kube *k = ctx;

	if (k->watching && !k->watch_started && status == 200) {
		k->watch_started = true;
		if (k->failing)
			succeeded(k);
	}
	if (flag(&k->stop)) {
		k->wend = W_STOP;
		return true;
	}
	if (k->watching && relist_due(k)) {
		k->wend = W_RELIST;
		return true;
	}
	return false;
}

/* GET path; counts the request and the bytes. */
static int get(struct kube *k, const char *path, struct kube_get *g)
{
	int r;

	g->tick = tick;
	g->ctx = k;
	k->why[0] = 0;
	pthread_mutex_lock(&k->lock);
	if (g->line)
		k->st.watch_requests++;
	else
		k->st.list_requests++;
	pthread_mutex_unlock(&k->lock);
	r = kube_http_get(k->http, path, g);
	pthread_mutex_lock(&k->lock);
	k->st.bytes += g->bytes;
	pthread_mutex_unlock(&k->lock);
	if (g->why[0] && !k->why[0])
		snprintf(k->why, sizeof(k->why), "%s", g->why);
	return r;
}

/* Lists the node's pods page by page and replaces the store with them. */
static int list_pods(struct kube *k)
{
	struct kube_pod **pods = NULL;
	size_t n = 0, cap = 0;
	char *node = url_escape(k->o.node_name), *cont = NULL, *path = NULL;
	int r = node ? 0 : -ENOMEM;

	pthread_mutex_lock(&k->lock);
	k->last_relist_ns = clock_mono_ns(); /* attempts count for the rate limit */
	pthread_mutex_unlock(&k->lock);
	free(k->rv);
	k->rv = NULL;
	for (int page = 0; r == 0; page++) {
		struct json_object *doc, *items;
		struct kube_get g;
		const char *next;

		free(path);
		path = NULL;
		if (asprintf(&path, "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s&limit=%d%s%s", node, LIST_PAGE,
			     cont ? "&continue=" : "", cont ? cont : "") < 0) {
			path = NULL;
			r = -ENOMEM;
			break;
		}
		g = (struct kube_get){ .max = LIST_BODY_MAX, .timeout_ms = LIST_TIMEOUT_MS };
		k->watching = false;
		r = get(k, path, &g);
		if (r == 1)
			r = -ECANCELED; /* only a stop ends a list early */
		if (r < 0)
			break;
		doc = kube_json_parse(g.body, g.len);
		free(g.body);
		if (!doc || !json_object_object_get_ex(doc, "items", &items) || !json_object_is_type(items, json_type_array)) {
			snprintf(k->why, sizeof(k->why), "the pod list is not a PodList (JSON with items[], at most %d levels deep)",
				KUBE_JSON_DEPTH);
			json_object_put(doc);
			r = -EIO;
			break;
		}
		for (size_t i = 0; i < json_object_array_length(items) && r == 0; i++) {
			struct kube_pod *p;
			int pr = kube_pod_from_json(json_object_array_get_idx(items, i), &p);

			if (pr == -EINVAL)
				continue;
			if (pr < 0) {
				r = pr;
				break;
			}
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 128;
				struct kube_pod **np = realloc(pods, nc * sizeof(*np));

				if (!np) {
					kube_pod_free(p);
					r = -ENOMEM;
					break;
				}
				pods = np;
				cap = nc;
			}
			pods[n++] = p;
		}
		set_rv(k, kube_json_str(doc, "metadata", "resourceVersion"));
		next = kube_json_str(doc, "metadata", "continue");
		free(cont);
		cont = next && *next ? url_escape(next) : NULL;
		json_object_put(doc);
		if (!cont)
			break;
	}
	if (r == 0 && !k->rv) {
		snprintf(k->why, sizeof(k->why), "the pod list has no metadata.resourceVersion to watch from");
		r = -EIO;
	}
	if (r == 0) {
		pthread_mutex_lock(&k->lock);
		r = kube_store_replace(&k->store, pods, n);
		set_flag(&k->relist_wanted, 0);
		k->st.relists++;
		pthread_mutex_unlock(&k->lock);
	} else {
		for (size_t i = 0; i < n; i++)
			kube_pod_free(pods[i]);
	}
	free(pods);
	free(path);
	free(cont);
	free(node);
	return r;
}

static enum watch_end watch_pods(struct kube *k)
{
	char *node = url_escape(k->o.node_name), *path = NULL;
	uint32_t timeout = k->o.watch_timeout_s, r32 = 0;
	struct kube_get g;
	int r;

	if (!timeout) {
		if (getrandom(&r32, sizeof(r32), GRND_NONBLOCK) != sizeof(r32))
			r32 = (uint32_t)clock_mono_ns();
		timeout = 300 + r32 % 300;
	}
	if (!node || asprintf(&path, "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s&watch=1&allowWatchBookmarks=true"
				     "&resourceVersion=%s&timeoutSeconds=%u", node, k->rv, timeout) < 0) {
		free(node);
		snprintf(k->why, sizeof(k->why), "out of memory");
		return W_ERROR;
	}
	g = (struct kube_get){ .max = EVENT_MAX, .timeout_ms = ((long)timeout + 60) * 1000, .line = watch_event };
	k->watching = true;
	k->wend = W_CLOSED;
	k->watch_started = false;
	k->watch_events = 0;
	r = get(k, path, &g);
	free(path);
	free(node);
	if (r == -ESTALE)
		return W_GONE;
	if (r < 0)
		return W_ERROR;
	return k->wend;
}

static void *kube_thread(void *arg)
{
	struct kube *k = arg;
	unsigned int failures = 0;
	bool need_list = true;

	while (!flag(&k->stop)) {
		enum watch_end end;

		if (need_list || relist_due(k)) {
			int r = list_pods(k);

			if (r == -ECANCELED || flag(&k->stop))
				break;
			if (r < 0) {
				if (r == -ENOMEM)
					snprintf(k->why, sizeof(k->why), "out of memory");
				failed(k);
				nap(k, backoff_ms(++failures), false);
				continue;
			}
			need_list = false;
			failures = 0;
			k->last_list_ns = clock_mono_ns();
			succeeded(k);
		}
		end = watch_pods(k);
		switch (end) {
		case W_STOP:
			break;
		case W_GONE:
			/* The resourceVersion is too old: start over with a list, but not in
			 * a loop when the server says so of a version it just listed. */
			need_list = true;
			if (clock_mono_ns() - k->last_list_ns < NSEC_PER_SEC) {
				failed(k);
				nap(k, backoff_ms(++failures), false);
			} else {
				log_debug("Kubernetes watch: %s; listing again", k->why);
			}
			break;
		case W_RELIST:
			break; /* relist_due() holds: the loop lists */
		case W_ERROR:
			failed(k);
			nap(k, backoff_ms(++failures), false);
			break;
		case W_CLOSED:
			/* The server's timeout: resume at once, unless it closes at once. */
			if (k->watch_events) {
				failures = 0;
				if (k->failing)
					succeeded(k);
			} else {
				nap(k, failures ? backoff_ms(failures) : 200, true);
			}
			break;
		}
	}
	return NULL;
}

/* ---- the sampling side ---- */

int kube_start(const struct kube_opts *o, struct kube **ret)
{
	struct kube_http_opts ho = { .api_url = o->api_url, .token_file = o->token_file, .ca_file = o->ca_file };
	struct kube *k = calloc(1, sizeof(*k));
	pthread_condattr_t ca;
	int r;

	if (!k)
		return -ENOMEM;
	k->o = *o;
	k->o.api_url = strdup(o->api_url);
	k->o.node_name = strdup(o->node_name);
	k->o.token_file = NULL;
	k->o.ca_file = NULL;
	if (!k->o.relist_interval_ms)
		k->o.relist_interval_ms = 10000;
	kube_store_init(&k->store, o->max_pods);
	pthread_mutex_init(&k->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->cond, &ca);
	pthread_condattr_destroy(&ca);
	r = kube_http_new(&ho, &k->http);
	if (r == 0 && (!k->o.api_url || !k->o.node_name))
		r = -ENOMEM;
	if (r == 0) {
		r = -pthread_create(&k->thread, NULL, kube_thread, k);
		k->running = r == 0;
	}
	if (r < 0) {
		kube_stop(k);
		return r;
	}
	*ret = k;
	return 0;
}

void kube_stop(struct kube *k)
{
	if (!k)
		return;
	if (k->running) {
		pthread_mutex_lock(&k->lock);
		set_flag(&k->stop, 1);
		pthread_cond_broadcast(&k->cond);
		pthread_mutex_unlock(&k->lock);
		pthread_join(k->thread, NULL);
	}
	kube_http_free(k->http);
	kube_store_free(&k->store);
	u64map_free(&k->asked);
	pthread_cond_destroy(&k->cond);
	pthread_mutex_destroy(&k->lock);
	free(k->rv);
	free((char *)k->o.api_url);
	free((char *)k->o.node_name);
	free(k);
}

void kube_meta_free(struct kube_meta *m)
{
	free(m->ns);
	free(m->pod);
	free(m->pod_uid);
	free(m->node);
	free(m->container);
	labelset_free(&m->labels);
	memset(m, 0, sizeof(*m));
}

static int copy_meta(const struct kube_pod *p, const char *container, struct kube_meta *m)
{
	m->ns = strdup(p->ns);
	m->pod = strdup(p->name);
	m->pod_uid = strdup(p->uid);
	m->node = strdup(p->node);
	m->container = container ? strdup(container) : NULL;
	m->version = p->version;
	if (!m->ns || !m->pod || !m->pod_uid || !m->node || (container && !m->container) ||
	    labelset_copy(&m->labels, &p->labels) < 0) {
		kube_meta_free(m);
		return -ENOMEM;
	}
	return 0;
}

/* The pod of container cid, else of pod_uid, and the container's name; under lock.
 * The pod in the cgroup path must be the one the API names for the container:
 * a process cannot borrow another pod's labels. */
static const struct kube_pod *find_locked(struct kube *k, const char *cid, const char *pod_uid, const char **ret_name)
{
	const struct kube_pod *p = cid && *cid ? kube_store_by_container(&k->store, cid) : NULL;

	*ret_name = NULL;
	if (p && pod_uid && *pod_uid && strcmp(p->uid, pod_uid) != 0)
		p = NULL;
	if (p) {
		for (size_t i = 0; i < p->ncontainers && !*ret_name; i++)
			if (strcmp(p->containers[i].id, cid) == 0)
				*ret_name = p->containers[i].name;
		return p;
	}
	p = pod_uid && *pod_uid ? kube_store_by_uid(&k->store, pod_uid) : NULL;
	*ret_name = p ? p->single : NULL;
	return p;
}

int kube_lookup(struct kube *k, const char *cid, const char *pod_uid, struct kube_meta *meta)
{
	const struct kube_pod *p;
	const char *container;
	int r = -ENOENT;

	memset(meta, 0, sizeof(*meta));
	pthread_mutex_lock(&k->lock);
	p = find_locked(k, cid, pod_uid, &container);
	if (p)
		r = copy_meta(p, container, meta) < 0 ? -ENOMEM : container ? 0 : 1;
	pthread_mutex_unlock(&k->lock);
	return r;
}

uint64_t kube_version(struct kube *k, const char *cid, const char *pod_uid)
{
	const struct kube_pod *p;
	const char *container;
	uint64_t v;

	pthread_mutex_lock(&k->lock);
	p = find_locked(k, cid, pod_uid, &container);
	v = p ? p->version : 0;
	pthread_mutex_unlock(&k->lock);
	return v;
}

void kube_want_relist(struct kube *k, const char *cid)
{
	uint64_t h = cid ? hash_bytes(cid, strlen(cid)) : 0;

	pthread_mutex_lock(&k->lock);
	if (!u64map_get(&k->asked, h, NULL)) {
		if (k->asked.count >= ASKED_MAX)
			u64map_free(&k->asked);
		u64map_put(&k->asked, h, 1);
		set_flag(&k->relist_wanted, 1);
		pthread_cond_broadcast(&k->cond);
	}
	pthread_mutex_unlock(&k->lock);
}

uint64_t kube_generation(struct kube *k)
{
	uint64_t g;

	pthread_mutex_lock(&k->lock);
	g = k->store.generation;
	pthread_mutex_unlock(&k->lock);
	return g;
}

void kube_gc(struct kube *k, bool (*in_use)(void *ctx, const char *cid), void *ctx)
{
	pthread_mutex_lock(&k->lock);
	kube_store_gc(&k->store, in_use, ctx);
	pthread_mutex_unlock(&k->lock);
}

void kube_get_stats(struct kube *k, struct kube_stats *ret)
{
	pthread_mutex_lock(&k->lock);
	*ret = k->st;
	ret->pods = (uint32_t)kube_store_live(&k->store);
	ret->deleted_pods = (uint32_t)(k->store.n - ret->pods);
	ret->pods_rejected = k->store.rejected;
	ret->mem_bytes = kube_store_mem_bytes(&k->store) + u64map_mem_bytes(&k->asked);
	pthread_mutex_unlock(&k->lock);
}
