/* dwfl_session.h: one module's libdwfl session and what names/ keeps beside it (its symbol
 * index, PLT stubs, FDE groups, Go table); private to symbolizer/names/. */
#ifndef PROWL_DWFL_SESSION_H
#define PROWL_DWFL_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include <elfutils/libdwfl.h>

#include "elf_module.h"
#include "fdegroup.h"
#include "gopclntab.h"
#include "plt.h"

/* One function symbol, in libdwfl address space. */
struct fsym {
	uint64_t addr, size; /* a zero-sized symbol gets the size up to the next one or its section's end */
	const char *name;    /* in the ELF string table, alive while the Dwfl is, or in plt.names */
	unsigned rank;       /* 0 global, 1 weak, 2 local, 3 PLT stub: preferred among aliases */
};

/* The string tables symbol names may point into. libdwfl checks that a name
 * starts inside its table but not that it ends there: in a hostile file the last
 * name may run off the table's end. */
struct strtabs {
	const char *lo[16], *hi[16];
	size_t n;
};

struct dwarf_ctx {
	Dwfl *dwfl;
	Dwfl_Module *mod;
	GElf_Addr bias; /* libdwfl address = normalized address + bias */
	/* dwfl_module_addrinfo() scans every symbol per call, far too slow for
	 * big stripped binaries; this sorted copy is searched in O(log n). */
	struct fsym *syms;
	size_t nsyms;
	bool syms_done;
	struct obj_plt plt;       /* the PLT stubs, named `target@plt` */
	struct fde_groups *fdes;  /* for code no symbol covers (fde_group) */
	bool fdes_done;
	struct gopcln *go;        /* Go's own table, for Go binaries without DWARF */
	bool go_done;
	Elf *main_elf;
	bool dwarf_ok;          /* DWARF found and safe to read (strings_terminated) */
	struct strtabs strtabs; /* where the names of syms may point (see name_bounded) */
};

/* Opens c's libdwfl session for m over [low, high) (libdwfl addresses of its load span):
 * libdwfl takes over m->elf, and c->dwarf_ok and m->pub.has_dwarf say whether its DWARF
 * is found and safe to read. Returns 0, or -1 (the caller then frees c with m's state). */
int dwfl_session_open(struct module *m, struct dwarf_ctx *c, uint64_t low, uint64_t high);

#endif
