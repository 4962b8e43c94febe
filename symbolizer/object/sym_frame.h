/* sym_frame.h: what the resolve stage gives back: a module (one object file), an
 * address in it, and a source frame; the symbolizer's parts share these types. */
#ifndef PROWL_SYM_FRAME_H
#define PROWL_SYM_FRAME_H

#include <stdbool.h>
#include <stdint.h>

enum sym_module_kind {
	SYM_MOD_ELF = 0, /* a file-backed ELF object */
	SYM_MOD_KERNEL,  /* the kernel and its modules, one module for all */
	SYM_MOD_VDSO,
	SYM_MOD_ANON,    /* anonymous or unreadable executable memory */
};

/* A module is one object file (identified by build id, or by path+inode when it
 * has none). This struct, its strings and its id live as long as the
 * symbolizer; the ELF/DWARF state behind it is closed when more than
 * max_modules are open and reopened on demand. */
struct sym_module {
	uint32_t id;                /* dense, >= 1, stable */
	enum sym_module_kind kind;
	const char *path;           /* path as mapped, "[kernel.kallsyms]", "[vdso]", "[anon]" */
	const char *name;           /* basename, for fallback frame names */
	const char *build_id;       /* lowercase hex, "" when none */
	/* pprof-style mapping in normalized (ELF virtual address) space: a normalized
	 * address A is at file offset A - start + offset. */
	uint64_t start, limit, offset;
	uint32_t debug_gen;         /* debug files that arrived for it since it was first read
				     * (debuginfod): its frames may be better now */
	bool has_dwarf;             /* line info was found (in the file or separate debug file);
				     * known once symbolizer_frames() was called for the module */
};

struct sym_addr {
	const struct sym_module *mod;
	/* normalized: ELF vaddr for SYM_MOD_ELF and for a readable [vdso] (its image
	 * is an ELF); the file offset for a file that could not be read or is not an
	 * ELF; the offset into the mapping for an unreadable [vdso]; raw otherwise. */
	uint64_t addr;
	uint32_t pid; /* SYM_MOD_ANON: the process (JIT symbols are per process); else 0 */
};

struct sym_frame {
	const char *function;    /* never NULL */
	const char *system_name; /* linkage name when it differs, else NULL */
	const char *file;        /* NULL when unknown */
	int line;                /* 0 when unknown */
	int start_line;          /* 0 when unknown */
};

#define SYM_MAX_INLINE 16

#endif
