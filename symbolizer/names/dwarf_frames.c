/* dwarf_frames.c: address -> (function, file, line) frames of one module, inlined callers
 * included: from DWARF, else Go's table, else the symbol tables, else the FDE around it. */
#include "dwarf_frames.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "dwfl_session.h"
#include "inlines.h"
#include "log.h"
#include "symindex.h"

void dwarf_ctx_free(struct module *m)
{
	if (!m->dw)
		return;
	dwfl_end(m->dw->dwfl);
	free(m->dw->syms);
	obj_plt_free(&m->dw->plt);
	fde_groups_free(m->dw->fdes);
	gopcln_free(m->dw->go);
	free(m->dw);
	m->dw = NULL;
}

static struct dwarf_ctx *ctx_get(struct module *m)
{
	struct dwarf_ctx *c;
	uint64_t low, high;

	if (m->dw || m->dw_failed)
		return m->dw;
	if (!m->elf || !module_facts(m) || !module_facts(m)->nloads)
		goto fail;
	obj_load_span(module_facts(m)->loads, module_facts(m)->nloads, &low, &high);
	low &= ~(uint64_t)0xfff;
	if (high <= low)
		high = low + 1;

	c = calloc(1, sizeof(*c));
	if (!c)
		goto fail;
	m->dw = c;
	if (dwfl_session_open(m, c, low, high) < 0)
		goto fail_ctx;
	return c;

fail_ctx:
	dwarf_ctx_free(m);
fail:
	/* Only fallbacks from now on: the Elf (if libdwfl did not take it) is of
	 * no use. A file read with pread() may have failed because it changed. */
	module_check_file(m);
	module_close(m);
	m->dw_failed = true;
	return NULL;
}

/* Go's table: frames with inlined calls, for Go binaries without DWARF. */
static int go_frames(struct module *m, struct dwarf_ctx *c, uint64_t addr, struct intern *strs,
		     struct sym_frame *frames, size_t max, size_t *ret_n)
{
	struct gopcln_frame gf[SYM_MAX_INLINE];
	size_t n = 0;
	int r;

	*ret_n = 0;
	if (!c->go_done) {
		c->go_done = true;
		r = (module_facts(m)->sources & OBJ_SRC_GOPCLNTAB) ? gopcln_open(c->main_elf, &c->go) : -ENOENT;
		if (r == -ENOMEM)
			return r;
		if ((r == -EBADMSG || r == -ENOTSUP) && !m->warned_go_table) {
			m->warned_go_table = true;
			log_warn("%s: its Go symbol table (.gopclntab) is %s; its frames stay addresses", m->name,
				 r == -EBADMSG ? "damaged (bad header or function table)" : "older than Go 1.18");
		}
	}
	if (!c->go)
		return 0;
	gopcln_lookup(c->go, addr, gf, max < SYM_MAX_INLINE ? max : SYM_MAX_INLINE, &n);
	for (size_t i = 0; i < n; i++) {
		r = frame_fill(strs, &frames[i], gf[i].function, gf[i].file, NULL, gf[i].line, 0);
		if (r < 0)
			return r;
	}
	*ret_n = n;
	return 0;
}

/* The start of the .eh_frame FDE around addr (normalized), for code no symbol
 * names: one row per function rather than one per address. */
static void fde_group(struct module *m, struct dwarf_ctx *c, uint64_t addr, uint64_t *ret)
{
	if (!c->fdes_done) {
		c->fdes_done = true;
		if (fde_groups_build(c->main_elf, &c->fdes) == -EBADMSG && !m->warned_fde_overlap) {
			m->warned_fde_overlap = true;
			log_warn("%s: its .eh_frame has overlapping entries; its frames without a symbol stay addresses",
				 m->name);
		}
	}
	if (c->fdes && !fde_groups_find(c->fdes, addr, ret))
		*ret = UINT64_MAX;
}

static int symbolize(struct module *m, uint64_t addr, struct intern *strs, struct sym_frame *frames, size_t max,
		     size_t *ret_n, uint64_t *ret_group)
{
	struct dwarf_ctx *c;
	const char *lfile = NULL, *ldir = NULL, *sym;
	Dwfl_Line *ln;
	Dwarf_Addr q;
	int lline = 0, r;
	size_t n = 0;

	*ret_n = 0;
	if (max == 0)
		return 0;
	c = ctx_get(m);
	if (!c)
		return 0;
	q = addr + c->bias;

	if (c->dwarf_ok) {
		ln = dwfl_module_getsrc(c->mod, q);
		if (ln && !(lfile = dwfl_lineinfo(ln, NULL, &lline, NULL, NULL, NULL)))
			lline = 0;
		if (lfile)
			ldir = dwfl_line_comp_dir(ln);
		r = inline_chain(c, q, lfile, ldir, lline, strs, frames, max, &n);
		if (r < 0)
			return r;
	}
	if (n == 0 && !lfile) {
		/* A Go binary without DWARF: its own table has names, lines and inlining. */
		r = go_frames(m, c, addr, strs, frames, max, &n);
		if (r < 0)
			return r;
	}
	if (n == 0) {
		/* No DWARF function here: the symbol tables (.symtab or .dynsym) may
		 * still name it, possibly with a line from the line table. */
		r = sym_lookup(c, q, &sym);
		if (r < 0)
			return r;
		if (!sym)
			fde_group(m, c, addr, ret_group);
		if (sym || lfile) {
			/* A line without a function: function stays NULL and the caller
			 * names it like a fallback. */
			r = frame_fill(strs, &frames[0], sym, lfile, ldir, lline, 0);
			if (r < 0)
				return r;
			n = 1;
		}
	}
	*ret_n = n;
	return 0;
}

int dwarf_symbolize(struct module *m, uint64_t addr, struct intern *strs, struct sym_frame *frames,
		    size_t max, size_t *ret_n, uint64_t *ret_group)
{
	int r;

	*ret_group = UINT64_MAX;
	r = symbolize(m, addr, strs, frames, max, ret_n, ret_group);

	/* libelf's pread() of a file truncated meanwhile fails quietly, and bytes
	 * read before and after a write do not belong together: whatever this
	 * lookup read from such a file is dropped, and so is the module's state. */
	if (!module_check_file(m)) {
		dwarf_ctx_free(m);
		module_close(m);
		*ret_n = 0;
		*ret_group = UINT64_MAX;
	}
	return r;
}

