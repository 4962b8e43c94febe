/* v8proc.h: registers a node process with the BPF V8 walk (the v8_procs map): the node
 * binary's v8dbg_ constants, read once per file, and the builtins' address in the process. */
#ifndef PROWL_V8PROC_H
#define PROWL_V8PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <gelf.h>

#include <linux/types.h>
#include "prowl.h"
#include "maps_io.h"
#include "v8meta.h"

/* One V8 binary (an object of the object cache) whose metadata prowl can use. */
struct v8_file {
	struct v8_meta meta;
};

/* The V8 binary elf (path: for the warning), or NULL: not V8, or a V8 without usable
 * metadata, which gets one warning here (once per file: the caller keeps the result
 * per object) and native frames. */
struct v8_file *v8_file_detect(Elf *elf, const char *path);

/* Fills *ret for a process that maps vf's binary with load bias `bias`. */
void v8_proc_fill(const struct v8_meta *m, uint64_t bias, uint32_t gen, struct prowl_v8_proc *ret);

/* Writes pid's entry into the sampler's v8_procs map (io->v8_proc_set must be there);
 * [text_low, text_high): the binary's executable mapping in pid; copy_bias: the load
 * bias of a second mapping of the binary's builtins (V8 remaps them near its JIT code
 * for short calls), or 0. same_process: pid was registered before and has not exec'd
 * since; an entry the same but for its generation is then kept as it is. Returns 0 or a
 * negative errno. */
int v8_proc_register(const struct maps_io *io, uint32_t pid, const struct v8_file *vf, uint64_t bias, uint32_t gen,
		     uint64_t text_low, uint64_t text_high, uint64_t copy_bias, bool same_process);

#endif
