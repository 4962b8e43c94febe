/* pydetect.h: tells whether an ELF object is a CPython interpreter (an executable with a
 * static libpython, or libpython itself) and which version, from its symbols. */
#ifndef PROWL_PYDETECT_H
#define PROWL_PYDETECT_H

#include <stdbool.h>
#include <stdint.h>
#include <gelf.h>

struct py_elf {
	bool found;             /* it exports _PyRuntime (3.7+) or PyCode_Type (older) */
	bool version_from_name; /* the version comes from the file name (no Py_Version, no
	                         * PY_VERSION string found through Py_GetVersion) */
	bool version_from_string; /* ... from Py_GetVersion's PY_VERSION (3.10 and older) */
	uint8_t major, minor;   /* 0.0: the version could not be read */
	uint64_t runtime;       /* ELF virtual addresses of _PyRuntime, */
	uint64_t code_type;     /* PyCode_Type, */
	uint64_t unicode_type;  /* PyUnicode_Type */
	uint64_t bytes_type;    /* and PyBytes_Type (0 when not exported) */
	uint64_t interp_head;   /* 3.6's interp_head (no _PyRuntime): its local symbol, or the
	                         * variable PyInterpreterState_Head() loads; 0 when neither */
	uint32_t pthread_size;  /* glibc's sizeof(struct pthread), from the constant its libc
	                         * exports for libthread_db (_thread_db_sizeof_pthread); 0 in
	                         * any other object, or out of PY_PTHREAD_SIZE_MIN..MAX */
};

/* The sizes of struct pthread believed (glibc 2.31-2.40: 1792-2304 bytes). */
#define PY_PTHREAD_SIZE_MIN 256
#define PY_PTHREAD_SIZE_MAX 16384

/* Fills *ret from elf (path: its file name, for the version when neither Py_Version
 * nor Py_GetVersion's string gives it). Returns 0 (ret->found says whether it is CPython) or a negative errno. */
int py_detect_elf(Elf *elf, const char *path, struct py_elf *ret);

#endif
