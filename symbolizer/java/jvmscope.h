/* jvmscope.h: decodes an nmethod's debug information (PcDescs, scopes, metadata) into the
 * chain of methods and bytecode indexes at a pc: the inlined frames of compiled Java code. */
#ifndef PROWL_JVMSCOPE_H
#define PROWL_JVMSCOPE_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include "prowl.h"
#include "jvmmeta.h"

#define JVM_SCOPE_MAX     16          /* inlined depth read per frame (deeper: cut) */
#define JVM_SCOPE_BCI_NONE 0xffffffffu /* no bytecode index (the method's entry) */

/* HotSpot's compressed unsigned integer (CompressedReadStream, UNSIGNED5 since
 * JDK 20): at tab[*pos..len), bytes stored plus x (0 before JDK 20, 1 since).
 * Returns 0 and advances *pos, or -1 on a short or malformed integer. */
int jvm_u5_read(const uint8_t *tab, size_t len, size_t *pos, unsigned int x, uint32_t *ret);
/* x for the JDK's major version. */
unsigned int jvm_u5_x(unsigned int jdk_major);

/* One level of the chain: the method and its bytecode index (or JVM_SCOPE_BCI_NONE). */
struct jvm_scope {
	uint64_t method;
	uint32_t bci;
};

/* The chain at pc offset off (pc - code begin) of the nmethod at blob, innermost
 * (inlined deepest) first, into out[0..*ret_n). leaf: off is the interrupted pc
 * itself, else a return address minus one. The last entry is the nmethod's own
 * method when the debug information is whole; jp says where it lies (jp->flags
 * has PROWL_JAVA_SCOPES). Returns 0, -EFAULT (unreadable), -EBADMSG (bounds or
 * encoding not HotSpot's) or -ENOENT (no PcDesc for off). */
int jvm_scope_chain(const struct jvm_mem *mem, const struct prowl_java_proc *jp, uint64_t blob, uint32_t off,
		    int leaf, struct jvm_scope *out, size_t cap, size_t *ret_n);

#endif
