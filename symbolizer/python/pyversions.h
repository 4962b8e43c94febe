/* pyversions.h: the CPython layouts prowl can walk, one per minor version: the offsets of
 * the fields the BPF walk and the code-object reader use, as facts from CPython's headers. */
#ifndef PROWL_PYVERSIONS_H
#define PROWL_PYVERSIONS_H

#include <stddef.h>
#include <stdint.h>

struct py_layout {
	uint8_t major, minor;
	/* What BPF reads (copied into struct prowl_py_proc). */
	uint16_t rt_interp_head, is_threads_head, ts_next, ts_native_tid, ts_frame, cf_current_frame;
	uint16_t fr_code, fr_previous, fr_instr, fr_is_entry, fr_owner;
	uint16_t co_firstlineno, co_code;
	/* What user space reads of a code object and its strings. */
	uint16_t co_filename, co_name, co_qualname, co_linetable;
	uint16_t ascii_data;   /* sizeof(PyASCIIObject): a compact ASCII string's text */
	uint16_t compact_data; /* sizeof(PyCompactUnicodeObject): other compact strings */
	uint16_t bytes_data;   /* offsetof(PyBytesObject, ob_sval) */
};

/* The layout of CPython major.minor, or NULL when prowl does not know it. */
const struct py_layout *py_layout_for(unsigned int major, unsigned int minor);

/* Writes "3.11, 3.12 and 3.13" (the versions prowl reads, for messages) into buf;
 * returns buf. */
const char *py_layouts_known(char *buf, size_t size);

#endif
