/* inlines.h: the frames of one address from DWARF: the function, its inlined callers up to
 * the real function, each with file and line; private to symbolizer/names/. */
#ifndef PROWL_INLINES_H
#define PROWL_INLINES_H

#include <stddef.h>

#include <elfutils/libdw.h>

#include "intern.h"
#include "sym_frame.h"

struct dwarf_ctx;

/* Fills frames[0..max) (innermost first, *ret_n of them) for libdwfl address q whose
 * line-table row is lfile:lline (in ldir). Returns 0 or -ENOMEM. */
int inline_chain(struct dwarf_ctx *c, Dwarf_Addr q, const char *lfile, const char *ldir, int lline,
		 struct intern *strs, struct sym_frame *frames, size_t max, size_t *ret_n);
/* One frame, its strings interned in strs; a relative file is joined to an absolute
 * comp_dir. Returns 0 or -ENOMEM. */
int frame_fill(struct intern *strs, struct sym_frame *f, const char *function, const char *file,
	       const char *comp_dir, int line, int start_line);

#endif
