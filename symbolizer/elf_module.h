/* elf_module.h: one object file (or pseudo object) behind executable mappings:
 * identity (build id), PT_LOAD layout, and the per-mapping bias computation. */
#ifndef PROWL_ELF_MODULE_H
#define PROWL_ELF_MODULE_H

#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lru.h"
#include "symbolizer.h"

struct elf_load {
	uint64_t vaddr, memsz, offset, filesz;
	bool exec;
};

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
 * strings, loads, the vdso image) and heavy state (elf, dw) that the
 * symbolizer may drop with module_close() and get back with module_reopen(). */
struct module {
	struct sym_module pub;   /* what callers see; container_of() gets back here */
	char *path, *name, *build_id; /* owned strings behind pub */
	Elf *elf;                /* owned until dwarf.c hands it to libdwfl; NULL if not ELF */
	void *image;             /* owned memory behind elf for in-memory images (vdso) */
	size_t image_size;
	struct elf_load *loads;  /* PT_LOAD segments, empty when not an ELF */
	size_t nloads;
	uint16_t e_type;
	struct dwarf_ctx *dw;    /* dwarf.c state, created on first use */
	bool dw_failed;          /* libdwfl could not be set up; only fallbacks */
	/* Identity of the file the module was read from, checked on reopen. */
	uint64_t file_dev, file_ino, file_size;
	bool reopen_failed;      /* no candidate matched; cleared when a process maps it again */
	/* The last process mapping seen for the file: its map_files entry reopens
	 * deleted files and files in other mount namespaces. */
	uint32_t seen_pid;
	uint64_t seen_start, seen_end;
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

/* A module without an ELF image: kernel, anon, special mappings, unreadable
 * files. start/offset are 0 and limit is UINT64_MAX, so "file offset" = addr. */
int module_new_plain(enum sym_module_kind kind, const char *path, const char *name, struct module **ret);
/* Opens the first of paths[] that opens as a regular file and reads its ELF
 * headers. path is the name to show (the mapped path). A file that is not a
 * usable ELF still yields a module (no loads, normalized = file offset).
 * Returns -ENOENT/-EACCES... from the last open attempt, or -ENOMEM. */
int module_open_file(const char *const *paths, size_t npaths, const char *path, struct inflate_budget *inflate,
		     struct module **ret);
/* A descriptor of an inflated copy of the ELF file open at src_fd when it has
 * compressed sections and m's budget allows one (accounted to m until
 * module_close()), else -1 (use src_fd). */
int module_inflate_fd(struct module *m, int src_fd);
/* Same for an in-memory image (the vdso); the image is copied. */
int module_open_image(const void *image, size_t size, enum sym_module_kind kind, const char *path,
		      struct module **ret);
/* Bias of one process mapping: normalized = runtime - bias. */
uint64_t module_bias(const struct module *m, uint64_t map_start, uint64_t map_offset);
/* File offset of normalized address addr (for fallback names). */
uint64_t module_file_offset(const struct module *m, uint64_t addr);
/* Whether heavy state (an Elf or a libdwfl session) is held. */
static inline bool module_is_open(const struct module *m)
{
	return m->elf || m->dw;
}

/* Whether a closed module can be opened again: it was a usable ELF and
 * libdwfl did not fail on it. */
static inline bool module_can_reopen(const struct module *m)
{
	return !module_is_open(m) && m->nloads && !m->dw_failed;
}

/* Drops the heavy state: libdwfl session, symbol table, Elf. The identity,
 * loads and the vdso image stay. */
void module_close(struct module *m);
/* Gets the Elf back after module_close(): from the kept image, or from the
 * first of paths[] that is the same file (device, inode and size as first
 * opened) or has the same build id. Returns 0 or -ENOENT when none matched
 * (libelf does not tell allocation failures apart). */
int module_reopen(struct module *m, const char *const *paths, size_t npaths);
/* Records elf's image in map when libelf mmap'ed it from a file (checked in
 * /proc/self/maps: when mmap fails libelf reads the file into the heap
 * instead, which must never be dropped); else leaves map empty. */
void file_map_note(struct file_map *map, Elf *elf);
/* Drops the resident pages of map outside its kept ranges. */
void file_map_release(const struct file_map *map);
/* Drops the resident pages of m's object and debug files (see struct
 * file_map); a long-running agent calls it once per window. */
void module_release_pages(struct module *m);
/* Bytes of the light identity (struct, strings, loads, image). */
size_t module_light_bytes(const struct module *m);
void module_free(struct module *m); /* accepts NULL */

#endif
