/* unwinder.c: loads unwind tables and process mappings into the BPF unwinder's maps.
 *
 * Tables: one per object of the object cache (objcache.h: copies of a file are
 * one object, and a file already seen is not even opened again). Rows live in
 * one mmap'ed BPF array; each table is a contiguous extent of it. A table
 * nobody maps stays loaded as a cache until its space is needed (least
 * recently used first); then it is dropped with its reference to the object.
 * Processes: each known process has a contiguous, sorted extent of mapping
 * entries in a second mmap'ed array and an entry in the procs hash pointing at
 * it. A process is (re)loaded when BPF reports it unknown or reports a pc in no
 * known mapping (dlopen); exec and exit events drop it. Freed extents wait a
 * short grace period before reuse, since a BPF program may still be reading.
 * The maps are the sampler's: every write goes through its maps_io.h calls. */
#include "unwinder.h"
#include "unwinder_priv.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clock.h"
#include "log.h"

int unwinder_new(const struct unwinder_opts *opts, const struct maps_io *io, struct unwinder **ret)
{
	struct unwinder *u = calloc(1, sizeof(*u));
	int r = -ENOMEM;

	if (!u)
		return -ENOMEM;
	u->opts = *opts;
	u->io = io;
	u->proc_root = strdup(opts->proc_root ? opts->proc_root : "/proc");
	u->objs = opts->objects ? objcache_ref(opts->objects) : objcache_shared();
	if (!u->proc_root || !u->objs)
		goto fail;
	if ((r = extent_init(&u->rows, io->max_rows, GRACE_NS)) < 0 ||
	    (r = extent_init(&u->maps, io->max_maps, GRACE_NS)) < 0)
		goto fail;
	u->st.rows_capacity = io->max_rows;
	u->st.maps_capacity = io->max_maps;
	u->st.procs_capacity = io->max_procs;
	u->next_sweep_ns = clock_mono_ns() + SWEEP_NS;
	elf_version(EV_CURRENT);
	*ret = u;
	return 0;
fail:
	unwinder_free(u);
	return r;
}

void unwinder_free(struct unwinder *u)
{
	uint32_t pos = 0;
	uint64_t k, v;

	if (!u)
		return;
	while (u64map_next(&u->procs, &pos, &k, &v)) {
		unw_proc_free((struct uproc *)(uintptr_t)v);
	}
	u64map_free(&u->procs);
	u64map_free(&u->pending);
	u64map_free(&u->failed);
	for (size_t i = 0; i < u->ntables; i++)
		unw_table_free(u, u->tables[i]);
	free(u->tables);
	u64map_free(&u->by_obj);
	objcache_unref(u->objs);
	extent_fini(&u->rows);
	extent_fini(&u->maps);
	free(u->proc_root);
	free(u);
}

int unwinder_add_pid(struct unwinder *u, uint32_t pid)
{
	char path[64];
	struct stat a, b;

	/* A child forked by prowl that has not exec'ed yet (`record -- COMMAND`)
	 * maps prowl itself: nothing to preload, its exec brings the real code. */
	snprintf(path, sizeof(path), "%s/%" PRIu32 "/exe", u->proc_root, pid);
	if (stat(path, &a) == 0 && stat("/proc/self/exe", &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		return 0;
	return unw_proc_load(u, pid, true);
}

void unwinder_event(struct unwinder *u, const struct prowl_unwind_event *ev)
{
	uint64_t mask = 0;

	u->st.events++;
	if (ev->type == 0 || ev->type > 31)
		return;
	u64map_get(&u->pending, ev->pid, &mask);
	u64map_put(&u->pending, ev->pid, mask | (1ull << ev->type));
}

static void sweep(struct unwinder *u)
{
	uint32_t pos = 0, *dead = NULL;
	size_t n = 0, cap = 0;
	uint64_t k, v, now = clock_mono_ns();

	while (u64map_next(&u->procs, &pos, &k, &v)) {
		if (kill((pid_t)k, 0) == 0 || errno != ESRCH)
			continue;
		if (n == cap) {
			uint32_t *d = realloc(dead, (cap ? cap * 2 : 64) * sizeof(*d));

			if (!d)
				break;
			dead = d;
			cap = cap ? cap * 2 : 64;
		}
		dead[n++] = (uint32_t)k;
	}
	for (size_t i = 0; i < n; i++)
		unw_proc_drop(u, dead[i], true);
	free(dead);
	pos = 0;
	n = 0;
	while (u64map_next(&u->failed, &pos, &k, &v)) {
		if (now - v >= RETRY_NS)
			n++;
	}
	if (n && n == u->failed.count)
		u64map_free(&u->failed); /* all expired */
}

void unwinder_work(struct unwinder *u)
{
	uint64_t now = clock_mono_ns();

	while (u->pending.count) {
		struct u64map batch = u->pending;
		uint32_t pos = 0;
		uint64_t pid, mask;

		memset(&u->pending, 0, sizeof(u->pending));
		while (u64map_next(&batch, &pos, &pid, &mask)) {
			struct uproc *p;
			int r = 0;

			if (mask & (1ull << PROWL_UEV_EXIT)) {
				unw_proc_drop(u, (uint32_t)pid, false);
				continue;
			}
			if (mask & (1ull << PROWL_UEV_EXEC))
				unw_proc_drop(u, (uint32_t)pid, false);
			p = unw_proc_get(u, (uint32_t)pid);
			if (mask & (1ull << PROWL_UEV_UNKNOWN_PID))
				r = unw_proc_load(u, (uint32_t)pid, true);
			else if ((mask & (1ull << PROWL_UEV_UNKNOWN_PC)) && (!p || now - p->loaded_ns >= RELOAD_MIN_NS))
				r = unw_proc_load(u, (uint32_t)pid, false);
			if (r < 0 && r != -ESRCH)
				log_debug("unwind: cannot load pid %" PRIu64 ": %s", pid, strerror(-r));
		}
		u64map_free(&batch);
	}
	if (now >= u->next_sweep_ns) {
		sweep(u);
		extent_reclaim(&u->rows, false);
		extent_reclaim(&u->maps, false);
		u->next_sweep_ns = now + SWEEP_NS;
	}
}

void unwinder_get_stats(const struct unwinder *u, struct unwind_stats *ret)
{
	*ret = u->st;
	ret->rows_used = u->rows.used;
	ret->maps_used = u->maps.used;
}

