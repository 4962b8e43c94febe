/* elf_module.h: one object file (or pseudo object) behind executable mappings:
 * identity (build id), PT_LOAD layout, and the per-mapping bias computation. */
#ifndef PROWL_ELF_MODULE_H
#define PROWL_ELF_MODULE_H

#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbolizer.h"
#include "u64map.h"

struct elf_load {
	uint64_t vaddr, memsz, offset, filesz;
	bool exec;
};

struct dwarf_ctx;

struct module {
	struct sym_module pub;   /* what callers see; container_of() gets back here */
	char *path, *name, *build_id; /* owned strings behind pub */
	Elf *elf;                /* owned until dwarf.c hands it to libdwfl; NULL if not ELF */
	void *image;             /* owned memory behind elf for in-memory images (vdso) */
	struct elf_load *loads;  /* PT_LOAD segments, empty when not an ELF */
	size_t nloads;
	uint16_t e_type;
	struct dwarf_ctx *dw;    /* dwarf.c state, created on first use */
	bool dw_failed;          /* libdwfl could not be set up; only fallbacks */
	struct u64map cache;     /* normalized addr -> packed frame cache entry */
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
int module_open_file(const char *const *paths, size_t npaths, const char *path, struct module **ret);
/* Same for an in-memory image (the vdso); the image is copied. */
int module_open_image(const void *image, size_t size, enum sym_module_kind kind, const char *path,
		      struct module **ret);
/* Bias of one process mapping: normalized = runtime - bias. */
uint64_t module_bias(const struct module *m, uint64_t map_start, uint64_t map_offset);
/* File offset of normalized address addr (for fallback names). */
uint64_t module_file_offset(const struct module *m, uint64_t addr);
void module_free(struct module *m); /* accepts NULL */

#endif
