/* maps_io.h: what user space may do with the BPF maps, as calls the sampler supplies
 * (agent/sample/maps_io.c, the one owner of the maps); the unwinder and the runtimes use it. */
#ifndef PROWL_MAPS_IO_H
#define PROWL_MAPS_IO_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include "prowl.h"

/* Each call returns 0 or a negative errno. ctx is the sampler's. The maps are
 * the sampler's too: a struct maps_io is valid until the sampler is freed. */
struct maps_io {
	void *ctx;
	uint32_t max_rows, max_maps, max_procs; /* capacities of unwind_rows, unwind_maps, unwind_procs */
	/* Writes n rows (map entries) at index first of unwind_rows (unwind_maps). */
	int (*rows_write)(void *ctx, uint32_t first, const struct prowl_unwind_row *rows, size_t n);
	int (*maps_write)(void *ctx, uint32_t first, const struct prowl_unwind_map *ents, size_t n);
	/* unwind_procs: tgid -> its extent of unwind_maps (or PROWL_PROC_FP). */
	int (*proc_set)(void *ctx, uint32_t pid, const struct prowl_unwind_proc *val);
	void (*proc_del)(void *ctx, uint32_t pid);
	/* unwind_req_time: BPF asks about pid again no sooner than until_ns. */
	void (*req_time_set)(void *ctx, uint32_t pid, uint64_t until_ns);
	/* py_procs, the CPython walk's processes; all three NULL when it is off. */
	int (*py_proc_set)(void *ctx, uint32_t pid, const struct prowl_py_proc *pp);
	void (*py_proc_del)(void *ctx, uint32_t pid);
	int (*py_proc_get)(void *ctx, uint32_t pid, struct prowl_py_proc *ret);
	/* java_procs, the Java walk's processes; all three NULL when it is off. */
	int (*java_proc_set)(void *ctx, uint32_t pid, const struct prowl_java_proc *jp);
	void (*java_proc_del)(void *ctx, uint32_t pid);
	int (*java_proc_get)(void *ctx, uint32_t pid, struct prowl_java_proc *ret);
	/* v8_procs, the V8 walk's processes; all three NULL when it is off. */
	int (*v8_proc_set)(void *ctx, uint32_t pid, const struct prowl_v8_proc *vp);
	void (*v8_proc_del)(void *ctx, uint32_t pid);
	int (*v8_proc_get)(void *ctx, uint32_t pid, struct prowl_v8_proc *ret);
};

#endif
