/* v8inline.h: splits a frame of optimized V8 code (TurboFan, Maglev) into the functions
 * inlined at its pc, innermost first, with their script offsets: code object, deopt data, positions. */
#ifndef PROWL_V8INLINE_H
#define PROWL_V8INLINE_H

#include <stddef.h>
#include <stdint.h>

#include "v8heap.h"

#define V8_INLINE_MAX   16          /* functions named per optimized frame (deeper: the innermost cut) */
#define V8_CODE_SCAN    (256u << 10) /* bytes below a pc searched for its code object's header */
#define V8_INLINE_IDS   4096        /* inlining positions read per code object */

/* One function of an optimized frame: its SharedFunctionInfo (tagged) and the script
 * offset being run in it (-1: not known). */
struct v8_inl_frame {
	uint64_t sfi;
	int32_t pos;
};

/* The functions running at pc (for a caller's frame: its return address minus one) in
 * the optimized code of process memory m whose function BPF saw as sfi: out[0] the
 * innermost inlined one, out[*ret_n - 1] sfi itself. *hint: the InstructionStream map
 * found last (0: none yet; kept by the caller per process). Returns 0; -ENOENT when pc is
 * in no optimized code of sfi (interpreted, baseline, builtins, or a V8 whose layout
 * prowl does not read), another negative errno when the objects are garbled. */
int v8_inline_frames(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t pc, uint64_t sfi,
		     uint64_t *hint, struct v8_inl_frame *out, size_t cap, size_t *ret_n);

/* The chain of raw source position p through inlining positions tab[0..len) (V8's
 * InliningPosition: 8 bytes of SourcePosition, 4 of function id, 4 of padding), innermost
 * first: fid[i] the literal index of frame i's function (-1: the code's own), pos[i] its
 * script offset. Returns the frames written (at most cap; the outermost always last), or
 * -EBADMSG. Pure: for tests and fuzzers. */
int v8_inline_chain(const uint8_t *tab, size_t len, uint64_t p, int32_t *fid, int32_t *pos, size_t cap);

#endif
