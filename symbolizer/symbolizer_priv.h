/* symbolizer_priv.h: the symbolizer's state, private to symbolizer/ and shared by its four
 * files: symbolizer.c (kernel, frames), processes.c (process maps), modules.c (the modules
 * and their open state) and frame_names.c (the names they hand out). */
#ifndef PROWL_SYMBOLIZER_PRIV_H
#define PROWL_SYMBOLIZER_PRIV_H

#include "debuginfod.h"
#include "elf_module.h"
#include "frame_cache.h"
#include "intern.h"
#include "kallsyms.h"
#include "lru.h"
#include "objcache.h"
#include "perfmap.h"
#include "jvmname.h"
#include "v8name.h"
#include "pyresolve.h"
#include "procmaps_read.h"
#include "symbolizer.h"
#include "u64map.h"

/* malloc's own per-allocation overhead, for the memory estimate. */
#define MALLOC_OVERHEAD 16
/* Symbolization drops the file pages lookups touched at most this often. */
#define RELEASE_INTERVAL_NS (1000ull * 1000 * 1000)
/* ... and sooner when the file pages resident grew by this much since (checked at
 * most every RELEASE_CHECK_NS): a burst of first lookups in big objects at start-up
 * must not add their pages up. */
#define RELEASE_FILE_BYTES  (6ull << 20)
#define RELEASE_CHECK_NS    (20ull * 1000 * 1000)

struct symbolizer {
	char *proc_root, *kallsyms_path;
	struct intern *scratch;   /* strings of the symbolizer_frames() call under way */
	struct objcache *objs;    /* where object files come from (shared with the unwinder) */
	int demangle;             /* enum sym_demangle */
	struct u64map by_obj;     /* object id -> module (not owned) */
	struct intern *keys;      /* keys of modules without an object: "s:name", "f:dev:ino:path" */
	struct module **by_key;   /* key id -> module (not owned) */
	uint32_t by_key_cap;
	struct module **mods;     /* id - 1 -> module (owned) */
	uint32_t nmods, mods_cap;
	struct u64map procs;      /* pid -> struct proc * */
	struct lru_link live, gone;
	uint32_t nlive, ngone;
	struct lru_link open;     /* modules holding ELF/DWARF state */
	uint32_t nopen;
	struct module *kernel, *anon;
	struct kallsyms *ksyms;
	bool ksyms_tried;
	bool warned_map_files;    /* a file only map_files could open was logged */
	struct frame_cache frames;
	uint32_t max_modules, max_processes, max_gone;
	size_t max_module_heap, open_heap; /* cap on, and sum of, open modules' heap_bytes */
	uint64_t released_ns;              /* last symbolizer_release_pages() */
	uint64_t released_file_bytes;      /* file pages resident right after it */
	uint64_t checked_ns;               /* last look at the file pages resident */
	struct inflate_budget inflate;
	struct perfmap_budget perfmaps;
	struct dbgd *dbgd;        /* NULL: no debuginfod */
	struct py_resolver *py;   /* Python frames (python/pyresolve.c) */
	struct jvm_namer *java;   /* Java frames (java/jvmname.c) */
	struct v8_namer *node;    /* node's JavaScript frames (node/v8name.c) */
	size_t proc_bytes, mod_bytes;
	struct symbolizer_stats st;
};

/* ---- frame_names.c (below both symbolizer.c and processes.c) ---- */

/* str interned in t; *ret points into t. */
int sym_intern_cstr(struct intern *t, const char *str, const char **ret);
/* f's C++ or Rust linkage name made readable (s->demangle), the linkage name kept as
 * its system name; then a name longer than PROWL_NAME_MAX cut to it; strings in
 * s->scratch. */
int sym_demangle_frame(struct symbolizer *s, struct sym_frame *f);

/* ---- processes.c ---- */

/* Frees every process entry. */
void sym_procs_free(struct symbolizer *s);

/* ---- modules.c ---- */

/* Gives m its id; s owns it from now on (frees it at once on failure). */
int sym_add_module(struct symbolizer *s, struct module *m);
/* The module of one executable mapping of pid. */
int sym_mapping_module(struct symbolizer *s, uint32_t pid, const struct pm_entry *e, struct module **ret);
/* The pseudo module named path (kernel-style "[name]" mappings, "[anon]"). */
int sym_plain_module(struct symbolizer *s, enum sym_module_kind kind, const char *path, struct module **ret);
/* Makes a closed module usable again: 1 when it is, 0 when its file is gone
 * (fallback names then), -ENOMEM. */
int sym_module_ready(struct symbolizer *s, struct module *m);
/* Marks m as just used: first in the LRU of open modules, then applies the
 * caps to the others. */
void sym_module_touch(struct symbolizer *s, struct module *m);
/* Takes m off the open LRU when it no longer holds heavy state. */
void sym_module_sync(struct symbolizer *s, struct module *m);
/* Closes the least recently used modules other than keep while more than
 * max_modules are open or they hold more than max_module_heap. */
void sym_enforce_open_caps(struct symbolizer *s, struct module *keep);
/* Closes m's open state, if any (it reopens on demand). */
void sym_close_module(struct symbolizer *s, struct module *m);
/* modules.c: file-backed pages resident in this process, in bytes (statm). */
uint64_t sym_file_resident_bytes(void);

#endif
