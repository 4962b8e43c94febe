/* jvmproc.h: registers a JVM process with the BPF Java walk (the java_procs map): its
 * libjvm's offsets, read once per file, and its code cache, read once per process. */
#ifndef PROWL_JVMPROC_H
#define PROWL_JVMPROC_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/types.h>
#include "prowl.h"
#include "maps_io.h"
#include "jvmdetect.h"
#include "jvmmeta.h"

/* One libjvm file (an object of the object cache): its symbols and, once read
 * from the first process that maps it, its metadata. */
struct jvm_file {
	struct jvm_elf elf;
	struct jvm_meta meta;
	int meta_state; /* 0: not read yet, 1: read, < 0: the error reading it */
	bool logged;    /* its one warning was given */
	uint8_t faults; /* reads of the metadata that found memory unreadable */
};

/* Fills *ret for pid, which maps jf's libjvm with load bias `bias`, from mem.
 * Returns 0 (ret->flags has PROWL_JAVA_READY when its code cache is set up; before
 * that the JVM is starting) or a negative errno. */
int jvm_proc_fill(const struct jvm_mem *mem, const struct jvm_meta *m, uint64_t bias, uint32_t gen,
		  struct prowl_java_proc *ret);

/* Reads jf's metadata if not yet (from pid), then writes pid's entry into the
 * sampler's java_procs map (io->java_proc_set must be there). A JVM whose metadata
 * cannot be read is logged once per file (path) and gets native frames. Returns 0
 * (registered, ready or not) or a negative errno. */
int jvm_proc_register(const struct maps_io *io, uint32_t pid, struct jvm_file *jf, uint64_t bias, uint32_t gen,
		      const char *path);

#endif
