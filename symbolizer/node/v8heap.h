/* v8heap.h: reads V8 heap objects of a node process (strings, SharedFunctionInfo, ScopeInfo,
 * Script, source position tables) through a memory reader, every type tag and length checked. */
#ifndef PROWL_V8HEAP_H
#define PROWL_V8HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include "jsclass.h"
#include "prowl.h"

/* Memory of the process: read exactly len bytes at addr, 0 or a negative errno. The
 * reader of a live process is process_vm_readv(); tests and fuzzers read an image. */
struct v8_mem {
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	void *ctx;
};

/* Bounds on what is read of a forged heap. */
#define V8_NAME_MAX     512        /* bytes of a name kept */
#define V8_SOURCE_MAX   (16u << 20) /* bytes of a script's source scanned for line ends */
#define V8_POSTAB_MAX   (64u << 10) /* bytes of a source position table */
#define V8_CONS_DEPTH   32         /* cons strings followed per string */
#define V8_LINES_MAX    (1u << 20) /* line ends kept per script */

/* Exactly len bytes of m at addr (never the first page, nor past 47 bits): 0 or -EFAULT. */
int v8_read(const struct v8_mem *m, uint64_t addr, void *buf, size_t len);

/* The tagged word at field off of heap object obj: 0 or -EFAULT. */
int v8_field(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t obj, uint32_t off, uint64_t *ret);

/* Whether tagged word v points at a heap object. */
static inline bool v8_is_heap(const struct prowl_v8_proc *vp, uint64_t v)
{
	return (v & vp->heap_tag_mask) == vp->heap_tag;
}

/* The instance type of the heap object at tagged pointer obj, or a negative errno. */
int v8_obj_type(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t obj);

/* The string at tagged pointer str, as UTF-8 text (control characters made '?',
 * cut to cap - 1 bytes) in out. Returns its length or a negative errno. */
int v8_string(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t str, char *out, size_t cap);

/* The check BPF recorded for sfi (its name and script words, xored), read again. */
int v8_sfi_check(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t sfi, uint32_t *ret);

/* The function's name (empty: anonymous) and the start of its source in the script
 * (-1: not known). Returns 0 or a negative errno (sfi is not a SharedFunctionInfo). */
int v8_sfi_name(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t sfi, char *out, size_t cap,
		int32_t *ret_start);

/* The Script of sfi (tagged), or a negative errno. */
int v8_sfi_script(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t sfi, uint64_t *ret);

/* The name of script (its file name or URL) in out; a negative errno when it has none. */
int v8_script_name(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t script, char *out, size_t cap);

/* The script offset of bytecode offset bco of BytecodeArray ba (from its source position
 * table), or a negative errno. bco counts from the first bytecode. */
int v8_bytecode_array_position(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t ba, uint32_t bco,
			       int32_t *ret);

/* The same for sfi's bytecode: its function_data, or that of its baseline code. */
int v8_bytecode_position(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t sfi, uint32_t bco,
			 int32_t *ret);

/* What is kept of a script: where its lines end and its classes (a method is named with its
 * class), both from one walk of its source. */
struct v8_script {
	uint32_t *ends;        /* malloc'ed offsets where its lines end: its line_ends array, else found in its source */
	size_t n;
	struct js_classes cls; /* empty when the source was not read whole (an external string, say) */
	uint64_t source;       /* the source string read: a script there later with another is another script */
};

/* Reads script into *ret (v8_script_free frees it): 0, or a negative errno when its lines
 * are not known (then *ret is empty). */
int v8_script_read(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t script, struct v8_script *ret);
void v8_script_free(struct v8_script *s);

/* The 1-based line holding script offset pos, from line ends ends[0..n); 0 when unknown. */
int v8_line_of(const uint32_t *ends, size_t n, int32_t pos);

/* The source position at code offset off in V8's table tab[0..len) (pairs of signed
 * VLQ deltas: code offset, source position); the script offset it encodes, or -1. Pure:
 * for tests and fuzzers. */
int32_t v8_postab_lookup(const uint8_t *tab, size_t len, uint32_t off);

/* The raw source position (V8's SourcePosition: bit 0 external, bits 1-30 the script
 * offset plus one, bits 31-46 the inlining id) of the last entry at or before code
 * offset off in tab[0..len), or -1 (none, or garbled). Pure. */
int64_t v8_postab_raw(const uint8_t *tab, size_t len, uint32_t off);

/* An unsigned VLQ of V8's tables (7 bits a byte, low first, bit 7 "more"; at most 5 bytes)
 * at tab[*pos], *pos moved past it; -1 past len or too long. Pure. */
int v8_uvlq(const uint8_t *tab, size_t len, size_t *pos, uint64_t *ret);

/* The script offset of raw source position p, or -1 (external or none). */
static inline int32_t v8_pos_offset(uint64_t p)
{
	return (p & 1) ? -1 : (int32_t)((p >> 1) & ((1u << 30) - 1)) - 1; /* stored plus one */
}

/* The inlining id of raw source position p: 0 the code's own function, i the
 * function of the code's inlining position i - 1. */
static inline uint32_t v8_pos_inlining(uint64_t p)
{
	return (uint32_t)(p >> 31) & 0xffff;
}

#endif
