/* pyversions.c: per-version offsets of CPython 3.6 to 3.14 (x86_64, default build, GIL),
 * from offsetof() over each version's headers. */
#include "pyversions.h"

#include <stddef.h>
#include <stdio.h>

#include <linux/types.h>
#include "prowl.h"

/* Where each number comes from (struct.field in CPython's headers):
 *   rt_interp_head   _PyRuntimeState.interpreters.head (3.6: none, interp_head)
 *   is_threads_head  PyInterpreterState.tstate_head / threads.head (3.12+)
 *   ts_next          PyThreadState.next
 *   ts_native_tid    PyThreadState.native_thread_id (3.11+) / thread_id (before)
 *   ts_frame         PyThreadState.frame (3.6-3.10), cframe (3.11, 3.12),
 *                    current_frame (3.13+)
 *   cf_current_frame _PyCFrame.current_frame (3.11, 3.12 only)
 *   fr_*             PyFrameObject (3.6-3.10): f_code, f_back, f_lasti;
 *                    _PyInterpreterFrame (3.11+): f_code (f_executable on 3.13+),
 *                    previous, prev_instr (instr_ptr on 3.13+), is_entry (3.11), owner
 *   co_*             PyCodeObject: co_firstlineno, co_code_adaptive (3.11+), co_filename,
 *                    co_name, co_qualname (3.11+; co_name before), co_linetable
 *                    (co_lnotab before 3.10)
 *   ascii_data       sizeof(PyASCIIObject); compact_data sizeof(PyCompactUnicodeObject)
 * Each is checked against a real build the suite runs (tests/e2e/test_python_versions.py
 * runs every row): 3.6-3.10 and 3.12 against pyenv's builds' installed headers
 * (compiled with Py_BUILD_CORE); 3.11 against Debian 12's python3.11 headers; 3.13 and
 * 3.14 against the _Py_DebugOffsets at the start of _PyRuntime of Debian 13's 3.13.5 and
 * Debian testing's 3.14.0 (tests/e2e/pyfetch.py), which prowl also checks at run time
 * (pydebugoff.c). A version added here needs the same: a run of that test on a real build. */
#define OBJFRAME (PROWL_PYP_FRAMEOBJ | PROWL_PYP_PTHREAD)
#define NONE     PROWL_PY_NONE
/* 3.6-3.10: PyThreadState.frame, PyFrameObject's f_back and f_code, and the string and
 * bytes objects are where they are on every one of them. */
#define PRE311(ma, mi, lt, fl, rd, rt, tid, lasti, first, file, name, table)                       \
	{                                                                                           \
		.major = ma, .minor = mi, .lines = lt, .flags = fl, .fr_read = rd,                  \
		.rt_interp_head = rt, .is_threads_head = 8, .ts_next = 8, .ts_native_tid = tid,     \
		.ts_frame = 24, .cf_current_frame = NONE, .fr_code = 32, .fr_previous = 24,         \
		.fr_instr = lasti, .fr_is_entry = NONE, .fr_owner = NONE, .co_firstlineno = first,  \
		.co_code = 0, .co_filename = file, .co_name = name, .co_qualname = name,            \
		.co_linetable = table, .ascii_data = 48, .compact_data = 72, .bytes_data = 32,      \
	}
static const struct py_layout layouts[] = {
	/* minor, lines, flags, fr_read; rt_interp_head, thread_id, f_lasti; co_firstlineno,
	 * co_filename, co_name, co_lnotab / co_linetable */
	PRE311(3, 6, PY_LINES_LNOTAB, OBJFRAME | PROWL_PYP_LASTI_BYTES, 124, NONE, 152, 120, 36, 96, 104, 112),
	PRE311(3, 7, PY_LINES_LNOTAB, OBJFRAME | PROWL_PYP_LASTI_BYTES, 108, 24, 176, 104, 36, 96, 104, 112),
	PRE311(3, 8, PY_LINES_LNOTAB, OBJFRAME | PROWL_PYP_LASTI_BYTES, 108, 32, 176, 104, 40, 104, 112, 120),
	PRE311(3, 9, PY_LINES_LNOTAB, OBJFRAME | PROWL_PYP_LASTI_BYTES, 108, 32, 176, 104, 40, 104, 112, 120),
	PRE311(3, 10, PY_LINES_310, OBJFRAME, 100, 32, 176, 96, 40, 104, 112, 120),
	{
		.major = 3, .minor = 11, .lines = PY_LINES_LOCATIONS, .fr_read = 72,
		.rt_interp_head = 40, .is_threads_head = 16, .ts_next = 8, .ts_native_tid = 160,
		.ts_frame = 56, .cf_current_frame = 8,
		.fr_code = 32, .fr_previous = 48, .fr_instr = 56, .fr_is_entry = 68, .fr_owner = 69,
		.co_firstlineno = 72, .co_code = 184,
		.co_filename = 112, .co_name = 120, .co_qualname = 128, .co_linetable = 136,
		.ascii_data = 48, .compact_data = 72, .bytes_data = 32,
	},
	{
		.major = 3, .minor = 12, .lines = PY_LINES_LOCATIONS, .fr_read = 72,
		.rt_interp_head = 40, .is_threads_head = 72, .ts_next = 8, .ts_native_tid = 144,
		.ts_frame = 56, .cf_current_frame = 0,
		.fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_is_entry = NONE, .fr_owner = 70,
		.co_firstlineno = 68, .co_code = 192,
		.co_filename = 112, .co_name = 120, .co_qualname = 128, .co_linetable = 136,
		.ascii_data = 40, .compact_data = 56, .bytes_data = 32,
	},
	{
		.major = 3, .minor = 13, .lines = PY_LINES_LOCATIONS, .fr_read = 72,
		.rt_interp_head = 632, .is_threads_head = 7344, .ts_next = 8, .ts_native_tid = 160,
		.ts_frame = 72, .cf_current_frame = NONE,
		.fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_is_entry = NONE, .fr_owner = 70,
		.co_firstlineno = 68, .co_code = 200,
		.co_filename = 112, .co_name = 120, .co_qualname = 128, .co_linetable = 136,
		.ascii_data = 40, .compact_data = 56, .bytes_data = 32,
	},
	{
		/* f_executable is a _PyStackRef (a tagged pointer); owner 3 is the entry shim. */
		.major = 3, .minor = 14, .lines = PY_LINES_LOCATIONS, .fr_read = 80,
		.rt_interp_head = 808, .is_threads_head = 7344, .ts_next = 8, .ts_native_tid = 160,
		.ts_frame = 72, .cf_current_frame = NONE,
		.fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_is_entry = NONE, .fr_owner = 74,
		.co_firstlineno = 68, .co_code = 208,
		.co_filename = 112, .co_name = 120, .co_qualname = 128, .co_linetable = 136,
		.ascii_data = 40, .compact_data = 56, .bytes_data = 32,
	},
};

const struct py_layout *py_layout_for(unsigned int major, unsigned int minor)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].major == major && layouts[i].minor == minor)
			return &layouts[i];
	return NULL;
}

const char *py_layouts_known(char *buf, size_t size)
{
	size_t n = sizeof(layouts) / sizeof(layouts[0]), len = 0;

	buf[0] = 0;
	for (size_t i = 0; i < n && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%u.%u", i == 0 ? "" : i + 1 == n ? " and " : ", ",
					layouts[i].major, layouts[i].minor);
	return buf;
}
