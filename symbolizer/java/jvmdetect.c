/* jvmdetect.c: finds HotSpot's serviceability symbols in an object's dynamic symbol
 * table; an object that exports all of them is a libjvm prowl can read. */
#include "jvmdetect.h"

#include <errno.h>
#include <string.h>

#include "elfsyms.h"

static const char *const sym_names[JVM_SYM__N] = {
#define JVM_SYM_NAME(id, name) [JVM_SYM_##id] = name,
	JVM_SYMS(JVM_SYM_NAME)
#undef JVM_SYM_NAME
};

const char *jvm_sym_name(unsigned int i)
{
	return i < JVM_SYM__N ? sym_names[i] : NULL;
}

static void on_symbol(void *ctx, const char *name, const GElf_Sym *sym)
{
	struct jvm_elf *j = ctx;

	if (GELF_ST_TYPE(sym->st_info) != STT_OBJECT || sym->st_size != 8 || strncmp(name, "gHotSpotVM", 10) != 0)
		return;
	for (unsigned int k = 0; k < JVM_SYM__N; k++)
		if (strcmp(name, sym_names[k]) == 0)
			j->sym[k] = sym->st_value;
}

int jvm_detect_elf(Elf *elf, struct jvm_elf *ret)
{
	Elf_Scn *scn = NULL;

	memset(ret, 0, sizeof(*ret));
	if (!elf)
		return -EINVAL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_DYNSYM) {
			elf_each_symbol(elf, scn, on_symbol, ret);
			break;
		}
	}
	ret->found = true;
	for (unsigned int k = 0; k < JVM_SYM__N; k++)
		if (!ret->sym[k])
			ret->found = false;
	return 0;
}
