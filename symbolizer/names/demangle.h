/* demangle.h: C++ (Itanium) and Rust (legacy and v0) linkage names to readable names,
 * through libiberty's demangler, in the three forms record and the agent offer. */
#ifndef PROWL_DEMANGLE_H
#define PROWL_DEMANGLE_H

#include <stdbool.h>
#include <stddef.h>

enum sym_demangle {
	SYM_DEMANGLE_TEMPLATES = 0, /* default: template arguments kept, no parameter list */
	SYM_DEMANGLE_FULL,          /* parameter list, cv-qualifiers, clone suffixes too */
	SYM_DEMANGLE_NONE,          /* linkage names as they are */
};

/* Longer names are left mangled: libiberty's demangler keeps arrays on the
 * stack in proportion to the name (about 64 bytes per character). */
#define SYM_DEMANGLE_MAX_NAME 4096

/* "templates", "full" or "none" into *ret; -EINVAL for anything else. */
int sym_demangle_parse(const char *s, enum sym_demangle *ret);
const char *sym_demangle_name(enum sym_demangle mode);

/* Whether name looks like a C++ or Rust linkage name (_Z..., _R...). */
bool sym_is_mangled(const char *name);

/* The readable form of name in mode, malloc'ed, or NULL when name is not a
 * mangled name the demangler accepts (or mode is none, or out of memory). */
char *sym_demangle(const char *name, enum sym_demangle mode);

#endif
