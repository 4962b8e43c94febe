/* unwind.c: loads unwind tables and process mappings into the BPF unwinder's maps.
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
#include "unwind.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "intern.h"
#include "clock.h"
#include "extent.h"
#include "log.h"
#include "objcache.h"
#include "procmaps.h"
#include "jvmproc.h"
#include "pyproc.h"
#include "u64map.h"
#include "unwind_table.h"

#define GRACE_NS          (20ull * 1000 * 1000)     /* freed extents: reuse after this */
#define RETRY_NS          (5ull * 1000 * 1000 * 1000) /* capacity failures: retry after */
#define RELOAD_MIN_NS     (10ull * 1000 * 1000)     /* one pid's maps: at most this often */
#define BACKOFF_MIN_NS    (250ull * 1000 * 1000)    /* quiet time after a useless refresh... */
#define BACKOFF_MAX_NS    (8ull * 1000 * 1000 * 1000) /* ...doubling up to this */
#define SWEEP_NS          (5ull * 1000 * 1000 * 1000) /* liveness sweep of known pids */

/* ---- tables ---- */

enum tstate { T_LOADED = 1, T_NO_CFI, T_FAILED };

struct table {
	struct object *obj;     /* a reference */
	enum tstate state;
	bool capacity_fail;     /* T_FAILED for lack of rows: retried later */
	uint32_t row_first, nrows;
	uint64_t base;          /* ELF vaddr of row pc 0 */
	uint32_t refs;          /* mapping entries of known processes */
	uint64_t last_used_ns, failed_ns;
	struct py_elf py;       /* CPython's _PyRuntime and types, when it has them */
	struct jvm_file *jvm;   /* HotSpot's libjvm: its symbols and metadata (NULL: not one) */
	bool py_logged;         /* its unsupported version was logged */
};

struct uproc {
	uint32_t pid;
	uint32_t map_first, map_count; /* map_count 0: no extent */
	struct table **tables;         /* referenced tables, one per mapping (NULL if none) */
	size_t ntables;
	uint64_t sig;                  /* signature of the executable mappings */
	uint64_t loaded_ns;
	uint64_t backoff_ns;           /* after refreshes that found nothing new */
	bool java_pending;             /* a JVM whose code cache was not set up yet */
};

struct unwinder {
	struct unwinder_opts opts;
	const struct maps_io *io;    /* the sampler's maps */
	char *proc_root;
	struct extent_space rows, maps;
	struct objcache *objs;       /* where object files come from (shared with the symbolizer) */
	struct u64map by_obj;        /* object id -> table */
	struct table *vdso;          /* the vdso's table (NULL: not found yet) */
	struct table **tables;       /* every table, for eviction */
	size_t ntables, captables;
	struct u64map procs;         /* pid -> struct uproc * */
	struct u64map pending;       /* pid -> event type bitmask */
	struct u64map failed;        /* pid -> time of a capacity failure */
	uint64_t next_sweep_ns;
	uint32_t py_gen;             /* last prowl_py_proc.gen given out */
	uint32_t java_gen;           /* last prowl_java_proc.gen given out */
	bool logged_rows_full, logged_maps_full, logged_procs_full;
	struct unwind_stats st;
};

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

static void table_free(struct unwinder *u, struct table *t)
{
	if (!t)
		return;
	object_unref(u->objs, t->obj);
	free(t->jvm);
	free(t);
}

static void proc_free(struct uproc *p)
{
	if (!p)
		return;
	free(p->tables);
	free(p);
}

void unwinder_free(struct unwinder *u)
{
	uint32_t pos = 0;
	uint64_t k, v;

	if (!u)
		return;
	while (u64map_next(&u->procs, &pos, &k, &v)) {
		proc_free((struct uproc *)(uintptr_t)v);
	}
	u64map_free(&u->procs);
	u64map_free(&u->pending);
	u64map_free(&u->failed);
	for (size_t i = 0; i < u->ntables; i++)
		table_free(u, u->tables[i]);
	free(u->tables);
	u64map_free(&u->by_obj);
	objcache_unref(u->objs);
	extent_fini(&u->rows);
	extent_fini(&u->maps);
	free(u->proc_root);
	free(u);
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
	table_free(u, victim);
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
			table_free(u, t);
			return NULL;
		}
		u->tables = v;
		u->captables = cap;
	}
	if (u64map_put(&u->by_obj, o->id, (uint64_t)(uintptr_t)t) < 0) {
		table_free(u, t);
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
	uint64_t t0 = clock_mono_ns(), dt;
	int r;

	if (!t->obj->f.nloads) {
		t->state = T_NO_CFI;
		return;
	}
	if (!u->opts.python_off && u->io->py_proc_set)
		py_detect_elf(elf, t->obj->path, &t->py);
	if (!u->opts.java_off && u->io->java_proc_set && !t->jvm) {
		struct jvm_elf je;

		if (jvm_detect_elf(elf, &je) == 0 && je.found && (t->jvm = calloc(1, sizeof(*t->jvm))))
			t->jvm->elf = je;
	}
	if (object_broken(t->obj)) {
		t->state = T_FAILED;
		return;
	}
	r = unwind_table_build(elf, &ut);
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
	table_store(u, t, &ut);
	log_debug("unwind: table for %s: %zu rows (%zu KiB), %u FDEs, %u rows BPF cannot use, built in %.2f ms%s",
		  t->obj->path, ut.n, unwind_table_bytes(&ut) / 1024, ut.st.fdes, ut.st.rows_bad, dt / 1e6,
		  t->state == T_LOADED ? "" : " (not loaded)");
	unwind_table_free(&ut);
}

/* The vdso is the same image in every 64-bit process: use this process's. */
static struct table *vdso_table(struct unwinder *u)
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
static struct table *file_table(struct unwinder *u, uint32_t pid, const struct pm_entry *e, bool *ret_unreadable)
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

static struct uproc *proc_get(struct unwinder *u, uint32_t pid)
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

static void proc_drop(struct unwinder *u, uint32_t pid, bool delete_bpf)
{
	struct uproc *p = proc_get(u, pid);

	if (delete_bpf) {
		u->io->proc_del(u->io->ctx, pid);
		if (u->io->py_proc_del)
			u->io->py_proc_del(u->io->ctx, pid);
	}
	if (!p)
		return;
	proc_release(u, p);
	u64map_del(&u->procs, pid);
	proc_free(p);
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

/* Reads pid's executable mappings and publishes them. force: publish even when
 * they did not change (BPF lost the entry). */
/* Tells the BPF walk about a CPython process: the first mapping of an object
 * that exports _PyRuntime (the executable, or libpython) gives its address. */
static void py_register(struct unwinder *u, uint32_t pid, const struct procmaps *pm, struct table **tabs)
{
	if (!u->io->py_proc_set || u->opts.python_off)
		return;
	for (size_t i = 0; i < pm->n; i++) {
		const struct pm_entry *e = &pm->v[i];
		struct table *t = tabs[i];
		const struct obj_load *l;

		if (!t || !t->py.found || e->kind != PM_FILE || !(l = obj_load_at(&t->obj->f, e->offset)))
			continue;
		py_proc_register(u->io, pid, &t->py, obj_load_bias(l, e->start, e->offset), ++u->py_gen,
				 t->obj->path, &t->py_logged);
		return;
	}
	u->io->py_proc_del(u->io->ctx, pid);
}

/* Tells the BPF Java walk about a JVM: the mapping of libjvm's first page gives
 * its load bias. Returns true while the JVM is starting (ask again later). */
static bool jvm_register(struct unwinder *u, uint32_t pid, const struct procmaps *pm, struct table **tabs)
{
	if (!u->io->java_proc_set || u->opts.java_off)
		return false;
	for (size_t i = 0; i < pm->n; i++) {
		const struct pm_entry *e = &pm->v[i];
		struct table *t = tabs[i];
		const struct obj_load *l;

		if (!t || !t->jvm || e->kind != PM_FILE || !(l = obj_load_at(&t->obj->f, e->offset)))
			continue;
		return jvm_proc_register(u->io, pid, t->jvm, obj_load_bias(l, e->start, e->offset), ++u->java_gen,
					 t->obj->path) == -EAGAIN;
	}
	u->io->java_proc_del(u->io->ctx, pid);
	return false;
}

static int proc_load(struct unwinder *u, uint32_t pid, bool force)
{
	struct procmaps pm = {};
	struct prowl_unwind_map *ents = NULL;
	struct table **tabs = NULL;
	struct prowl_unwind_proc val;
	struct uproc *p = proc_get(u, pid);
	char path[64];
	uint32_t first = 0;
	uint64_t sig, failed_at, now = clock_mono_ns();
	bool is64, java_pending;
	FILE *f;
	int r;

	if (u64map_get(&u->failed, pid, &failed_at)) {
		if (now - failed_at < RETRY_NS)
			return -ENOSPC;
		u64map_del(&u->failed, pid);
	}
	snprintf(path, sizeof(path), "%s/%" PRIu32 "/maps", u->proc_root, pid);
	f = fopen(path, "re");
	if (!f) {
		proc_drop(u, pid, true);
		return -ESRCH;
	}
	u->st.maps_reads++;
	r = procmaps_parse(f, PROCMAPS_EXEC_ONLY, &pm, NULL);
	fclose(f);
	if (r < 0 || pm.n == 0) {
		/* Gone meanwhile (an empty file), or a kernel thread. */
		procmaps_free(&pm);
		proc_drop(u, pid, true);
		return r < 0 ? r : -ESRCH;
	}
	sig = maps_signature(&pm);
	if (p && p->sig == sig && p->map_count) {
		p->loaded_ns = now;
		if (p->java_pending && p->ntables == pm.n)
			p->java_pending = jvm_register(u, pid, &pm, p->tables);
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
			proc_drop(u, pid, false);
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
			t = vdso_table(u);
		else if (e->kind == PM_FILE)
			t = file_table(u, pid, e, &unreadable);
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
	py_register(u, pid, &pm, tabs);
	java_pending = jvm_register(u, pid, &pm, tabs);
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

int unwinder_add_pid(struct unwinder *u, uint32_t pid)
{
	char path[64];
	struct stat a, b;

	/* A child forked by prowl that has not exec'ed yet (`record -- COMMAND`)
	 * maps prowl itself: nothing to preload, its exec brings the real code. */
	snprintf(path, sizeof(path), "%s/%" PRIu32 "/exe", u->proc_root, pid);
	if (stat(path, &a) == 0 && stat("/proc/self/exe", &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		return 0;
	return proc_load(u, pid, true);
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
		proc_drop(u, dead[i], true);
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
				proc_drop(u, (uint32_t)pid, false);
				continue;
			}
			if (mask & (1ull << PROWL_UEV_EXEC))
				proc_drop(u, (uint32_t)pid, false);
			p = proc_get(u, (uint32_t)pid);
			if (mask & (1ull << PROWL_UEV_UNKNOWN_PID))
				r = proc_load(u, (uint32_t)pid, true);
			else if ((mask & (1ull << PROWL_UEV_UNKNOWN_PC)) && (!p || now - p->loaded_ns >= RELOAD_MIN_NS))
				r = proc_load(u, (uint32_t)pid, false);
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
