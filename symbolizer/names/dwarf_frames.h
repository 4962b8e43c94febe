/* dwarf_frames.h: source-level symbolization of one module's normalized addresses with
 * elfutils libdwfl: symbol tables, DWARF line tables and inlined call chains. */
#ifndef PROWL_DWARF_FRAMES_H
#define PROWL_DWARF_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "elf_module.h"
#include "intern.h"
#include "sym_frame.h"

/* Fills frames[0..max) for normalized address addr of m, innermost first, and
 * sets *ret_n (0 when nothing covers addr; the caller then makes a fallback).
 * A single frame may have function == NULL when only a source line is known;
 * the caller then gives it the fallback name.
 * Strings are interned in strs, so they live as long as strs does (the
 * symbolizer uses a scratch table and copies them out at once). The first call
 * sets up libdwfl for m from m->elf (and sets m->pub.has_dwarf); if that fails
 * the module is marked (dw_failed, its Elf dropped) and every later call
 * returns *ret_n = 0 cheaply. Returns 0 or -ENOMEM. */
/* *ret_group: when no symbol names addr, the start of the .eh_frame FDE around it
 * (the caller names the frame after it: one row per function); else UINT64_MAX. */
int dwarf_symbolize(struct module *m, uint64_t addr, struct intern *strs, struct sym_frame *frames,
		    size_t max, size_t *ret_n, uint64_t *ret_group);
/* Releases libdwfl state of m (and the Elf it took over); the symbolizer calls
 * it before module_close() and module_free(). */
void dwarf_ctx_free(struct module *m);

#endif
