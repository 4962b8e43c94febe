/* pydebugoff.c: compares the _Py_DebugOffsets a CPython 3.13+ process carries with the
 * offsets table (pyversions.c), field by field, so that a build laid out otherwise gets
 * native frames instead of wrong names. */
#include "pydebugoff.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include <linux/types.h>
#include "prowl.h"

/* The offsets prowl uses, as (name, where in struct py_layout). */
#define F(x) { #x, offsetof(struct py_layout, x) }
static const struct {
	const char *name;
	size_t at;
} fields[] = {
	F(rt_interp_head), F(is_threads_head), F(ts_next), F(ts_frame), F(ts_native_tid), F(fr_previous),
	F(fr_code), F(fr_instr), F(fr_owner), F(co_filename), F(co_name), F(co_qualname), F(co_linetable),
	F(co_firstlineno), F(co_code), F(bytes_data), F(ascii_data),
};
#undef F
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

/* Where each of fields[] is in the version's _Py_DebugOffsets, counted in uint64_t
 * (0: the cookie, 1: PY_VERSION_HEX, 2: free_threaded), from Include/internal/
 * pycore_debug_offsets.h of each: runtime_state.interpreters_head,
 * interpreter_state.threads_head, thread_state.next, .current_frame, .native_thread_id,
 * interpreter_frame.previous, .executable, .instr_ptr, .owner, code_object.filename,
 * .name, .qualname, .linetable, .firstlineno, .co_code_adaptive, bytes_object.ob_sval,
 * unicode_object.asciiobject_size. 3.14 added interpreter_state.threads_main and two
 * generation counters, interpreter_frame.stackpointer and .tlbc_index, code_object.co_tlbc
 * and a set_object section. */
static const struct {
	uint8_t minor;
	uint8_t at[NFIELDS];
} versions[] = {
	{ 13, { 5, 9, 21, 23, 25, 29, 30, 31, 33, 35, 36, 37, 38, 39, 43, 66, 70 } },
	{ 14, { 5, 9, 24, 26, 28, 32, 33, 34, 36, 40, 41, 42, 43, 44, 48, 76, 80 } },
};
#define MAX_AT 81

int py_debug_offsets_check(uint32_t pid, uint64_t runtime, const struct py_layout *l, char *why, size_t why_len)
{
	uint64_t v[MAX_AT];
	struct iovec local = { v, sizeof(v) }, remote = { (void *)(uintptr_t)runtime, sizeof(v) };
	ssize_t n;
	size_t k;

	for (k = 0; k < sizeof(versions) / sizeof(versions[0]); k++)
		if (l->major == 3 && versions[k].minor == l->minor)
			break;
	if (k == sizeof(versions) / sizeof(versions[0]))
		return 0;
	n = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return errno == ESRCH ? -ESRCH : -EFAULT;
	if ((size_t)n != sizeof(v))
		return -EFAULT;
	if (memcmp(v, "xdebugpy", 8) != 0) {
		snprintf(why, why_len, "_PyRuntime does not start with _Py_DebugOffsets");
		return -EPROTO;
	}
	if ((v[1] >> 24) != 3 || ((v[1] >> 16) & 0xff) != l->minor) {
		snprintf(why, why_len, "its _Py_DebugOffsets are of version 0x%llx", (unsigned long long)v[1]);
		return -EPROTO;
	}
	if (v[2]) {
		snprintf(why, why_len, "it is a free-threaded build");
		return -EPROTO;
	}
	for (size_t i = 0; i < NFIELDS; i++) {
		uint16_t want;

		memcpy(&want, (const char *)l + fields[i].at, sizeof(want));
		if (v[versions[k].at[i]] != want) {
			snprintf(why, why_len, "%s is at %llu, prowl's table says %u", fields[i].name,
				 (unsigned long long)v[versions[k].at[i]], want);
			return -EPROTO;
		}
	}
	return 0;
}
