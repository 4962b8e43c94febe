/* demangle.c: C++ (Itanium) and Rust (legacy and v0) linkage names to readable names,
 * through libiberty's demangler, in the three forms record and the agent offer. */
#include "demangle.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "array_size.h"

static const char *const mode_names[] = {
	[SYM_DEMANGLE_TEMPLATES] = "templates",
	[SYM_DEMANGLE_FULL] = "full",
	[SYM_DEMANGLE_NONE] = "none",
};

int sym_demangle_parse(const char *s, enum sym_demangle *ret)
{
	for (size_t i = 0; i < ARRAY_SIZE(mode_names); i++) {
		if (s && strcmp(s, mode_names[i]) == 0) {
			*ret = (enum sym_demangle)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *sym_demangle_name(enum sym_demangle mode)
{
	return (size_t)mode < ARRAY_SIZE(mode_names) ? mode_names[mode] : "?";
}

bool sym_is_mangled(const char *name)
{
	/* Itanium C++ and Rust legacy (_ZN...E), Rust v0 (_R). Some toolchains
	 * add one more underscore (__Z); libiberty takes both. */
	if (name[0] == '_' && name[1] == '_')
		name++;
	return name[0] == '_' && (name[1] == 'Z' || name[1] == 'R') && name[2];
}

char *sym_demangle(const char *name, enum sym_demangle mode)
{
	static const char plt[] = "@plt";
	int opts = DMGL_AUTO;
	size_t len;
	char *base, *d, *out;

	if (mode == SYM_DEMANGLE_NONE || !sym_is_mangled(name) ||
	    (len = strnlen(name, SYM_DEMANGLE_MAX_NAME + 1)) > SYM_DEMANGLE_MAX_NAME)
		return NULL;
	/* Without DMGL_PARAMS libiberty leaves out the parameter list and the
	 * return type but keeps template arguments: shop::Cart<long>::total.
	 * DMGL_VERBOSE is never set, so Rust's hash suffix is dropped. */
	if (mode == SYM_DEMANGLE_FULL)
		opts |= DMGL_PARAMS | DMGL_ANSI;
	if (len <= sizeof(plt) - 1 || strcmp(name + len - (sizeof(plt) - 1), plt) != 0)
		return cplus_demangle(name, opts);
	/* A PLT stub, `_ZdlPv@plt`: the target demangled, the suffix kept. */
	base = strndup(name, len - (sizeof(plt) - 1));
	d = base ? cplus_demangle(base, opts) : NULL;
	free(base);
	if (!d || asprintf(&out, "%s%s", d, plt) < 0)
		out = NULL;
	free(d);
	return out;
}
