/* jvmname.h: names sampled Java frames: a (Method* or nmethod, bci or pc offset) pair
 * becomes package.Class.method, file and line, read from the JVM's memory, checked, cached. */
#ifndef PROWL_JVMNAME_H
#define PROWL_JVMNAME_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include "prowl.h"
#include "maps_io.h"
#include "jvmscope.h"

struct jvm_namer;

/* A Java frame as named. Strings live as long as the namer's cache entry: until
 * the next jvm_namer_frame(). */
struct jvm_frame_name {
	const char *function; /* package.Class.method */
	const char *file;     /* package/File.java, or NULL */
	int line;             /* 0: not known */
};

struct jvm_namer_stats {
	uint64_t hits, misses, failures;
	uint64_t scope_failures; /* compiled frames whose debug information was unreadable */
	uint64_t miss_ns;        /* time spent reading the names that were not cached */
	uint32_t entries;     /* names cached now (at most JVM_NAME_CACHE_MAX) */
	uint64_t bytes;       /* their memory */
};

#define JVM_NAME_CACHE_MAX 16384 /* names kept; the cache starts over when full */

int jvm_namer_new(struct jvm_namer **ret);
void jvm_namer_free(struct jvm_namer *r); /* accepts NULL */
/* Processes are looked up in the sampler's java_procs map through io (NULL, or no
 * io->java_proc_get, turns naming off). */
void jvm_namer_set_io(struct jvm_namer *r, const struct maps_io *io);
/* The names of Java frame f of process pid (registration gen, from the sample) into
 * ret[0..*ret_n) (at most cap): a compiled frame's inlined methods innermost first,
 * its own method last; other frames one name. *ret_key names the result for the
 * namer's life. On failure returns a negative errno and *ret_why is a marker
 * frame's text. */
int jvm_namer_frame(struct jvm_namer *r, uint32_t pid, uint32_t gen, const struct prowl_jframe *f,
		    struct jvm_frame_name *ret, size_t cap, size_t *ret_n, uint64_t *ret_key, const char **ret_why);
void jvm_namer_stats(const struct jvm_namer *r, struct jvm_namer_stats *ret);

/* The line of bytecode index bci in a compressed line number table tab[0..len)
 * (HotSpot's: pairs of bci and line deltas, a zero byte ends it; jdk_major picks
 * the integer coding, JDK 20's UNSIGNED5 keeps zero bytes out); 0 when the table
 * says nothing for bci or is garbled. Pure: for tests and fuzzers. */
int jvm_line_for_bci(const uint8_t *tab, size_t len, uint32_t bci, unsigned int jdk_major);

#endif
