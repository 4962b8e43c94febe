/* pydebugoff.h: checks a CPython 3.13+ process's own _Py_DebugOffsets (at the start of
 * _PyRuntime) against prowl's table for its version before its frames are walked. */
#ifndef PROWL_PYDEBUGOFF_H
#define PROWL_PYDEBUGOFF_H

#include <stddef.h>
#include <stdint.h>

#include "pyversions.h"

/* Reads the _Py_DebugOffsets at runtime (an address in process pid) and compares each
 * offset prowl uses with l's. Returns 0 when they agree or l's version publishes none
 * (before 3.13); -EPROTO when they disagree (why: "FIELD is at N, the table says M",
 * or what else is wrong); -ESRCH / -EFAULT when the memory cannot be read. */
int py_debug_offsets_check(uint32_t pid, uint64_t runtime, const struct py_layout *l, char *why, size_t why_len);

#endif
