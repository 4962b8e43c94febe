/* symbolizer.h: the resolve stage. Maps sampled addresses to modules (via
 * /proc/PID/maps and kallsyms) and module addresses to source frames (ELF + DWARF). */
#ifndef PROWL_SYMBOLIZER_H
#define PROWL_SYMBOLIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "namecache.h"
#include "sym_frame.h"

struct objcache;

/* Caps bound the memory of a long-running symbolizer; 0 means the default.
 * Each is enforced with least-recently-used eviction. */
struct symbolizer_opts {
	const char *proc_root;      /* "/proc" unless tests point it elsewhere */
	const char *kallsyms;       /* "/proc/kallsyms" unless tests point it elsewhere */
	uint32_t max_cached_frames; /* frame cache entries (addresses); default 100000 */
	uint32_t max_modules;       /* modules with open ELF/DWARF state; default 48 */
	size_t max_module_heap;     /* heap those may hold, as measured while libdw
				     * works on them; default 16 MiB */
	uint32_t max_processes;     /* processes whose maps are kept; default 32768 */
	uint32_t max_gone_pids;     /* remembered exited pids (each also expires after
				     * 2 s); default 4096 */
	/* Compressed debug sections are inflated into unnamed files in this
	 * directory (page cache, not heap), up to inflate_max_bytes of files at
	 * once; NULL or 0: libdw inflates them in memory. */
	const char *inflate_dir;
	uint64_t inflate_max_bytes;
	/* The object cache to take object files from; NULL: the process-wide
	 * one, which the unwinder shares. */
	struct objcache *objects;
	uint64_t perfmap_max_bytes; /* JIT symbols of all processes' perf maps; default 32 MiB */
	/* Debug files fetched by build id (only when dbgd_setup_env() enabled it):
	 * the cache directory, its size cap, how long a miss is believed and how
	 * long one fetch may take; 0: the defaults (1 GiB, 10 min, 60 s). */
	const char *debuginfod_cache;
	uint64_t debuginfod_cache_bytes, debuginfod_miss_ttl_ns, debuginfod_timeout_ns;
	/* C++ and Rust linkage names: SYM_DEMANGLE_TEMPLATES (0, the default),
	 * SYM_DEMANGLE_FULL or SYM_DEMANGLE_NONE (see demangle.h). */
	int demangle;
};

struct symbolizer_stats {
	uint64_t frame_hits, frame_misses; /* symbolizer_frames cache */
	uint64_t maps_reads;               /* /proc/PID/maps read attempts */
	uint64_t frame_evictions;          /* cache entries dropped by max_cached_frames */
	uint64_t module_evictions;         /* modules closed by max_modules */
	uint64_t module_reopens;           /* closed modules opened again */
	uint64_t process_evictions;        /* live processes dropped by max_processes */
	uint32_t modules, processes;       /* modules includes the kernel and [anon] pseudo
					    * modules; processes counts live ones */
	uint32_t cached_frames;            /* frame cache entries */
	uint32_t open_modules;             /* modules holding ELF/DWARF state */
	uint64_t open_module_bytes;        /* heap they hold, as measured (max_module_heap) */
	uint32_t gone_pids;                /* remembered exited pids */
	uint64_t inflated_bytes;           /* size of the inflated debug files held now */
	uint64_t inflated_files;           /* inflated debug files made */
	uint64_t inflate_fallbacks;        /* inflations that failed or did not fit */
	uint64_t objects_broken;           /* object files that changed while prowl read them
					    * (the object cache's, shared with the unwinder) */
	uint64_t mem_bytes;                /* estimate of the heap held: caches, process maps,
					    * module identities, the object cache (shared with the
					    * unwinder), and the open modules' measured heap
					    * (symbol indexes, libdw state); mapped files are not
					    * counted */
	bool kernel_addrs_hidden;          /* kptr_restrict hid kallsyms addresses (known after
					    * the first kernel resolve) */
	uint64_t perfmap_bytes;            /* perf maps' JIT symbols held (also in mem_bytes) */
	uint64_t perfmap_symbols, perfmaps;
	uint64_t perfmap_dropped;          /* JIT symbols not kept: over perfmap_max_bytes */
	uint64_t perfmap_bad_lines;        /* perf map lines that were not START SIZE NAME */
	/* CPython code objects read (python/pyresolve.c): cached now, their heap (also in
	 * mem_bytes), lookups, evictions by the cache's cap, and failed reads. */
	uint64_t py_code_entries, py_code_bytes, py_code_hits, py_code_misses, py_code_evictions;
	uint64_t py_code_read_errors;
	/* Java frames named (java/jvmname.c): names cached now, their heap (also in
	 * mem_bytes), lookups by whether cached, and frames that got a marker. */
	struct name_cache_stats java_names;
	/* JavaScript frames named (node/v8name.c), the same figures. */
	struct name_cache_stats js_names;
	uint64_t java_name_miss_ns; /* time spent reading Java names not cached (first reads) */
	bool debuginfod;                   /* fetching is on */
	uint64_t debuginfod_fetched, debuginfod_missed, debuginfod_failed, debuginfod_evicted;
	uint64_t debuginfod_cache_bytes;
	/* The on-disk cache of the shared object cache (diskcache.h): all zero without one. */
	uint64_t disk_hits, disk_misses, disk_stores, disk_corrupt, disk_evicted, disk_bytes;
	uint32_t debuginfod_pending;
};

struct symbolizer;

/* Not thread-safe: one symbolizer is used by one thread at a time. Module
 * structs and their strings live until symbolizer_free(); frame strings only
 * until the next symbolizer_frames() call (which may evict them). */
int symbolizer_new(const struct symbolizer_opts *opts, struct symbolizer **ret);
void symbolizer_free(struct symbolizer *s); /* accepts NULL */

/* Finds the module and normalized address of a user address in process pid.
 * Reads /proc/PID/maps the first time pid is seen and again (rate limited) when
 * addr falls outside every known mapping. Returns -ESRCH when the process is gone
 * and was never seen (remembered, retried at most every 200 ms), -ENOENT when
 * addr is in no executable mapping. A process that exits keeps its last maps
 * until symbolizer_forget_process() or until max_processes evicts it (then a
 * later lookup reads /proc again). */
int symbolizer_resolve_user(struct symbolizer *s, uint32_t pid, uint64_t addr, struct sym_addr *ret);
/* Same for a kernel address (always succeeds once kallsyms was loaded or not). */
int symbolizer_resolve_kernel(struct symbolizer *s, uint64_t addr, struct sym_addr *ret);
/* Frames for a normalized address, innermost inlined callee first; at least one
 * (at most max: outer callers beyond max are dropped). When nothing is known the
 * single frame's function is "<name>+0x<hex>" (hex: file offset for ELF modules,
 * the address for the kernel/anon) and *ret_symbolized is false. Kernel frames:
 * function = kallsyms symbol, file = NULL for the core kernel and "[module]"
 * for module symbols, line 0. Results are cached per (module, addr) in an LRU
 * cache of max_cached_frames entries. The strings of frames[] stay valid until
 * the next symbolizer_frames() call or symbolizer_free(): copy what you keep.
 * A module whose file is gone when it must be reopened gets fallback names. */
int symbolizer_frames(struct symbolizer *s, const struct sym_module *mod, uint64_t addr,
		      struct sym_frame *frames, size_t max, size_t *ret_n, bool *ret_symbolized);
/* Takes the debug files debuginfod delivered since the last call: their
 * modules are reopened on their next lookup (the frame cache is emptied) and
 * their debug_gen grows. Returns how many modules changed. Cheap when nothing
 * arrived. */
int symbolizer_debuginfod_poll(struct symbolizer *s);
/* Waits until no fetch is queued or under way, at most timeout_ns, then polls.
 * Returns the modules that changed. */
int symbolizer_debuginfod_wait(struct symbolizer *s, uint64_t timeout_ns);
/* The module with this id, or NULL. */
const struct sym_module *symbolizer_module(struct symbolizer *s, uint32_t id);
/* The frame of an address in anonymous executable memory (a->mod is
 * SYM_MOD_ANON): the JIT symbol the perf map of a->pid names, else "[jit]", one
 * frame for the whole mapping. *ret_key is the address a location of it is
 * known by: the address itself when named, else the mapping's start. The map is
 * read again (at most every 250 ms) when an address is not in it. Strings live
 * until the next call. Returns 0 or -ENOMEM. */
int symbolizer_jit_frame(struct symbolizer *s, const struct sym_addr *a, struct sym_frame *ret, uint64_t *ret_key,
			 bool *ret_named);
/* Tells the symbolizer pid is gone or changed (exec): frees all its state.
 * Modules it mapped stay known. */
void symbolizer_forget_process(struct symbolizer *s, uint32_t pid);
/* Reads pid's maps now, e.g. at the start of a capture so early exits still resolve. */
int symbolizer_add_process(struct symbolizer *s, uint32_t pid);
/* The module of pid's main executable (first r-x mapping of /proc/PID/exe), or NULL. */
const struct sym_module *symbolizer_main_module(struct symbolizer *s, uint32_t pid);
/* The module of an ELF file on disk (shared with processes that map the same
 * file), e.g. for offline symbolization of normalized addresses. -ENOENT... */
int symbolizer_module_from_file(struct symbolizer *s, const char *path, const struct sym_module **ret);

/* Closes the ELF/DWARF state of modules unused for idle_ns (they reopen on
 * demand); a long-running agent calls it now and then to give memory back. */
void symbolizer_close_idle(struct symbolizer *s, uint64_t idle_ns);
/* Drops the resident pages of the object files the open modules have mapped
 * (they fault back in from the page cache when needed). Symbolization also
 * does it itself at most once a second while it looks addresses up, so RSS
 * holds only what recent lookups touched. */
void symbolizer_release_pages(struct symbolizer *s);

void symbolizer_get_stats(const struct symbolizer *s, struct symbolizer_stats *ret);

/* ---- Python frames (python/pyresolve.h) ---- */

struct py_resolver;

/* The symbolizer's namer of Python frames, whose code object cache is s's: the
 * sampler's maps are given to it with py_resolver_set_io(). */
struct py_resolver *symbolizer_python(struct symbolizer *s);

/* ---- Java frames (java/jvmname.h) ---- */

struct jvm_namer;

/* The symbolizer's namer of Java frames: the sampler's maps are given to it with
 * jvm_namer_set_io(). */
struct jvm_namer *symbolizer_java(struct symbolizer *s);

/* ---- JavaScript frames (node/v8name.h) ---- */

struct v8_namer;

/* The symbolizer's namer of node's JavaScript frames: the sampler's maps are given
 * to it with v8_namer_set_io(). */
struct v8_namer *symbolizer_node(struct symbolizer *s);

#endif
