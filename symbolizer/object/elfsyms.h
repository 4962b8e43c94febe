/* elfsyms.h: the defined data and function symbols (STT_OBJECT, STT_FUNC, non-zero address)
 * of one symbol table section of an ELF object, one callback each; what the runtimes'
 * detection scans. */
#ifndef PROWL_ELFSYMS_H
#define PROWL_ELFSYMS_H

#include <gelf.h>

typedef void (*elf_sym_fn)(void *ctx, const char *name, const GElf_Sym *sym);

/* Calls fn for every defined data or function symbol of scn (a SHT_DYNSYM or SHT_SYMTAB
 * section of elf); fn tells them apart by GELF_ST_TYPE(sym->st_info). */
void elf_each_symbol(Elf *elf, Elf_Scn *scn, elf_sym_fn fn, void *ctx);

#endif
