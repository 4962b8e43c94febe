/* unwind_procs.c: each known process's executable mappings: read from /proc/PID/maps,
 * matched to tables, published as one sorted extent of the BPF maps array. */
#include "unwinder_priv.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "intern.h"
#include "log.h"

void unw_proc_free(struct uproc *p)
{
	if (!p)
		return;
	free(p->tables);
	free(p);
}

static bool is_64bit_process(struct unwinder *u, uint32_t pid)
{
	char path[64];
	unsigned char ident[EI_NIDENT];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%" PRIu32 "/exe", u->proc_root, pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true; /* cannot tell: assume the common case */
	n = read(fd, ident, sizeof(ident));
	close(fd);
	return !(n == (ssize_t)sizeof(ident) && memcmp(ident, ELFMAG, SELFMAG) == 0 && ident[EI_CLASS] == ELFCLASS32);
}

struct uproc *unw_proc_get(struct unwinder *u, uint32_t pid)
{
	uint64_t v;

	return u64map_get(&u->procs, pid, &v) ? (struct uproc *)(uintptr_t)v : NULL;
}

/* Forgets what p references (deferred frees); keeps p itself. */
static void proc_release(struct unwinder *u, struct uproc *p)
{
	uint64_t now = clock_mono_ns();

	for (size_t i = 0; i < p->ntables; i++) {
		struct table *t = p->tables[i];

		if (t && t->refs) {
			t->refs--;
			t->last_used_ns = now;
			if (!t->refs && t->state == T_LOADED)
				u->st.tables_in_use--;
		}
	}
	free(p->tables);
	p->tables = NULL;
	p->ntables = 0;
	if (p->map_count) {
		extent_defer(&u->maps, p->map_first, p->map_count);
		p->map_count = 0;
	}
}

void unw_proc_drop(struct unwinder *u, uint32_t pid, bool delete_bpf)
{
	struct uproc *p = unw_proc_get(u, pid);

	if (delete_bpf) {
		u->io->proc_del(u->io->ctx, pid);
		if (u->io->py_proc_del)
			u->io->py_proc_del(u->io->ctx, pid);
		if (u->io->java_proc_del)
			u->io->java_proc_del(u->io->ctx, pid);
		if (u->io->v8_proc_del)
			u->io->v8_proc_del(u->io->ctx, pid);
	}
	if (!p)
		return;
	proc_release(u, p);
	u64map_del(&u->procs, pid);
	unw_proc_free(p);
	u->st.procs--;
}

static uint64_t maps_signature(const struct procmaps *pm)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < pm->n; i++) {
		const struct pm_entry *e = &pm->v[i];
		uint64_t v[4] = { e->start, e->end, e->offset, e->inode };

		h = (h ^ hash_bytes(v, sizeof(v))) * 1099511628211ull;
	}
	return h;
}

static void note_capacity(struct unwinder *u, uint32_t pid, bool procs)
{
	uint64_t now = clock_mono_ns();

	u64map_put(&u->failed, pid, now);
	if (procs) {
		u->st.procs_full++;
		if (!u->logged_procs_full) {
			u->logged_procs_full = true;
			log_warn("the unwinder's process table is full (%" PRIu32 " processes): new processes are unwound "
				 "with frame pointers and marked truncated. Raise %s",
				 u->io->max_procs, u->opts.names.procs ?: "the unwind process limit");
		}
	} else {
		u->st.maps_full++;
		if (!u->logged_maps_full) {
			u->logged_maps_full = true;
			log_warn("the unwinder's mapping table is full (%" PRIu32 " mappings): new processes are unwound "
				 "with frame pointers and marked truncated. Raise %s",
				 u->io->max_maps, u->opts.names.maps ?: "the unwind mapping limit");
		}
	}
}

/* Whether mapping i maps a file whose table has a load segment at its offset, and
 * then the file's load bias in the process. */
static bool file_bias(const struct procmaps *pm, struct table **tabs, size_t i, uint64_t *bias)
{
	const struct pm_entry *e = &pm->v[i];
	const struct obj_load *l;

	if (!tabs[i] || e->kind != PM_FILE || !(l = obj_load_at(&tabs[i]->obj->f, e->offset)))
		return false;
	*bias = obj_load_bias(l, e->start, e->offset);
	return true;
}

/* Offers pid's mappings to the CPython home (pyproc.h), which decides whether the
 * BPF walk is told about it. */
static void py_offer(struct unwinder *u, uint32_t pid, const struct procmaps *pm, struct table **tabs)
{
	struct py_mapping *v;

	if (!py_proc_wanted(u->io, u->opts.python_off))
		return;
	v = calloc(pm->n, sizeof(*v));
	if (!v)
		return;
	for (size_t i = 0; i < pm->n; i++) {
		uint64_t bias;

		if (file_bias(pm, tabs, i, &bias))
			v[i] = (struct py_mapping){ &tabs[i]->py, bias, tabs[i]->obj->path, &tabs[i]->py_logged };
	}
	py_proc_update(u->io, u->opts.python_off, pid, v, pm->n, &u->py_gen);
	free(v);
}

/* Tells the BPF Java walk about a JVM (jvmproc.h): the mapping of libjvm's first
 * page gives its load bias. Returns true while the JVM is starting (ask again later). */
static bool jvm_offer(struct unwinder *u, uint32_t pid, const struct procmaps *pm, struct table **tabs)
{
	if (!u->io->java_proc_set || u->opts.java_off)
		return false;
	for (size_t i = 0; i < pm->n; i++) {
		uint64_t bias;

		if (tabs[i] && tabs[i]->jvm && file_bias(pm, tabs, i, &bias))
			return jvm_proc_register(u->io, pid, tabs[i]->jvm, bias, ++u->java_gen, tabs[i]->obj->path) ==
			       -EAGAIN;
	}
	u->io->java_proc_del(u->io->ctx, pid);
	return false;
}

/* The load bias of a mapping of object t after mapping `after` whose bias differs from
 * `bias`: V8's second mapping of its embedded builtins (short builtin calls); 0: none. */
static uint64_t v8_copy_bias(const struct procmaps *pm, struct table **tabs, size_t after, uint64_t bias)
{
	for (size_t i = after + 1; i < pm->n; i++) {
		const struct pm_entry *e = &pm->v[i];
		const struct obj_load *l;
		uint64_t b;

		if (tabs[i] != tabs[after] || e->kind != PM_FILE || !(l = obj_load_at(&tabs[i]->obj->f, e->offset)))
			continue;
		if ((b = obj_load_bias(l, e->start, e->offset)) != bias)
			return b;
	}
	return 0;
}

/* Tells the BPF V8 walk about a node process (v8proc.h): the mapping of the binary's
 * first page gives its load bias. known: the process was loaded before (an exec drops it). */
static void v8_offer(struct unwinder *u, uint32_t pid, const struct procmaps *pm, struct table **tabs, bool known)
{
	if (!u->io->v8_proc_set || u->opts.node_off)
		return;
	for (size_t i = 0; i < pm->n; i++) {
		uint64_t bias;

		if (tabs[i] && tabs[i]->v8 && file_bias(pm, tabs, i, &bias)) {
			v8_proc_register(u->io, pid, tabs[i]->v8, bias, ++u->v8_gen, pm->v[i].start, pm->v[i].end,
					 v8_copy_bias(pm, tabs, i, bias), known);
			return;
		}
	}
	u->io->v8_proc_del(u->io->ctx, pid);
}

int unw_proc_load(struct unwinder *u, uint32_t pid, bool force)
{
	struct procmaps pm = {};
	struct prowl_unwind_map *ents = NULL;
	struct table **tabs = NULL;
	struct prowl_unwind_proc val;
	struct uproc *p = unw_proc_get(u, pid);
	char path[64];
	uint32_t first = 0;
	uint64_t sig, failed_at, now = clock_mono_ns();
	bool is64, java_pending;
	int r;

	if (u64map_get(&u->failed, pid, &failed_at)) {
		if (now - failed_at < RETRY_NS)
			return -ENOSPC;
		u64map_del(&u->failed, pid);
	}
	snprintf(path, sizeof(path), "%s/%" PRIu32 "/maps", u->proc_root, pid);
	u->st.maps_reads++;
	r = procmaps_read_exec(path, &pm);
	if (r < 0 && r != -ENOMEM)
		r = -ESRCH; /* not there, or not ours to read */
	if (r < 0 || pm.n == 0) {
		/* Gone meanwhile (an empty file), or a kernel thread. */
		procmaps_free(&pm);
		unw_proc_drop(u, pid, true);
		return r < 0 ? r : -ESRCH;
	}
	sig = maps_signature(&pm);
	if (p && p->sig == sig && p->map_count) {
		p->loaded_ns = now;
		if (p->java_pending && p->ntables == pm.n)
			p->java_pending = jvm_offer(u, pid, &pm, p->tables);
		if (force) {
			val = (struct prowl_unwind_proc){ p->map_first, p->map_count };
			u->io->proc_set(u->io->ctx, pid, &val);
		} else {
			/* Nothing new (a pc in no mapping is garbage, or code outside any
			 * file): let BPF ask less often, backing off exponentially. */
			uint64_t until;

			p->backoff_ns = p->backoff_ns ? p->backoff_ns * 2 : BACKOFF_MIN_NS;
			if (p->backoff_ns > BACKOFF_MAX_NS)
				p->backoff_ns = BACKOFF_MAX_NS;
			until = now + p->backoff_ns;
			u->io->req_time_set(u->io->ctx, pid, until);
		}
		if (p->java_pending) /* a JVM still starting: ask again soon, not backing off */
			u->io->req_time_set(u->io->ctx, pid, now + BACKOFF_MIN_NS);
		procmaps_free(&pm);
		return 0;
	}
	is64 = is_64bit_process(u, pid);
	if (!is64) {
		/* 32-bit code: the kernel's frame-pointer walk knows its frame layout. */
		procmaps_free(&pm);
		if (p)
			unw_proc_drop(u, pid, false);
		val = (struct prowl_unwind_proc){ PROWL_PROC_FP, 0 };
		return u->io->proc_set(u->io->ctx, pid, &val);
	}
	ents = calloc(pm.n, sizeof(*ents));
	tabs = calloc(pm.n, sizeof(*tabs));
	if (!ents || !tabs) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < pm.n; i++) {
		const struct pm_entry *e = &pm.v[i];
		struct prowl_unwind_map *m = &ents[i];
		const struct obj_load *l;
		struct table *t = NULL;
		bool unreadable = false;
		uint64_t bias;

		m->start = e->start;
		m->end = e->end;
		m->kind = PROWL_MAP_FP;
		if (e->kind == PM_VDSO)
			t = unw_vdso_table(u);
		else if (e->kind == PM_FILE)
			t = unw_file_table(u, pid, e, &unreadable);
		if (!t) {
			if (unreadable)
				m->kind = PROWL_MAP_NO_TABLE;
			continue;
		}
		if (t->state == T_FAILED) {
			m->kind = PROWL_MAP_NO_TABLE;
		} else if (t->state == T_LOADED &&
			   (l = obj_load_at(&t->obj->f, e->kind == PM_VDSO ? 0 : e->offset))) {
			bias = obj_load_bias(l, e->start, e->kind == PM_VDSO ? 0 : e->offset);
			m->kind = PROWL_MAP_TABLE;
			m->bias = bias + t->base;
			m->row_first = t->row_first;
			m->row_count = t->nrows;
			tabs[i] = t;
			if (!t->refs++)
				u->st.tables_in_use++;
			t->last_used_ns = now;
		}
	}
	extent_reclaim(&u->maps, false);
	r = extent_alloc(&u->maps, (uint32_t)pm.n, &first);
	if (r < 0 && extent_reclaim(&u->maps, true))
		r = extent_alloc(&u->maps, (uint32_t)pm.n, &first);
	if (r < 0) {
		note_capacity(u, pid, false);
		goto undo;
	}
	py_offer(u, pid, &pm, tabs);
	java_pending = jvm_offer(u, pid, &pm, tabs);
	v8_offer(u, pid, &pm, tabs, p != NULL);
	r = u->io->maps_write(u->io->ctx, first, ents, pm.n);
	if (r < 0) {
		extent_release(&u->maps, first, (uint32_t)pm.n);
		goto undo;
	}
	val = (struct prowl_unwind_proc){ first, (uint32_t)pm.n };
	r = u->io->proc_set(u->io->ctx, pid, &val);
	if (r < 0) {
		extent_release(&u->maps, first, (uint32_t)pm.n);
		if (r == -E2BIG || r == -ENOMEM || r == -ENOSPC)
			note_capacity(u, pid, true);
		goto undo;
	}
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || u64map_put(&u->procs, pid, (uint64_t)(uintptr_t)p) < 0) {
			/* Published but not tracked: take it back. */
			free(p);
			u->io->proc_del(u->io->ctx, pid);
			extent_defer(&u->maps, first, (uint32_t)pm.n);
			r = -ENOMEM;
			goto undo;
		}
		p->pid = pid;
		u->st.procs++;
	} else {
		proc_release(u, p);
	}
	p->map_first = first;
	p->map_count = (uint32_t)pm.n;
	p->tables = tabs;
	p->ntables = pm.n;
	log_debug("unwind: pid %" PRIu32 ": %zu executable mappings loaded in %.2f ms", pid, pm.n, (clock_mono_ns() - now) / 1e6);
	p->sig = sig;
	p->loaded_ns = now;
	p->backoff_ns = 0;
	p->java_pending = java_pending;
	tabs = NULL;
	r = 0;
	goto out;
undo:
	for (size_t i = 0; i < pm.n; i++) {
		if (tabs[i] && !--tabs[i]->refs && tabs[i]->state == T_LOADED)
			u->st.tables_in_use--;
	}
out:
	free(ents);
	free(tabs);
	procmaps_free(&pm);
	return r;
}
