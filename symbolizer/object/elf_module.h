/* elf_module.h: the symbolizer's view of one object file (or pseudo object) behind
 * executable mappings: its object's facts, and the Elf it opens and closes on demand. */
#ifndef PROWL_ELF_MODULE_H
#define PROWL_ELF_MODULE_H

#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lru.h"
#include "objcache.h"
#include "sym_frame.h"

struct dwarf_ctx;

/* Where compressed debug sections are inflated (see inflate.h): into unnamed
 * files in dir, so the inflated bytes are page cache the process maps rather
 * than its heap, within max bytes of such files at once. Without dir (or past
 * max) libdw inflates them in memory as usual. */
struct inflate_budget {
	char *dir;
	uint64_t max, used;       /* bytes of the files held open */
	uint64_t files, fallbacks; /* files made; inflations that failed or did not fit */
};

/* A file image libelf mmap'ed for us, whose clean pages can be dropped from
 * RSS (they fault back in from the page cache). Only the ranges outside the
 * ELF, program and section headers are dropped: libelf may rewrite headers of
 * a writable private mapping in place (section decompression does). */
struct file_map {
	uint8_t *base;       /* NULL: none (not mmap'ed, or not verified) */
	size_t ndrop;
	size_t drop[4][2];   /* page-aligned [start, end) offsets of the pages to drop */
};

/* A module has a light identity that lives as long as the symbolizer (pub,
 * strings, its object, the vdso image) and heavy state (elf, dw) that the
 * symbolizer may drop with module_close() and get back with module_reopen(). */
struct module {
	struct sym_module pub;   /* what callers see; container_of() gets back here */
	char *path, *name;       /* owned strings behind pub */
	char *own_build_id;      /* behind pub.build_id when there is no object (the kernel) */
	struct objcache *objs;   /* where obj came from */
	struct object *obj;      /* a reference; NULL: pseudo module or unreadable file */
	Elf *elf;                /* owned until dwarf.c hands it to libdwfl; NULL if not ELF */
	/* The file of an untrusted object, open while its Elf (read with pread(),
	 * ELF_C_READ) or the libdwfl session on it lives; -1 for a trusted
	 * (mapped) one. Checked with module_check_file() after each read. */
	int fd;
	struct obj_ident fd_ident;
	void *image;             /* owned memory behind elf for in-memory images (vdso) */
	size_t image_size;
	struct dwarf_ctx *dw;    /* dwarf.c state, created on first use */
	bool dw_failed;          /* libdwfl could not be set up; only fallbacks */
	bool reopen_failed;      /* no candidate matched; cleared when a process maps it again */
	bool warned_fde_overlap; /* its .eh_frame lies (overlapping FDEs): said once */
	bool warned_go_table;    /* its .gopclntab is damaged or too old: said once */
	struct dbgd *dbgd;       /* the symbolizer's debuginfod fetcher, or NULL */
	/* The last process mapping seen for the file: its map_files entry reopens
	 * deleted files and files in other mount namespaces. */
	uint32_t seen_pid;
	uint64_t seen_start, seen_end, seen_dev, seen_ino;
	struct inflate_budget *inflate; /* the symbolizer's; NULL: never inflate to files */
	uint64_t inflated_bytes;   /* size of the inflated files held (main and debug) */
	struct file_map map;       /* the object file's image (while elf or dw is held) */
	struct file_map dbg_map;   /* its separate debug file's image (while dw is held) */
	struct lru_link open_link; /* in the symbolizer's LRU of open modules */
	uint64_t touched_ns;       /* CLOCK_MONOTONIC of the last use of the open state */
	size_t heap_bytes;         /* heap growth measured while it was used (symbolizer.c) */
};

static inline struct module *module_of(const struct sym_module *m)
{
	return (struct module *)((char *)m - offsetof(struct module, pub));
}

/* The facts of m's object, or NULL for a pseudo module or an unreadable file. */
static inline const struct obj_facts *module_facts(const struct module *m)
{
	return m->obj ? &m->obj->f : NULL;
}

/* A module without an ELF image: kernel, anon, special mappings, unreadable
 * files. start/offset are 0 and limit is UINT64_MAX, so "file offset" = addr. */
int module_new_plain(enum sym_module_kind kind, const char *path, const char *name, struct module **ret);
/* The module of object o (whose reference it takes), shown as path. When file
 * holds the object's file open with its Elf, the module takes the Elf (open
 * from the start); else it opens on demand (module_reopen()). A file that is
 * not a usable ELF still yields a module (normalized = file offset). Returns
 * 0 or -ENOMEM (o's reference is then given back). */
int module_new_object(struct objcache *c, struct object *o, const char *path, struct obj_file *file,
		      struct inflate_budget *inflate, struct module **ret);
/* The module of an in-memory image (the vdso) and its object o (reference
 * taken); the image is copied. */
int module_new_image(struct objcache *c, struct object *o, const void *image, size_t size, enum sym_module_kind kind,
		     const char *path, struct module **ret);
/* A descriptor of an inflated copy of the ELF file open at src_fd when it has
 * compressed sections and m's budget allows one (accounted to m until
 * module_close()), else -1 (use src_fd). */
int module_inflate_fd(struct module *m, int src_fd);
/* Sets the build id shown for a module without an object (hex copied). */
int module_set_build_id(struct module *m, const char *hex);
/* Bias of one process mapping: normalized = runtime - bias. */
uint64_t module_bias(const struct module *m, uint64_t map_start, uint64_t map_offset);
/* File offset of normalized address addr (for fallback names). */
uint64_t module_file_offset(const struct module *m, uint64_t addr);
/* Whether heavy state (an Elf or a libdwfl session) is held. */
static inline bool module_is_open(const struct module *m)
{
	return m->elf || m->dw;
}

/* Whether a closed module can be opened again: it was a usable ELF, libdwfl
 * did not fail on it, and its file did not change while it was read. */
static inline bool module_can_reopen(const struct module *m)
{
	return !module_is_open(m) && m->obj && m->obj->f.nloads && !m->dw_failed && !object_broken(m->obj);
}

/* For a module read with pread(): false when its file changed since it was
 * opened (truncated, written), after which what libelf read may be partial
 * or a mix of two files. The object is then marked broken (one warning) and
 * the caller drops what it just read and closes the module. True otherwise. */
bool module_check_file(struct module *m);

/* Drops the Elf (the caller ends the libdwfl session first: dwarf_ctx_free()).
 * The identity and the vdso image stay. */
void module_close(struct module *m);
/* Gets the Elf back after module_close(): from the kept image, or from the
 * first source that opens a file that is m's object (objcache_open()).
 * Returns 0 or -ENOENT when none did. */
int module_reopen(struct module *m, const struct obj_source *srcs, size_t nsrcs);
/* Records elf's image in map when libelf mmap'ed it from a file (checked in
 * /proc/self/maps: when mmap fails libelf reads the file into the heap
 * instead, which must never be dropped); else leaves map empty. */
void file_map_note(struct file_map *map, Elf *elf);
/* Drops the resident pages of map outside its kept ranges. */
void file_map_release(const struct file_map *map);
/* Drops the resident pages of m's object and debug files (see struct
 * file_map); a long-running agent calls it once per window. */
void module_release_pages(struct module *m);
/* Bytes of the light identity (struct, strings, image; the object is the cache's). */
size_t module_light_bytes(const struct module *m);
/* Frees m (after dwarf_ctx_free()) and gives its object back. Accepts NULL. */
void module_free(struct module *m);

#endif
