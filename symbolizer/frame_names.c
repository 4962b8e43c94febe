/* frame_names.c: a frame's names as the symbolizer hands them out: interned in the
 * call's scratch table, demangled (C++, Rust) and cut to PROWL_NAME_MAX bytes. */
#include "symbolizer_priv.h"

#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "escape.h"
#include "prowl_limits.h"

int sym_intern_cstr(struct intern *t, const char *str, const char **ret)
{
	uint32_t id;
	int r = intern_put_str(t, str, &id);

	if (r < 0)
		return r;
	*ret = intern_str(t, id);
	return 0;
}

/* C++ and Rust linkage names become readable ones (libiberty's demangler); the
 * linkage name stays as the frame's system name. */
/* *name cut to PROWL_NAME_MAX bytes (a copy in s->scratch) when longer. */
static int cap_name(struct symbolizer *s, const char **name)
{
	char buf[PROWL_NAME_MAX + 1];
	size_t len = *name ? strnlen(*name, PROWL_NAME_MAX + 1) : 0;

	if (len <= PROWL_NAME_MAX)
		return 0;
	len = utf8_cut(*name, len, PROWL_NAME_MAX);
	memcpy(buf, *name, len);
	buf[len] = 0;
	return sym_intern_cstr(s->scratch, buf, name);
}

int sym_demangle_frame(struct symbolizer *s, struct sym_frame *f)
{
	char *d;
	int r;

	if (s->demangle == SYM_DEMANGLE_NONE || !f->function || !sym_is_mangled(f->function) ||
	    !(d = sym_demangle(f->function, (enum sym_demangle)s->demangle)))
		return cap_name(s, &f->function);
	f->system_name = f->function;
	r = sym_intern_cstr(s->scratch, d, &f->function);
	free(d);
	if (r == 0)
		r = cap_name(s, &f->system_name);
	if (r == 0)
		r = cap_name(s, &f->function);
	return r;
}
