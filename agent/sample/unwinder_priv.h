/* unwinder_priv.h: the unwinder's state and the calls between its three files (unwinder.c:
 * events and the work loop; unwind_tables.c: one table per object; unwind_procs.c: each
 * process's mappings); private to agent/sample/. */
#ifndef PROWL_UNWINDER_PRIV_H
#define PROWL_UNWINDER_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "extent.h"
#include "jvmproc.h"
#include "objcache.h"
#include "procmaps_read.h"
#include "pyproc.h"
#include "u64map.h"
#include "v8proc.h"
#include "unwinder.h"

#define GRACE_NS          (20ull * 1000 * 1000)     /* freed extents: reuse after this */
#define RETRY_NS          (5ull * 1000 * 1000 * 1000) /* capacity failures: retry after */
#define RELOAD_MIN_NS     (10ull * 1000 * 1000)     /* one pid's maps: at most this often */
#define BACKOFF_MIN_NS    (250ull * 1000 * 1000)    /* quiet time after a useless refresh... */
#define BACKOFF_MAX_NS    (8ull * 1000 * 1000 * 1000) /* ...doubling up to this */
#define SWEEP_NS          (5ull * 1000 * 1000 * 1000) /* liveness sweep of known pids */

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
	bool py_logged;         /* its unsupported version was logged */
	struct jvm_file *jvm;   /* HotSpot's libjvm: its symbols and metadata (NULL: not one) */
	struct v8_file *v8;     /* a V8 (node) binary prowl can walk (NULL: not one) */
	bool v8_checked;        /* v8 was looked for (a V8 without metadata was warned about) */
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
	uint32_t v8_gen;             /* last prowl_v8_proc.gen given out */
	bool logged_rows_full, logged_maps_full, logged_procs_full;
	struct unwind_stats st;
};

/* ---- unwind_tables.c ---- */

void unw_table_free(struct unwinder *u, struct table *t); /* accepts NULL */
/* The vdso's table (this process's image: the same in every 64-bit process), or NULL. */
struct table *unw_vdso_table(struct unwinder *u);
/* The table of the file mapped at e by pid, built and loaded on first use, or NULL;
 * *ret_unreadable when the file is there but prowl could not open it. */
struct table *unw_file_table(struct unwinder *u, uint32_t pid, const struct pm_entry *e, bool *ret_unreadable);

/* ---- unwind_procs.c ---- */

void unw_proc_free(struct uproc *p); /* accepts NULL */
struct uproc *unw_proc_get(struct unwinder *u, uint32_t pid);
/* Forgets pid; delete_bpf: its entries in the BPF maps too. */
void unw_proc_drop(struct unwinder *u, uint32_t pid, bool delete_bpf);
/* Reads pid's executable mappings and publishes them. force: publish even when
 * they did not change (BPF lost the entry). Returns 0 or a negative errno. */
int unw_proc_load(struct unwinder *u, uint32_t pid, bool force);

#endif
