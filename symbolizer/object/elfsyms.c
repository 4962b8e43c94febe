/* elfsyms.c: walks the defined data and function symbols of a symbol table section
 * (runtimes' detection: CPython's _PyRuntime, HotSpot's gHotSpotVMStructs). */
#include "elfsyms.h"

#include <stddef.h>

void elf_each_symbol(Elf *elf, Elf_Scn *scn, elf_sym_fn fn, void *ctx)
{
	GElf_Shdr sh;
	Elf_Data *d;
	size_t n;

	if (!gelf_getshdr(scn, &sh) || !sh.sh_entsize)
		return;
	d = elf_getdata(scn, NULL);
	if (!d)
		return;
	n = d->d_size / sh.sh_entsize;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;
		const char *name;

		if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value ||
		    (GELF_ST_TYPE(sym.st_info) != STT_OBJECT && GELF_ST_TYPE(sym.st_info) != STT_FUNC))
			continue;
		name = elf_strptr(elf, sh.sh_link, sym.st_name);
		if (name)
			fn(ctx, name, &sym);
	}
}
