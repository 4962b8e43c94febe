/* unwind_table.h: an object's x86_64 unwind table for the BPF unwinder, built from the
 * CFI (.eh_frame, .debug_frame) that cfi.c reads. Pure: reads an Elf, writes rows. */
#ifndef PROWL_UNWIND_TABLE_H
#define PROWL_UNWIND_TABLE_H

#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include "prowl.h"

struct unwind_table_stats {
	uint32_t cies, fdes;        /* parsed entries (both sections) */
	uint32_t fdes_skipped;      /* malformed, empty, out of range or overlapping */
	uint32_t rows_raw;          /* rows before merging identical neighbours */
	uint32_t rows_bad;          /* PROWL_CFA_BAD rows (rules BPF cannot evaluate) */
	uint32_t signal_fdes, plt_rows, end_rows;
	bool eh_frame, debug_frame; /* which sections were read */
	bool plt_synth;             /* PLT rows synthesized from section headers */
};

/* Rows sorted by pc, pc relative to base. The last row is always PROWL_CFA_NONE
 * (the end of the covered range); a gap between FDEs is a PROWL_CFA_NONE row. */
struct unwind_table {
	struct prowl_unwind_row *rows;
	size_t n, cap;
	uint64_t base;              /* ELF vaddr of row pc 0 */
	struct unwind_table_stats st;
};

/* Builds the table of elf (ET_EXEC or ET_DYN). An object without any CFI gives
 * n == 0 and returns 0. Returns -ENOMEM, or -EINVAL for an unusable ELF.
 * *ret must be zeroed or freed before. */
int unwind_table_build(Elf *elf, struct unwind_table *ret);
/* Same from a file (opened and closed here). */
int unwind_table_build_file(const char *path, struct unwind_table *ret);
/* The row covering ELF vaddr pc, or NULL when pc is outside the table. A
 * PROWL_CFA_NONE row means "inside the range but no CFI". */
const struct prowl_unwind_row *unwind_table_find(const struct unwind_table *t, uint64_t pc);
size_t unwind_table_bytes(const struct unwind_table *t);
void unwind_table_free(struct unwind_table *t); /* zeroes; accepts a zeroed table */

/* Human-readable name of a row's rule, e.g. "rsp+16 rbp=cfa-16", for logs and tests. */
void unwind_row_format(const struct prowl_unwind_row *r, char *buf, size_t len);

#endif
