/* series.c: maps each sampled process to its series (its label set after discovery
 * and relabeling, computed once per process) and owns the per-series profiles. */
#include "series.h"
#include "series_priv.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aggregate.h"
#include "profile_data.h"
#include "clock.h"
#include "cgroup.h"
#include "discover.h"
#include "ingest.h"
#include "intern.h"
#include "kube.h"
#include "label_names.h"
#include "log.h"
#include "symbolizer.h"
#include "u64map.h"

#define PENDING_MAX_BYTES (8u << 20)
#define OTHER_KEY         "\1other"

int series_table_new(struct symbolizer *sym, const struct series_table_opts *o, struct series_table **ret)
{
	struct series_table *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->o = *o;
	if (!t->o.proc_root)
		t->o.proc_root = "/proc";
	if (!t->o.idle_windows)
		t->o.idle_windows = 6;
	if (!t->o.max_series)
		t->o.max_series = 1000;
	if (!t->o.max_processes)
		t->o.max_processes = 32768;
	if (!t->o.pending_max_bytes)
		t->o.pending_max_bytes = PENDING_MAX_BYTES;
	t->sym = sym;
	t->hostname = strdup(o->hostname ? o->hostname : "");
	t->keys = intern_new();
	if (!t->hostname || !t->keys || cgroup_cache_new(0, &t->cgroups) < 0) {
		series_table_free(t);
		return -ENOMEM;
	}
	/* The static labels stay the caller's: they are read when a process is discovered. */
	t->d = (struct discover_opts){
		.proc_root = t->o.proc_root,
		.hostname = t->hostname,
		.static_labels = o->static_labels,
		.nstatic = o->nstatic,
		.kube = o->kube,
		.relabel = o->relabel,
		.cgroups = t->cgroups,
	};
	t->kube_gen = o->kube ? kube_generation(o->kube) : 0;
	*ret = t;
	return 0;
}

static void free_labels(struct series_label *l, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free((char *)l[i].name);
		free((char *)l[i].value);
	}
	free(l);
}

void series_free_slot(struct series *s)
{
	free_labels(s->labels, s->nlabels);
	free_labels(s->resource, s->nresource);
	ingest_free(s->ingest);
	profile_free(s->prof);
	memset(s, 0, sizeof(*s));
	s->dead = true;
}

static void proc_free(struct series_proc *p)
{
	free(p->pend);
	free(p);
}

void series_table_free(struct series_table *t)
{
	uint32_t pos = 0;
	uint64_t k, v;

	if (!t)
		return;
	for (size_t i = 0; i < t->nseries; i++)
		if (!t->series[i].dead)
			series_free_slot(&t->series[i]);
	while (u64map_next(&t->procs, &pos, &k, &v)) {
		struct series_proc *p = (struct series_proc *)(uintptr_t)v;

		/* BPF samples what this table dropped again: whoever comes next decides. */
		if (p->bpf_dropped && t->o.drop_pid)
			t->o.drop_pid(t->o.drop_ctx, (uint32_t)k, false);
		proc_free(p);
	}
	u64map_free(&t->procs);
	u64map_free(&t->cids);
	cgroup_cache_free(t->cgroups);
	free(t->series);
	free(t->key_series);
	free(t->batch);
	intern_free(t->keys);
	free(t->hostname);
	free(t);
}

/* Copies a label set into owned series labels. */
static int copy_labels(const struct labelset *ls, struct series_label **ret, size_t *ret_n)
{
	struct series_label *l = calloc(ls->n ? ls->n : 1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	for (size_t i = 0; i < ls->n; i++) {
		l[i].name = strdup(ls->v[i].name);
		l[i].value = strdup(ls->v[i].value);
		if (!l[i].name || !l[i].value) {
			free_labels(l, i + 1);
			return -ENOMEM;
		}
	}
	*ret = l;
	*ret_n = ls->n;
	return 0;
}

static size_t set_len(const struct labelset *ls)
{
	size_t len = 0;

	for (size_t i = 0; i < ls->n; i++)
		len += strlen(ls->v[i].name) + strlen(ls->v[i].value) + 2;
	return len;
}

static char *put_set(char *p, const struct labelset *ls)
{
	for (size_t i = 0; i < ls->n; i++) {
		p = stpcpy(p, ls->v[i].name) + 1;
		p = stpcpy(p, ls->v[i].value) + 1;
	}
	return p;
}

/* "name\0value\0..." of the labels, then "\1" and the resource attributes. */
static char *identity_key(const struct identity *id, size_t *ret_len)
{
	size_t len = set_len(&id->labels) + 1 + set_len(&id->resource);
	char *k = malloc(len), *p;

	if (!k)
		return NULL;
	p = put_set(k, &id->labels);
	*p++ = 1;
	put_set(p, &id->resource);
	*ret_len = len;
	return k;
}

/* The identity of the overflow series: service_name "other", host and static labels. */
static int other_identity(struct series_table *t, struct identity *id)
{
	int r = labelset_set(&id->labels, LABEL_SERVICE_NAME, "other");

	if (r == 0 && t->hostname[0])
		r = labelset_set(&id->labels, LABEL_HOST_NAME, t->hostname);
	for (size_t i = 0; r == 0 && i < t->o.nstatic; i++)
		r = labelset_set(&id->labels, t->o.static_labels[i].name, t->o.static_labels[i].value);
	labelset_sort(&id->labels);
	return r;
}

static int grow_key_series(struct series_table *t, uint32_t id)
{
	size_t cap = t->key_series_cap ? t->key_series_cap * 2 : 64;
	uint32_t *ks;

	if (id <= t->key_series_cap)
		return 0;
	while (cap < id)
		cap *= 2;
	ks = realloc(t->key_series, cap * sizeof(*ks));
	if (!ks)
		return -ENOMEM;
	memset(ks + t->key_series_cap, 0, (cap - t->key_series_cap) * sizeof(*ks));
	t->key_series = ks;
	t->key_series_cap = cap;
	return 0;
}

/* A free slot in t->series (reused or new); returns its index or -ENOMEM. */
static ssize_t new_slot(struct series_table *t)
{
	size_t idx;

	for (idx = 0; idx < t->nseries && !t->series[idx].dead; idx++)
		;
	if (idx == t->nseries) {
		if (t->nseries == t->cap) {
			size_t cap = t->cap ? t->cap * 2 : 16;
			struct series *ns = realloc(t->series, cap * sizeof(*ns));

			if (!ns)
				return -ENOMEM;
			t->series = ns;
			t->cap = cap;
		}
		t->nseries++;
	}
	memset(&t->series[idx], 0, sizeof(t->series[idx]));
	return (ssize_t)idx;
}

/* Finds or creates the series of identity id and stores its index in *ret.
 * Returns 1 if max_series sent it to "other" instead, 0, or a negative errno. */
static int series_for(struct series_table *t, const struct identity *id, bool other, uint32_t *ret)
{
	struct identity oid = {};
	struct series *s;
	size_t klen = sizeof(OTHER_KEY);
	char *key = other ? strdup(OTHER_KEY) : identity_key(id, &klen);
	uint32_t kid;
	bool added;
	ssize_t idx;
	int r;

	if (!key)
		return -ENOMEM;
	r = intern_put(t->keys, key, klen, &kid, &added);
	free(key);
	if (r < 0 || (r = grow_key_series(t, kid)) < 0)
		return r;
	if (t->key_series[kid - 1]) {
		*ret = t->key_series[kid - 1] - 1;
		return 0;
	}
	if (!other && t->st.series >= t->o.max_series)
		series_make_room(t);
	if (!other && t->st.series >= t->o.max_series) {
		t->st.series_refused++;
		r = series_for(t, NULL, true, ret);
		return r < 0 ? r : 1;
	}
	if (other) {
		r = other_identity(t, &oid);
		id = &oid;
	}
	idx = r < 0 ? r : new_slot(t);
	if (idx < 0) {
		identity_free(&oid);
		return (int)idx;
	}
	s = &t->series[idx];
	s->prof = profile_new();
	r = s->prof ? 0 : -ENOMEM;
	if (r == 0) {
		struct ingest_opts io = { .per_thread = t->o.per_thread, .python_hint = t->o.python_hint };

		profile_set_period(s->prof, t->o.period_ns);
		profile_set_values(s->prof, t->o.off_cpu ? PROF_VALUES_WALL : PROF_VALUES_CPU);
		r = ingest_new(t->sym, s->prof, &io, &s->ingest);
	}
	r = r ?: copy_labels(&id->labels, &s->labels, &s->nlabels);
	r = r ?: copy_labels(&id->resource, &s->resource, &s->nresource);
	identity_free(&oid);
	if (r < 0) {
		series_free_slot(s);
		return r;
	}
	t->key_series[kid - 1] = (uint32_t)idx + 1;
	t->st.series++;
	*ret = (uint32_t)idx;
	return 0;
}

/* ---- processes ---- */

uint64_t series_cid_key(const char *cid)
{
	return hash_bytes(cid, strlen(cid));
}

static void cid_ref(struct series_table *t, const char *cid, int delta)
{
	uint64_t n = 0;

	if (!cid[0])
		return;
	u64map_get(&t->cids, series_cid_key(cid), &n);
	if (delta < 0 && n <= 1)
		u64map_del(&t->cids, series_cid_key(cid));
	else
		u64map_put(&t->cids, series_cid_key(cid), n + (uint64_t)delta);
}

/* Whether pid is still the program p was discovered as: its name in /proc. */
static bool same_program(const struct series_table *t, uint32_t pid, const struct series_proc *p)
{
	char path[64], comm[PROWL_COMM_LEN + 2] = "";
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%u/comm", t->o.proc_root, pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	n = fread(comm, 1, sizeof(comm) - 1, f);
	fclose(f);
	if (n && comm[n - 1] == '\n')
		n--;
	return n <= PROWL_COMM_LEN && strncmp(comm, p->pcomm, n) == 0 && (n == PROWL_COMM_LEN || !p->pcomm[n]);
}

static void set_dropped(struct series_table *t, uint32_t pid, struct series_proc *p, bool drop)
{
	if (p->dropped == drop)
		return;
	p->dropped = drop;
	if (drop)
		t->st.dropped_processes++;
	else
		t->st.dropped_processes--;
	if (!drop && p->bpf_dropped && t->o.drop_pid)
		t->o.drop_pid(t->o.drop_ctx, pid, false);
	p->bpf_dropped = drop && t->o.drop_pid && t->o.drop_pid(t->o.drop_ctx, pid, true) == 0;
	/* The decision came from a sample read some time ago: if the process exec'ed
	 * (or its pid went to another) before BPF was told, BPF's exec/exit hook has
	 * already run and would not undo it. Checked after telling BPF, so that a
	 * later exec is BPF's to see. */
	if (p->bpf_dropped && !same_program(t, pid, p)) {
		t->o.drop_pid(t->o.drop_ctx, pid, false);
		p->bpf_dropped = false;
	}
	p->drop_time_ns = drop ? clock_mono_ns() : 0;
}

/* Discovers and relabels the process of sample s into p: its series, or dropped. */
int series_assign(struct series_table *t, struct series_proc *p, const struct prowl_sample *s, bool final)
{
	char pcomm[PROWL_COMM_LEN + 1] = "";
	struct identity id;
	uint64_t t0 = clock_mono_ns();
	int r;

	memcpy(pcomm, p->pcomm, PROWL_COMM_LEN);
	r = discover(&t->d, s->pid, p->cgroup_id, pcomm, &id);
	t->st.discoveries++;
	t->st.discovery_ns += clock_mono_ns() - t0;
	if (r < 0)
		return r;
	if (strcmp(p->cid, id.container_id) != 0) {
		cid_ref(t, p->cid, -1);
		memcpy(p->cid, id.container_id, sizeof(p->cid));
		cid_ref(t, p->cid, 1);
	}
	memcpy(p->pod_uid, id.pod_uid, sizeof(p->pod_uid));
	p->in_pod = id.in_pod;
	p->pod_version = id.pod_version;
	/* A first sight without the pod's container: wait for it until the window ends. */
	p->pending = !final && id.in_pod && !id.container_known;
	if (final && id.in_pod && !id.pod_known)
		t->st.pod_unlabelled++;
	if (!p->pending) {
		set_dropped(t, s->pid, p, !id.keep);
		if (id.keep)
			r = series_for(t, &id, false, &p->series);
		t->noverflow -= p->overflow;
		p->overflow = r > 0;
		t->noverflow += p->overflow;
	}
	identity_free(&id);
	return r < 0 ? r : 0;
}

static int proc_new(struct series_table *t, const struct prowl_sample *s, struct series_proc **ret)
{
	struct series_proc *p;
	int r;

	if (t->procs.count >= t->o.max_processes) {
		/* Evict the entry seen longest ago. */
		uint32_t pos = 0, victim_pid = 0;
		uint64_t k, val, oldest = UINT64_MAX;
		struct series_proc *victim = NULL;

		while (u64map_next(&t->procs, &pos, &k, &val)) {
			struct series_proc *q = (struct series_proc *)(uintptr_t)val;

			if (q->last_window < oldest && !q->pending) {
				oldest = q->last_window;
				victim = q;
				victim_pid = (uint32_t)k;
			}
		}
		if (victim) {
			series_forget_proc(t, victim_pid, victim);
			t->st.processes_evicted++;
		}
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	memcpy(p->pcomm, s->pcomm, PROWL_COMM_LEN);
	p->cgroup_id = s->cgroup_id;
	p->last_window = t->window;
	r = series_assign(t, p, s, t->pend_bytes >= t->o.pending_max_bytes);
	if (r == 0)
		r = u64map_put(&t->procs, s->pid, (uint64_t)(uintptr_t)p);
	if (r < 0) {
		set_dropped(t, s->pid, p, false);
		cid_ref(t, p->cid, -1);
		t->noverflow -= p->overflow;
		proc_free(p);
		return r;
	}
	t->npending += p->pending;
	/* The name is the process's own choice (prctl): the logger escapes it. */
	if (!p->pending && !p->dropped)
		log_debug("process %" PRIu32 " (%.*s) goes to the series of service_name=%s", s->pid, PROWL_COMM_LEN,
			  p->pcomm, export_series_label(&(struct export_series){ .labels = t->series[p->series].labels,
									 .nlabels = t->series[p->series].nlabels },
							LABEL_SERVICE_NAME) ?: "");
	*ret = p;
	return 0;
}

/* Holds sample s of a pending process, without the unused stack slots. */
static int hold(struct series_table *t, struct series_proc *p, const struct prowl_sample *s)
{
	size_t kn = s->kstack_len < PROWL_MAX_STACK ? s->kstack_len : PROWL_MAX_STACK;
	size_t un = s->ustack_len < PROWL_MAX_STACK ? s->ustack_len : PROWL_MAX_STACK;
	size_t pn = s->pystack_len < PROWL_MAX_PY ? s->pystack_len : PROWL_MAX_PY;
	size_t head = offsetof(struct prowl_sample, kstack);
	size_t need = head + (kn + un) * sizeof(__u64) + pn * sizeof(struct prowl_pyframe);

	if (t->pend_bytes + need > t->o.pending_max_bytes) {
		t->st.pending_overflow++;
		return 1;
	}
	if (p->pend_len + need > p->pend_cap) {
		size_t cap = p->pend_cap ? p->pend_cap * 2 : 4096;
		uint8_t *np;

		while (cap < p->pend_len + need)
			cap *= 2;
		np = realloc(p->pend, cap);
		if (!np)
			return -ENOMEM;
		p->pend = np;
		t->pend_bytes += cap - p->pend_cap;
		p->pend_cap = cap;
	}
	memcpy(p->pend + p->pend_len, s, head);
	memcpy(p->pend + p->pend_len + head, s->kstack, kn * sizeof(__u64));
	memcpy(p->pend + p->pend_len + head + kn * sizeof(__u64), s->ustack, un * sizeof(__u64));
	memcpy(p->pend + p->pend_len + head + (kn + un) * sizeof(__u64), s->pystack, pn * sizeof(struct prowl_pyframe));
	p->pend_len += need;
	return 0;
}

static int file_sample(struct series_table *t, struct series_proc *p, const struct prowl_sample *s)
{
	struct series *se;
	int r;

	if (p->dropped) {
		t->st.dropped_samples++;
		return 0;
	}
	if (p->overflow)
		t->st.series_overflow++;
	se = &t->series[p->series];
	r = ingest_sample(se->ingest, s);
	if (r < 0) {
		t->st.ingest_errors++;
		return r == -ENOMEM ? r : 0;
	}
	se->active = true;
	return 0;
}

/* Ends the wait of a pending process: discovers it with what is known now and
 * files the samples it held. */
static int settle(struct series_table *t, uint32_t pid, struct series_proc *p)
{
	const size_t head = offsetof(struct prowl_sample, kstack);
	struct prowl_sample *s = &t->scratch;
	int r;

	memset(s, 0, sizeof(*s));
	s->pid = pid;
	r = series_assign(t, p, s, true);
	for (size_t off = 0; r == 0 && off < p->pend_len;) {
		size_t kn, un, pn;

		memcpy(s, p->pend + off, head);
		kn = s->kstack_len < PROWL_MAX_STACK ? s->kstack_len : PROWL_MAX_STACK;
		un = s->ustack_len < PROWL_MAX_STACK ? s->ustack_len : PROWL_MAX_STACK;
		pn = s->pystack_len < PROWL_MAX_PY ? s->pystack_len : PROWL_MAX_PY;
		memcpy(s->kstack, p->pend + off + head, kn * sizeof(__u64));
		memcpy(s->ustack, p->pend + off + head + kn * sizeof(__u64), un * sizeof(__u64));
		memcpy(s->pystack, p->pend + off + head + (kn + un) * sizeof(__u64), pn * sizeof(struct prowl_pyframe));
		off += head + (kn + un) * sizeof(__u64) + pn * sizeof(struct prowl_pyframe);
		r = file_sample(t, p, s);
	}
	t->pend_bytes -= p->pend_cap;
	free(p->pend);
	p->pend = NULL;
	p->pend_len = p->pend_cap = 0;
	t->npending--;
	p->pending = false;
	return r;
}

void series_forget_proc(struct series_table *t, uint32_t pid, struct series_proc *p)
{
	if (p->pending)
		settle(t, pid, p);
	t->noverflow -= p->overflow;
	set_dropped(t, pid, p, false);
	cid_ref(t, p->cid, -1);
	u64map_del(&t->procs, pid);
	symbolizer_forget_process(t->sym, pid);
	proc_free(p);
}

static int proc_for(struct series_table *t, const struct prowl_sample *s, struct series_proc **ret)
{
	uint64_t v;

	if (u64map_get(&t->procs, s->pid, &v)) {
		struct series_proc *p = (struct series_proc *)(uintptr_t)v;

		/* Same name, and not a sample BPF should have stopped: the same process.
		 * A dropped process's sample taken after BPF was told means BPF's entry
		 * went with an exec or exit: discover it again. */
		if (memcmp(p->pcomm, s->pcomm, PROWL_COMM_LEN) == 0 &&
		    !(p->dropped && p->bpf_dropped && s->time_ns > p->drop_time_ns)) {
			p->last_window = t->window;
			*ret = p;
			return 0;
		}
		/* exec or pid reuse: mappings and maybe the labels changed. */
		series_forget_proc(t, s->pid, p);
	}
	return proc_new(t, s, ret);
}

int series_table_ingest(struct series_table *t, const struct prowl_sample *s)
{
	struct series_proc *p;
	int r;

	r = proc_for(t, s, &p);
	if (r < 0)
		return r;
	if (p->pending) {
		r = hold(t, p, s);
		if (r <= 0)
			return r;
		r = settle(t, s->pid, p); /* no room to hold it: file it now */
		if (r < 0)
			return r;
	}
	return file_sample(t, p, s);
}

int series_table_batch(struct series_table *t, int64_t start_unix_ns, int64_t end_unix_ns,
		       const struct export_series **ret, size_t *ret_n)
{
	size_t n = 0;
	uint32_t pos = 0;
	uint64_t k, v;

	/* Processes that waited for their pod's metadata are filed now, with what is known. */
	while (t->npending && u64map_next(&t->procs, &pos, &k, &v)) {
		struct series_proc *p = (struct series_proc *)(uintptr_t)v;

		if (p->pending && settle(t, (uint32_t)k, p) == -ENOMEM)
			return -ENOMEM;
	}
	free(t->batch);
	t->batch = calloc(t->nseries ? t->nseries : 1, sizeof(*t->batch));
	if (!t->batch)
		return -ENOMEM;
	for (size_t i = 0; i < t->nseries; i++) {
		struct series *s = &t->series[i];
		int r;

		if (s->dead || !s->active)
			continue;
		profile_set_time(s->prof, start_unix_ns, end_unix_ns - start_unix_ns);
		for (size_t k = 0; k < s->nlabels; k++) {
			char *c;

			if (asprintf(&c, PROWL_SERIES_LABEL_COMMENT "%s=%s", s->labels[k].name, s->labels[k].value) < 0)
				return -ENOMEM;
			r = profile_add_comment(s->prof, c);
			free(c);
			if (r < 0)
				return r;
		}
		t->batch[n++] = (struct export_series){
			.labels = s->labels,
			.nlabels = s->nlabels,
			.prof = s->prof,
			.resource = s->resource,
			.nresource = s->nresource,
		};
	}
	*ret = t->batch;
	*ret_n = n;
	return 0;
}

void series_table_get_stats(const struct series_table *t, struct series_stats *ret)
{
	*ret = t->st;
	ret->processes = t->procs.count;
	ret->stacks = 0;
	ret->profile_bytes = intern_mem_bytes(t->keys);
	ret->label_bytes = u64map_mem_bytes(&t->procs) + t->procs.count * sizeof(struct series_proc) +
			   u64map_mem_bytes(&t->cids) + cgroup_cache_mem_bytes(t->cgroups) + t->pend_bytes;
	for (size_t i = 0; i < t->nseries; i++) {
		struct profile_stats ps;

		if (t->series[i].dead)
			continue;
		profile_get_stats(t->series[i].prof, &ps);
		ret->stacks += ps.stacks;
		ret->profile_bytes += ps.mem_bytes;
	}
}
