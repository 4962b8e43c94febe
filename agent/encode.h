/* encode.h: the encode stage; serialises an aggregated profile to pprof
 * (gzip'ed protobuf) or to folded stacks. Buffers are malloc'ed for the caller. */
#ifndef PROWL_ENCODE_H
#define PROWL_ENCODE_H

#include <stddef.h>
#include <stdint.h>

struct profile;

/* pprof Profile message, gzip-compressed. */
int encode_pprof(const struct profile *p, uint8_t **ret_buf, size_t *ret_len);
/* Same, without compression (for senders that compress themselves). */
int encode_pprof_raw(const struct profile *p, uint8_t **ret_buf, size_t *ret_len);
/* Folded stacks: "process;root;...;leaf count\n", one line per distinct
 * (process, stack), root first, inlined frames expanded. The process element is
 * the label set's "process_name" label (or "unknown"). */
int encode_folded(const struct profile *p, char **ret_buf, size_t *ret_len);

#endif
