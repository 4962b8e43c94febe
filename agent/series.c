/* series.c: maps each sampled process to its series (service name from the
 * systemd unit in its cgroup, else the executable) and owns the per-series profiles. */
#include "series.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aggregate.h"
#include "ingest.h"
#include "intern.h"
#include "log.h"
#include "symbolizer.h"
#include "u64map.h"

struct series {
	struct series_label *labels; /* owned strings */
	size_t nlabels;
	struct profile *prof;
	struct ingest *ingest;
	uint32_t idle;   /* consecutive windows without samples */
	bool active;     /* samples in this window */
	bool dead;       /* freed slot */
};

struct proc {
	uint32_t series; /* index into t->series */
	bool overflow;   /* filed under "other" because of max_series */
	char pcomm[PROWL_COMM_LEN];
	uint64_t last_window;
};

struct series_table {
	struct series_table_opts o;
	char *hostname;
	struct symbolizer *sym;
	struct series *series;
	size_t nseries, cap;
	struct intern *keys;     /* label-set key -> 1-based id; id-1 indexes key_series */
	uint32_t *key_series;    /* key id -> series index + 1 (0 = freed) */
	size_t key_series_cap;
	struct u64map procs;     /* pid -> struct proc * */
	struct export_series *batch;
	uint64_t window;
	struct series_stats st;
};

int service_from_cgroup(const char *text, char *buf, size_t n)
{
	const char *line = text;

	/* cgroup v2 ("0::/path") or any v1 hierarchy: the innermost "*.service". */
	while (line && *line) {
		const char *end = strchr(line, '\n'), *path = line, *best = NULL, *p;
		size_t len = end ? (size_t)(end - line) : strlen(line);
		size_t blen = 0;

		for (int colons = 0; path < line + len && colons < 2; path++)
			if (*path == ':')
				colons++;
		for (p = path; p < line + len;) {
			const char *c = p;
			size_t clen;

			while (p < line + len && *p != '/')
				p++;
			clen = p - c;
			if (clen > 8 && memcmp(c + clen - 8, ".service", 8) == 0) {
				best = c;
				blen = clen - 8;
			}
			if (p < line + len)
				p++;
		}
		if (best && blen > 0 && blen < n) {
			memcpy(buf, best, blen);
			buf[blen] = 0;
			return 0;
		}
		line = end ? end + 1 : NULL;
	}
	return -ENOENT;
}

/* service_name of a process: its systemd unit, else its executable's name,
 * "kernel" for kernel threads and "idle" for the idle task. */
static void service_of(const struct series_table *t, uint32_t pid, const char *pcomm, char *buf, size_t n)
{
	char path[128], text[4096], link[4096];
	FILE *f;
	size_t len = 0;
	ssize_t ln;

	if (pid == 0) {
		snprintf(buf, n, "idle");
		return;
	}
	snprintf(path, sizeof(path), "%s/%u/cgroup", t->o.proc_root, pid);
	f = fopen(path, "re");
	if (f) {
		len = fread(text, 1, sizeof(text) - 1, f);
		fclose(f);
		text[len] = 0;
		if (service_from_cgroup(text, buf, n) == 0)
			return;
	}
	snprintf(path, sizeof(path), "%s/%u/exe", t->o.proc_root, pid);
	ln = readlink(path, link, sizeof(link) - 1);
	if (ln > 0) {
		char *base;

		link[ln] = 0;
		if (ln > 10 && strcmp(link + ln - 10, " (deleted)") == 0)
			link[ln - 10] = 0;
		base = strrchr(link, '/');
		snprintf(buf, n, "%.*s", (int)n - 1, base ? base + 1 : link);
		return;
	}
	if (errno == ENOENT) {
		/* /proc/PID exists but has no exe: a kernel thread. */
		snprintf(path, sizeof(path), "%s/%u", t->o.proc_root, pid);
		if (access(path, F_OK) == 0) {
			snprintf(buf, n, "kernel");
			return;
		}
	}
	snprintf(buf, n, "%s", pcomm[0] ? pcomm : "unknown");
}

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
	t->sym = sym;
	t->hostname = strdup(o->hostname ? o->hostname : "");
	t->keys = intern_new();
	if (!t->hostname || !t->keys) {
		series_table_free(t);
		return -ENOMEM;
	}
	t->o.hostname = t->hostname;
	t->o.static_labels = NULL; /* copied into each series' labels on creation */
	*ret = t;
	/* Keep the caller's static labels: they are read when a series is made. */
	t->o.static_labels = o->static_labels;
	return 0;
}

static void series_free_slot(struct series *s)
{
	for (size_t i = 0; i < s->nlabels; i++) {
		free((char *)s->labels[i].name);
		free((char *)s->labels[i].value);
	}
	free(s->labels);
	ingest_free(s->ingest);
	profile_free(s->prof);
	memset(s, 0, sizeof(*s));
	s->dead = true;
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
		free((void *)(uintptr_t)v);
	}
	u64map_free(&t->procs);
	free(t->series);
	free(t->key_series);
	free(t->batch);
	intern_free(t->keys);
	free(t->hostname);
	free(t);
}

static int add_label(struct series *s, const char *name, const char *value)
{
	struct series_label *l = realloc(s->labels, (s->nlabels + 1) * sizeof(*l));

	if (!l)
		return -ENOMEM;
	s->labels = l;
	l[s->nlabels].name = strdup(name);
	l[s->nlabels].value = strdup(value);
	if (!l[s->nlabels].name || !l[s->nlabels].value) {
		free((char *)l[s->nlabels].name);
		free((char *)l[s->nlabels].value);
		return -ENOMEM;
	}
	s->nlabels++;
	return 0;
}

/* Finds or creates the series of service svc and stores its index in *ret.
 * Returns 1 if max_series sent it to "other" instead, 0, or a negative errno. */
static int series_for(struct series_table *t, const char *svc, uint32_t *ret)
{
	uint32_t id;
	bool added;
	struct series *s;
	size_t idx;
	int r;

	r = intern_put_str(t->keys, svc, &id);
	if (r < 0)
		return r;
	added = id > t->key_series_cap || !t->key_series[id - 1];
	if (!added) {
		*ret = t->key_series[id - 1] - 1;
		return 0;
	}
	if (id > t->key_series_cap) {
		size_t cap = t->key_series_cap ? t->key_series_cap * 2 : 64;
		uint32_t *ks;

		while (cap < id)
			cap *= 2;
		ks = realloc(t->key_series, cap * sizeof(*ks));
		if (!ks)
			return -ENOMEM;
		memset(ks + t->key_series_cap, 0, (cap - t->key_series_cap) * sizeof(*ks));
		t->key_series = ks;
		t->key_series_cap = cap;
	}
	if (t->st.series >= t->o.max_series && strcmp(svc, "other") != 0) {
		r = series_for(t, "other", ret);
		return r < 0 ? r : 1;
	}
	/* Reuse a freed slot, else grow. */
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
	s = &t->series[idx];
	memset(s, 0, sizeof(*s));
	s->prof = profile_new();
	r = s->prof ? 0 : -ENOMEM;
	if (r == 0) {
		struct ingest_opts io = { .per_thread = t->o.per_thread };

		profile_set_period(s->prof, t->o.period_ns);
		r = ingest_new(t->sym, s->prof, &io, &s->ingest);
	}
	if (r == 0)
		r = add_label(s, "service_name", svc);
	if (r == 0 && t->hostname[0])
		r = add_label(s, "host_name", t->hostname);
	for (size_t i = 0; r == 0 && i < t->o.nstatic; i++)
		r = add_label(s, t->o.static_labels[i].name, t->o.static_labels[i].value);
	if (r < 0) {
		series_free_slot(s);
		return r;
	}
	t->key_series[id - 1] = idx + 1;
	t->st.series++;
	*ret = idx;
	return 0;
}

static void forget_proc(struct series_table *t, uint32_t pid, struct proc *p)
{
	u64map_del(&t->procs, pid);
	symbolizer_forget_process(t->sym, pid);
	free(p);
}

static int proc_for(struct series_table *t, const struct prowl_sample *s, struct proc **ret)
{
	char svc[256];
	uint64_t v;
	struct proc *p = NULL;
	int r;

	if (u64map_get(&t->procs, s->pid, &v)) {
		p = (struct proc *)(uintptr_t)v;
		if (memcmp(p->pcomm, s->pcomm, PROWL_COMM_LEN) == 0) {
			p->last_window = t->window;
			*ret = p;
			return 0;
		}
		/* exec or pid reuse: mappings and maybe the service changed. */
		forget_proc(t, s->pid, p);
		p = NULL;
	}
	if (t->procs.count >= t->o.max_processes) {
		/* Evict the entry seen longest ago. */
		uint32_t pos = 0, victim_pid = 0;
		uint64_t k, val, oldest = UINT64_MAX;
		struct proc *victim = NULL;

		while (u64map_next(&t->procs, &pos, &k, &val)) {
			struct proc *q = (struct proc *)(uintptr_t)val;

			if (q->last_window < oldest) {
				oldest = q->last_window;
				victim = q;
				victim_pid = k;
			}
		}
		if (victim) {
			forget_proc(t, victim_pid, victim);
			t->st.processes_evicted++;
		}
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	memcpy(p->pcomm, s->pcomm, PROWL_COMM_LEN);
	{
		char pcomm[PROWL_COMM_LEN + 1] = "";

		memcpy(pcomm, s->pcomm, PROWL_COMM_LEN);
		service_of(t, s->pid, pcomm, svc, sizeof(svc));
	}
	r = series_for(t, svc, &p->series);
	if (r >= 0) {
		p->overflow = r > 0;
		r = u64map_put(&t->procs, s->pid, (uint64_t)(uintptr_t)p);
	}
	if (r < 0) {
		free(p);
		return r;
	}
	/* The name is the process's own choice (prctl): the logger escapes it. */
	log_debug("process %" PRIu32 " (%.*s) goes to the series of service_name=%s", s->pid, PROWL_COMM_LEN,
		  p->pcomm, t->series[p->series].labels[0].value /* labels[0] is service_name */);
	p->last_window = t->window;
	*ret = p;
	return 0;
}

int series_table_ingest(struct series_table *t, const struct prowl_sample *s)
{
	struct proc *p;
	struct series *se;
	int r;

	r = proc_for(t, s, &p);
	if (r < 0)
		return r;
	se = &t->series[p->series];
	r = ingest_sample(se->ingest, s);
	if (r < 0) {
		t->st.ingest_errors++;
		return r == -ENOMEM ? r : 0;
	}
	se->active = true;
	if (p->overflow)
		t->st.series_overflow++;
	return 0;
}

int series_table_batch(struct series_table *t, int64_t start_unix_ns, int64_t end_unix_ns,
		       const struct export_series **ret, size_t *ret_n)
{
	size_t n = 0;
	int r;

	free(t->batch);
	t->batch = calloc(t->nseries ? t->nseries : 1, sizeof(*t->batch));
	if (!t->batch)
		return -ENOMEM;
	for (size_t i = 0; i < t->nseries; i++) {
		struct series *s = &t->series[i];

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
		t->batch[n++] = (struct export_series){ .labels = s->labels, .nlabels = s->nlabels, .prof = s->prof };
	}
	*ret = t->batch;
	*ret_n = n;
	return 0;
}

void series_table_end_window(struct series_table *t)
{
	uint32_t pos = 0;
	uint64_t k, v;
	char path[64];

	/* Forget processes that ended: frees their maps in the symbolizer too. */
	while (u64map_next(&t->procs, &pos, &k, &v)) {
		snprintf(path, sizeof(path), "%s/%u", t->o.proc_root, (uint32_t)k);
		if (k != 0 && access(path, F_OK) < 0 && errno == ENOENT) {
			forget_proc(t, (uint32_t)k, (struct proc *)(uintptr_t)v);
			t->st.processes_exited++;
			pos--; /* deletion may have moved another entry into this slot */
		}
	}
	for (size_t i = 0; i < t->nseries; i++) {
		struct series *s = &t->series[i];
		bool referenced = false;

		if (s->dead)
			continue;
		s->idle = s->active ? 0 : s->idle + 1;
		s->active = false;
		profile_reset(s->prof);
		ingest_profile_reset(s->ingest);
		if (s->idle < t->o.idle_windows)
			continue;
		pos = 0;
		while (!referenced && u64map_next(&t->procs, &pos, &k, &v)) {
			referenced = ((struct proc *)(uintptr_t)v)->series == i;
		}
		if (referenced)
			continue;
		for (uint32_t id = 1; id <= intern_count(t->keys); id++)
			if (id <= t->key_series_cap && t->key_series[id - 1] == i + 1)
				t->key_series[id - 1] = 0;
		series_free_slot(s);
		t->st.series--;
	}
	t->window++;
}

void series_table_get_stats(const struct series_table *t, struct series_stats *ret)
{
	*ret = t->st;
	ret->processes = t->procs.count;
	ret->stacks = 0;
	ret->profile_bytes = intern_mem_bytes(t->keys);
	for (size_t i = 0; i < t->nseries; i++) {
		struct profile_stats ps;

		if (t->series[i].dead)
			continue;
		profile_get_stats(t->series[i].prof, &ps);
		ret->stacks += ps.stacks;
		ret->profile_bytes += ps.mem_bytes;
	}
}
