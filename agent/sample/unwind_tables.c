/* unwind_tables.c: the unwinder's tables: built once per object of the object cache,
 * stored as one extent of the BPF rows array, kept while unused until the space is needed. */
#include "unwinder_priv.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/sysmacros.h>

#include "clock.h"
#include "diskcache.h"
#include "log.h"
#include "objcache.h"
#include "table_cache.h"
#include "unwind_table.h"

void unw_table_free(struct unwinder *u, struct table *t)
{
	if (!t)
		return;
	object_unref(u->objs, t->obj);
	free(t->jvm);
	free(t->v8);
	free(t);
}

/* Drops the least recently used table that no process maps, and with it the
 * unwinder's reference to its object (a process mapping it again brings both
 * back). */
static bool evict_one(struct unwinder *u)
{
	struct table *victim = NULL;
	size_t at = 0;

	for (size_t i = 0; i < u->ntables; i++) {
		struct table *t = u->tables[i];

		if (t->state == T_LOADED && !t->refs && (!victim || t->last_used_ns < victim->last_used_ns)) {
			victim = t;
			at = i;
		}
	}
	if (!victim)
		return false;
	extent_defer(&u->rows, victim->row_first, victim->nrows);
	u->st.tables_evicted++;
	u->st.tables--;
	log_debug("unwind: evicted the table of %s (unused) to make room", victim->obj->path);
	u->tables[at] = u->tables[--u->ntables];
	u64map_del(&u->by_obj, victim->obj->id);
	if (u->vdso == victim)
		u->vdso = NULL;
	unw_table_free(u, victim);
	return true;
}

/* Puts built rows into the BPF array. */
static void table_store(struct unwinder *u, struct table *t, const struct unwind_table *ut)
{
	uint32_t first;

	if (ut->n == 0) {
		t->state = T_NO_CFI;
		return;
	}
	/* BPF's binary search takes at most 25 steps: 32M rows per table. */
	if (ut->n > u->io->max_rows || ut->n > (1u << 25))
		goto full;
	extent_reclaim(&u->rows, false);
	while (extent_alloc(&u->rows, (uint32_t)ut->n, &first) < 0) {
		if (extent_reclaim(&u->rows, true))
			continue;
		if (!evict_one(u))
			goto full;
	}
	if (u->io->rows_write(u->io->ctx, first, ut->rows, ut->n) < 0) {
		extent_release(&u->rows, first, (uint32_t)ut->n);
		t->state = T_FAILED;
		t->failed_ns = clock_mono_ns();
		u->st.table_build_errors++;
		return;
	}
	t->row_first = first;
	t->nrows = (uint32_t)ut->n;
	t->base = ut->base;
	t->state = T_LOADED;
	t->capacity_fail = false;
	u->st.tables++;
	return;
full:
	t->state = T_FAILED;
	t->capacity_fail = true;
	t->failed_ns = clock_mono_ns();
	u->st.rows_full++;
	if (!u->logged_rows_full) {
		u->logged_rows_full = true;
		log_warn("unwind table space is full (%" PRIu32 " rows): %s needs %zu rows; its frames are unwound with "
			 "frame pointers and marked truncated. Raise %s to avoid this",
			 u->io->max_rows, t->obj->path, ut->n, u->opts.names.rows ?: "the unwind row limit");
	}
}

/* A new table for object o, taking its reference (given back on failure). */
static struct table *table_new(struct unwinder *u, struct object *o)
{
	struct table *t = calloc(1, sizeof(*t));

	if (!t) {
		object_unref(u->objs, o);
		return NULL;
	}
	t->obj = o;
	if (u->ntables == u->captables) {
		size_t cap = u->captables ? u->captables * 2 : 64;
		struct table **v = realloc(u->tables, cap * sizeof(*v));

		if (!v) {
			unw_table_free(u, t);
			return NULL;
		}
		u->tables = v;
		u->captables = cap;
	}
	if (u64map_put(&u->by_obj, o->id, (uint64_t)(uintptr_t)t) < 0) {
		unw_table_free(u, t);
		return NULL;
	}
	u->tables[u->ntables++] = t;
	return t;
}

/* The table of object o, whose reference it takes (or gives back when the
 * table already holds one). */
static struct table *table_of(struct unwinder *u, struct object *o)
{
	uint64_t v;

	if (!u64map_get(&u->by_obj, o->id, &v))
		return table_new(u, o);
	object_unref(u->objs, o);
	return (struct table *)(uintptr_t)v;
}

/* Builds t's rows from elf, of file (NULL: an image in memory). */
static void table_build(struct unwinder *u, struct table *t, Elf *elf, const struct obj_file *file)
{
	struct unwind_table ut;
	struct diskcache *dc = objcache_disk(u->objs);
	uint64_t t0 = clock_mono_ns(), dt;
	bool cached;
	int r;

	if (!t->obj->f.nloads) {
		t->state = T_NO_CFI;
		return;
	}
	if (py_proc_wanted(u->io, u->opts.python_off))
		py_detect_elf(elf, t->obj->path, &t->py);
	if (!u->opts.java_off && u->io->java_proc_set && !t->jvm) {
		struct jvm_elf je;

		if (jvm_detect_elf(elf, &je) == 0 && je.found && (t->jvm = calloc(1, sizeof(*t->jvm))))
			t->jvm->elf = je;
	}
	if (!u->opts.node_off && u->io->v8_proc_set && !t->v8_checked) {
		t->v8_checked = true;
		t->v8 = v8_file_detect(elf, t->obj->path);
	}
	if (object_broken(t->obj)) {
		t->state = T_FAILED;
		return;
	}
	/* A trusted file's table from a previous run, else built (and kept). */
	cached = unwind_table_cached(dc, t->obj, &ut) == 0;
	r = cached ? 0 : unwind_table_build(elf, &ut);
	dt = clock_mono_ns() - t0;
	u->st.table_build_ns += dt;
	/* An untrusted file is read with pread(): one that changed meanwhile
	 * gave a partial table, or rows of two files. */
	if (r == 0 && file && !file->ident.trusted && obj_file_unchanged(file->fd, &file->ident) == -ESTALE) {
		objcache_mark_broken(u->objs, t->obj);
		unwind_table_free(&ut);
		u->st.table_build_errors++;
		t->state = T_FAILED;
		return;
	}
	if (r < 0) {
		u->st.table_build_errors++;
		t->state = r == -ENOMEM ? T_FAILED : T_NO_CFI;
		t->failed_ns = clock_mono_ns();
		log_debug("unwind: no table for %s: %s", t->obj->path, strerror(-r));
		return;
	}
	u->st.tables_built++;
	if (!cached)
		unwind_table_keep(dc, t->obj, &ut);
	table_store(u, t, &ut);
	log_debug("unwind: table for %s: %zu rows (%zu KiB), %u FDEs, %u rows BPF cannot use, built in %.2f ms%s",
		  t->obj->path, ut.n, unwind_table_bytes(&ut) / 1024, ut.st.fdes, ut.st.rows_bad, dt / 1e6,
		  cached ? " (from state_dir/cache)" : t->state == T_LOADED ? "" : " (not loaded)");
	unwind_table_free(&ut);
}

/* The vdso is the same image in every 64-bit process: use this process's. */
struct table *unw_vdso_table(struct unwinder *u)
{
	unsigned long base;
	struct object *o;
	struct table *t;
	size_t size = 0;
	FILE *f;
	char line[512];
	Elf *elf;

	if (u->vdso)
		return u->vdso;
	base = getauxval(AT_SYSINFO_EHDR);
	f = fopen("/proc/self/maps", "re");
	if (!base || !f) {
		if (f)
			fclose(f);
		return NULL;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;

		if (strstr(line, "[vdso]") && sscanf(line, "%lx-%lx", &s, &e) == 2 && s == base) {
			size = e - s;
			break;
		}
	}
	fclose(f);
	if (!size || objcache_get_image(u->objs, (const void *)base, size, &o) < 0)
		return NULL;
	t = table_of(u, o);
	if (!t)
		return NULL;
	if (!t->state) {
		t->state = T_NO_CFI;
		elf = elf_memory((char *)base, size);
		if (elf) {
			table_build(u, t, elf, NULL);
			elf_end(elf);
		}
	}
	u->vdso = t;
	return t;
}

/* Whether t is to be built (again): new, or its rows did not fit a while ago. */
static bool table_wanted(const struct table *t)
{
	return !t->state || (t->state == T_FAILED && t->capacity_fail && clock_mono_ns() - t->failed_ns >= RETRY_NS);
}

/* The table of the file mapped at e, or NULL; *ret_unreadable when the file
 * is there but prowl could not open it (a capability is missing, it was
 * deleted or replaced): its frames are unwound with frame pointers, and the
 * stacks through them say that its table is missing. */
struct table *unw_file_table(struct unwinder *u, uint32_t pid, const struct pm_entry *e, bool *ret_unreadable)
{
	struct obj_source src = {
		.proc_root = u->proc_root, .pid = pid, .start = e->start, .end = e->end,
		.dev = makedev(e->dev_major, e->dev_minor), .ino = e->inode, .path = e->path,
	};
	struct obj_file file;
	struct object *o;
	struct table *t;
	int r;

	r = objcache_get(u->objs, &src, &o, &file);
	if (r < 0) {
		*ret_unreadable = r == -EPERM || r == -EACCES || r == -ESTALE;
		return NULL;
	}
	t = table_of(u, o);
	if (t && table_wanted(t)) {
		/* The file is open when the cache had to read it; else open it now. */
		if (file.elf || objcache_open(u->objs, t->obj, &src, &file) == 0)
			table_build(u, t, file.elf, &file);
	}
	obj_file_close(&file);
	return t;
}
