/* pyversions.c: per-version offsets of CPython 3.11, 3.12 and 3.13 (x86_64, default
 * build, GIL), from offsetof() over each version's Include/internal headers. */
#include "pyversions.h"

#include <stddef.h>
#include <stdio.h>

#include <linux/types.h>
#include "prowl.h"

/* Where each number comes from (struct.field in CPython's headers):
 *   rt_interp_head   _PyRuntimeState.interpreters.head
 *   is_threads_head  PyInterpreterState.threads.head
 *   ts_next          PyThreadState.next
 *   ts_native_tid    PyThreadState.native_thread_id
 *   ts_frame         PyThreadState.cframe (3.11, 3.12) / current_frame (3.13)
 *   cf_current_frame _PyCFrame.current_frame (none on 3.13: no _PyCFrame)
 *   fr_*             _PyInterpreterFrame: f_code (f_executable on 3.13), previous,
 *                    prev_instr (instr_ptr on 3.13), is_entry (3.11), owner
 *   co_*             PyCodeObject: co_firstlineno, co_code_adaptive, co_filename,
 *                    co_name, co_qualname, co_linetable
 *   ascii_data       sizeof(PyASCIIObject); compact_data sizeof(PyCompactUnicodeObject)
 * Each is checked against a real build the suite runs: 3.11 against Debian 12's
 * python3.11 headers (compiled with Py_BUILD_CORE); 3.12 against pyenv's 3.12.1
 * headers the same way (its _PyCFrame has no use_tracing: current_frame is at 0);
 * 3.13 against the _Py_DebugOffsets that Debian 13's libpython3.13.so (3.13.5)
 * carries at the start of _PyRuntime (tests/e2e/pyfetch.py). A version added here
 * needs the same: a run of tests/e2e/test_python.py's split on a real build. */
static const struct py_layout layouts[] = {
	{
		.major = 3, .minor = 11,
		.rt_interp_head = 40, .is_threads_head = 16, .ts_next = 8, .ts_native_tid = 160,
		.ts_frame = 56, .cf_current_frame = 8,
		.fr_code = 32, .fr_previous = 48, .fr_instr = 56, .fr_is_entry = 68, .fr_owner = 69,
		.co_firstlineno = 72, .co_code = 184,
		.co_filename = 112, .co_name = 120, .co_qualname = 128, .co_linetable = 136,
		.ascii_data = 48, .compact_data = 72, .bytes_data = 32,
	},
	{
		.major = 3, .minor = 12,
		.rt_interp_head = 40, .is_threads_head = 72, .ts_next = 8, .ts_native_tid = 144,
		.ts_frame = 56, .cf_current_frame = 0,
		.fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_is_entry = PROWL_PY_NONE, .fr_owner = 70,
		.co_firstlineno = 68, .co_code = 192,
		.co_filename = 112, .co_name = 120, .co_qualname = 128, .co_linetable = 136,
		.ascii_data = 40, .compact_data = 56, .bytes_data = 32,
	},
	{
		.major = 3, .minor = 13,
		.rt_interp_head = 632, .is_threads_head = 7344, .ts_next = 8, .ts_native_tid = 160,
		.ts_frame = 72, .cf_current_frame = PROWL_PY_NONE,
		.fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_is_entry = PROWL_PY_NONE, .fr_owner = 70,
		.co_firstlineno = 68, .co_code = 200,
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
