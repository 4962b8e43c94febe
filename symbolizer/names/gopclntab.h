/* gopclntab.h: the Go runtime's own symbol table (.gopclntab, Go 1.18 and later): function
 * names, file:line and inlined calls of Go binaries stripped of .symtab and DWARF. */
#ifndef PROWL_GOPCLNTAB_H
#define PROWL_GOPCLNTAB_H

#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

struct gopcln;

/* One frame, innermost first. Strings point into the file's image and live as
 * long as the Elf does. */
struct gopcln_frame {
	const char *function;
	const char *file; /* NULL when unknown */
	int line;         /* 0 when unknown */
};

/* The table of elf. Returns 0, -ENOENT when it has none, -ENOTSUP for a
 * layout older than Go 1.18, -EBADMSG when its header or function table is
 * inconsistent (nothing from it can be trusted), -ENOMEM. */
int gopcln_open(Elf *elf, struct gopcln **ret);
/* The frames of ELF virtual address pc (up to max): the inlined calls the
 * table records, then the function. *ret_n is 0 when no function covers pc. */
void gopcln_lookup(const struct gopcln *g, uint64_t pc, struct gopcln_frame *frames, size_t max, size_t *ret_n);
/* Whether the table gives inlined frames (found the runtime's module data). */
int gopcln_version(const struct gopcln *g, int *ret_has_inline);
void gopcln_free(struct gopcln *g); /* accepts NULL */

#endif
