/* symindex.h: a module's function symbols (.symtab or .dynsym, and its PLT stubs) sorted
 * for O(log n) lookup; private to symbolizer/names/. */
#ifndef PROWL_SYMINDEX_H
#define PROWL_SYMINDEX_H

#include <elfutils/libdw.h>

#include <stddef.h>

struct dwarf_ctx;
struct fsym;

/* The function symbol covering q (a libdwfl address) in *ret, or NULL; the index is
 * built on the first call. Returns 0 or -ENOMEM. */
int sym_lookup(struct dwarf_ctx *c, Dwarf_Addr q, const char **ret);
/* Sorts v by (addr, rank), stable, in linear time (qsort() when short of memory). */
void fsyms_sort(struct fsym *v, size_t n);

#endif
