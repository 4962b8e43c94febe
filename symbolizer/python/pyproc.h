/* pyproc.h: registers a CPython process with the BPF walk (the py_procs map): where its
 * _PyRuntime is and the offsets of its version. */
#ifndef PROWL_PYPROC_H
#define PROWL_PYPROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include "prowl.h"
#include "maps_io.h"
#include "pydetect.h"

/* Fills *ret for a process that maps pe's object with load bias `bias` (runtime
 * address - ELF virtual address). Returns 0, or -EPROTONOSUPPORT when prowl has
 * no layout for pe's version (the caller says so once per object). */
int py_proc_fill(const struct py_elf *pe, uint64_t bias, uint32_t gen, struct prowl_py_proc *ret);

/* Writes pid's entry into the sampler's py_procs map (py_proc_fill() with these;
 * io->py_proc_set must be there); pthread_size: its libc's py_elf.pthread_size (arm64
 * threads of 3.6-3.10 are matched with it). A version prowl cannot read is logged once
 * per object (path; *logged remembers it). Returns 0 or a negative errno. */
int py_proc_register(const struct maps_io *io, uint32_t pid, const struct py_elf *pe, uint64_t bias, uint32_t gen,
		     uint32_t pthread_size, const char *path, bool *logged);

/* Whether CPython processes are registered at all: the sampler has the py_procs map
 * and --python is not off. Only then are objects searched for _PyRuntime. */
bool py_proc_wanted(const struct maps_io *io, bool python_off);

/* One executable mapping of a process as the unwinder loaded it, for py_proc_update(). */
struct py_mapping {
	const struct py_elf *pe; /* its object's CPython facts; NULL: no file, or no known load segment */
	uint64_t bias;           /* runtime address - ELF virtual address */
	const char *path;        /* the object's, for messages */
	bool *logged;            /* the object's "unreadable version logged" flag */
};

/* Decides whether pid gets a py_procs entry: the first of maps[0..n) whose object is
 * CPython's (the executable, or libpython) is registered, with ++*gen; a process with
 * none has its entry removed. Nothing happens unless py_proc_wanted(). */
void py_proc_update(const struct maps_io *io, bool python_off, uint32_t pid, const struct py_mapping *maps,
		    size_t n, uint32_t *gen);

/* The layout a registered process's entry was filled from (by its version), or NULL. */
const struct py_layout *py_proc_layout(const struct prowl_py_proc *pp);

#endif
