/* unwinder.h: the user-space half of DWARF unwinding: loads each object's unwind table
 * and each process's executable mappings into the BPF unwinder's maps, through the
 * calls the sampler supplies (maps_io.h): the sampler owns the maps.
 *
 * A table is built once per object of the object cache (objcache.h), shared by
 * all processes that map it. Driven by events from BPF (unknown pid, unknown
 * pc, exec, exit); never rescans /proc on its own except a slow liveness sweep. */
#ifndef PROWL_UNWINDER_H
#define PROWL_UNWINDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include "prowl.h"
#include "maps_io.h"

struct unwinder;

/* The range of each capacity, the same for `record`'s flags and the agent's keys. */
#define UNWIND_ROWS_MIN  65536u
#define UNWIND_ROWS_MAX  268435456u
#define UNWIND_MAPS_MIN  1024u
#define UNWIND_MAPS_MAX  16777216u
#define UNWIND_PROCS_MIN 64u
#define UNWIND_PROCS_MAX 4194304u

/* What a person sets to raise each capacity ("--unwind-max-rows",
 * "limits.unwind_table_rows"): the warnings name it. NULL: a generic phrase. */
struct unwind_limit_names {
	const char *rows, *maps, *procs;
};

struct objcache;

struct unwinder_opts {
	const char *proc_root;   /* "/proc" unless tests point elsewhere */
	struct unwind_limit_names names;
	struct objcache *objects; /* where object files come from; NULL: the process-wide
				   * cache, which the symbolizer shares */
	bool python_off;          /* --python=off: no CPython process is registered */
	bool java_off;            /* --java=off: no JVM is registered */
	bool node_off;            /* --node=off: no node process is registered */
};

struct unwind_stats {
	uint32_t tables;             /* objects with rows loaded (in use or cached) */
	uint32_t tables_in_use;      /* ... mapped by at least one known process */
	uint32_t procs, procs_capacity;
	uint64_t rows_used, rows_capacity;     /* rows in the BPF array; 8 bytes each */
	uint64_t maps_used, maps_capacity;     /* mapping entries in the BPF array */
	uint64_t tables_built, table_build_errors, tables_evicted;
	uint64_t table_build_ns;               /* total time spent building tables */
	uint64_t rows_full, maps_full, procs_full; /* capacity limits hit (each logged once) */
	uint64_t maps_reads;                   /* /proc/PID/maps reads */
	uint64_t events;                       /* events received from BPF */
};

/* io: the sampler's maps; it must outlive the unwinder. */
int unwinder_new(const struct unwinder_opts *opts, const struct maps_io *io, struct unwinder **ret);
void unwinder_free(struct unwinder *u); /* accepts NULL */
/* Loads pid's mappings now (e.g. a -p target before sampling starts). */
int unwinder_add_pid(struct unwinder *u, uint32_t pid);
/* Queues one event from the unwind_events ring buffer. */
void unwinder_event(struct unwinder *u, const struct prowl_unwind_event *ev);
/* Handles queued events (loads processes and tables); cheap when idle. */
void unwinder_work(struct unwinder *u);
void unwinder_get_stats(const struct unwinder *u, struct unwind_stats *ret);

#endif
