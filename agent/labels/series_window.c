/* series_window.c: the end of an export window for the series table: processes that ended
 * are forgotten, idle series freed, and processes re-homed (a pod that changed, room again
 * after max_series). */
#include "series_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aggregate.h"
#include "ingest.h"
#include "kube.h"

/* Frees the series flagged in gone[] (nseries entries) and forgets their keys. */
static void free_series(struct series_table *t, const bool *gone)
{
	for (uint32_t id = 1; id <= intern_count(t->keys) && id <= t->key_series_cap; id++)
		if (t->key_series[id - 1] && gone[t->key_series[id - 1] - 1])
			t->key_series[id - 1] = 0;
	for (size_t i = 0; i < t->nseries; i++)
		if (gone[i]) {
			series_free_slot(&t->series[i]);
			t->st.series--;
		}
}

/* Clears gone[i] for every series a process of the table files into. */
static void keep_referenced(struct series_table *t, bool *gone)
{
	uint32_t pos = 0;
	uint64_t k, v;

	while (u64map_next(&t->procs, &pos, &k, &v)) {
		const struct series_proc *p = (const struct series_proc *)(uintptr_t)v;

		if (!p->dropped && !p->pending && p->series < t->nseries)
			gone[p->series] = false;
	}
}

/* max_series is reached: frees, once per window, the series no process of the
 * table files into and without samples in this window. Nothing is lost: their
 * profiles are empty, and a process with the same labels makes them again. */
void series_make_room(struct series_table *t)
{
	bool *gone;

	if (t->room_window == t->window + 1)
		return;
	t->room_window = t->window + 1;
	gone = calloc(t->nseries ? t->nseries : 1, sizeof(*gone));
	if (!gone)
		return;
	for (size_t i = 0; i < t->nseries; i++)
		gone[i] = !t->series[i].dead && !t->series[i].active;
	keep_referenced(t, gone);
	free_series(t, gone);
	free(gone);
}

static bool cid_in_use(void *ctx, const char *cid)
{
	struct series_table *t = ctx;

	return u64map_get(&t->cids, series_cid_key(cid), NULL);
}

/* The pods changed: relabel the processes whose pod metadata is not what
 * their labels came from (a pod that became known, labels that changed). */
static void recheck_pods(struct series_table *t)
{
	uint64_t gen = kube_generation(t->o.kube), k, v;
	uint32_t pos = 0;

	/* Deleted pods go once no process of theirs is left, whatever changed. */
	kube_gc(t->o.kube, cid_in_use, t);
	if (gen == t->kube_gen)
		return;
	t->kube_gen = gen;
	while (u64map_next(&t->procs, &pos, &k, &v)) {
		struct series_proc *p = (struct series_proc *)(uintptr_t)v;
		struct identity id = { .in_pod = p->in_pod };

		if (!p->in_pod || p->pending)
			continue;
		memcpy(id.container_id, p->cid, sizeof(id.container_id));
		memcpy(id.pod_uid, p->pod_uid, sizeof(id.pod_uid));
		if (discover_pod_version(&t->d, &id) == p->pod_version)
			continue;
		t->scratch.pid = (uint32_t)k;
		if (series_assign(t, p, &t->scratch, true) == -ENOMEM)
			break;
	}
}

/* Processes filed under "other" because max_series was reached get their own
 * series again once there is room (at most as many per window as there is room). */
static void refile_overflow(struct series_table *t)
{
	uint32_t pos = 0, room;
	uint64_t k, v;

	if (!t->noverflow)
		return;
	t->room_window = 0; /* every series is idle now: the end of the window may free more */
	series_make_room(t);
	if (t->st.series >= t->o.max_series)
		return;
	room = t->o.max_series - t->st.series;
	while (room && t->noverflow && u64map_next(&t->procs, &pos, &k, &v)) {
		struct series_proc *p = (struct series_proc *)(uintptr_t)v;

		if (!p->overflow || p->pending)
			continue;
		room--;
		t->scratch.pid = (uint32_t)k;
		if (series_assign(t, p, &t->scratch, true) == -ENOMEM)
			break;
	}
}

void series_table_end_window(struct series_table *t)
{
	uint32_t pos = 0;
	uint64_t k, v;
	char path[64];
	bool *gone;

	/* Forget processes that ended: frees their maps in the symbolizer too. */
	while (u64map_next(&t->procs, &pos, &k, &v)) {
		snprintf(path, sizeof(path), "%s/%u", t->o.proc_root, (uint32_t)k);
		if (k != 0 && access(path, F_OK) < 0 && errno == ENOENT) {
			series_forget_proc(t, (uint32_t)k, (struct series_proc *)(uintptr_t)v);
			t->st.processes_exited++;
			pos--; /* deletion may have moved another entry into this slot */
		}
	}
	if (t->o.kube)
		recheck_pods(t);
	/* Series idle for idle_windows that no process files into go. */
	gone = calloc(t->nseries ? t->nseries : 1, sizeof(*gone));
	for (size_t i = 0; i < t->nseries; i++) {
		struct series *s = &t->series[i];

		if (s->dead)
			continue;
		s->idle = s->active ? 0 : s->idle + 1;
		s->active = false;
		profile_reset(s->prof);
		ingest_profile_reset(s->ingest);
		if (gone)
			gone[i] = s->idle >= t->o.idle_windows;
	}
	if (gone) {
		keep_referenced(t, gone);
		free_series(t, gone);
		free(gone);
	}
	refile_overflow(t);
	t->window++;
}
