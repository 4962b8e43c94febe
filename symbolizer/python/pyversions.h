/* pyversions.h: the CPython layouts prowl can walk, one per minor version: the offsets of
 * the fields the BPF walk and the code-object reader use, as facts from CPython's headers. */
#ifndef PROWL_PYVERSIONS_H
#define PROWL_PYVERSIONS_H

#include <stddef.h>
#include <stdint.h>

/* py_layout.lines: the format of the line table co_linetable points to. */
enum py_lines {
	PY_LINES_LNOTAB = 1, /* 3.6-3.9's co_lnotab: (bytes, line delta) pairs */
	PY_LINES_310,        /* 3.10's co_linetable: (bytes, line delta) ranges */
	PY_LINES_LOCATIONS,  /* 3.11+'s location table */
};

struct py_layout {
	uint8_t major, minor;
	uint8_t lines;     /* enum py_lines */
	uint16_t flags;    /* PROWL_PYP_* */
	uint16_t fr_read;  /* bytes of a frame BPF reads: past the last field it uses */
	/* What BPF reads (copied into struct prowl_py_proc). rt_interp_head is
	 * PROWL_PY_NONE where there is no _PyRuntime (3.6): interp_head instead. */
	uint16_t rt_interp_head, is_threads_head, ts_next, ts_native_tid, ts_frame, cf_current_frame;
	uint16_t fr_code, fr_previous, fr_instr, fr_is_entry, fr_owner;
	uint16_t co_firstlineno, co_code;
	/* What user space reads of a code object and its strings. */
	uint16_t co_filename, co_name, co_qualname, co_linetable; /* co_name before 3.11: no qualname */
	uint16_t ascii_data;   /* sizeof(PyASCIIObject): a compact ASCII string's text */
	uint16_t compact_data; /* sizeof(PyCompactUnicodeObject): other compact strings */
	uint16_t bytes_data;   /* offsetof(PyBytesObject, ob_sval) */
};

/* The layout of CPython major.minor, or NULL when prowl does not know it. */
const struct py_layout *py_layout_for(unsigned int major, unsigned int minor);

/* Writes "3.6, 3.7, ... and 3.14" (the versions prowl reads, for messages) into buf;
 * returns buf. */
const char *py_layouts_known(char *buf, size_t size);

#endif
