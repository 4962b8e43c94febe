/* prowl_limits.h: sizes that several parts of prowl must agree on, each defined once here
 * (not limits.h: lib/ is on the include path and would hide the system header). */
#ifndef PROWL_LIMITS_H
#define PROWL_LIMITS_H

/* Bytes of a function name prowl keeps, whatever its source (ELF and DWARF
 * names after demangling, Go's table, perf maps), and so what a recording
 * rule's regex and the function label see: a longer name is cut to its first
 * PROWL_NAME_MAX bytes, at a UTF-8 character boundary. */
#define PROWL_NAME_MAX 4096

#endif
