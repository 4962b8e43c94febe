/* encode.h: the encode stage; serialises an aggregated profile to pprof
 * (gzip'ed protobuf) or to folded stacks. Buffers are malloc'ed for the caller. */
#ifndef PROWL_ENCODE_H
#define PROWL_ENCODE_H

#include <stddef.h>
#include <stdint.h>

struct profile;
struct series_label;

/* pprof Profile message, gzip-compressed. */
int encode_pprof(const struct profile *p, uint8_t **ret_buf, size_t *ret_len);
/* Same, with these labels added to every sample (a label set that has a key
 * already keeps its own value): files that must carry their series' labels. */
int encode_pprof_labeled(const struct profile *p, const struct series_label *labels, size_t n, uint8_t **ret_buf,
			 size_t *ret_len);
/* Same as encode_pprof, without compression (for senders that compress themselves). */
int encode_pprof_raw(const struct profile *p, uint8_t **ret_buf, size_t *ret_len);
/* Folded stacks: "process;root;...;leaf count\n", one line per distinct
 * (process, stack), root first, inlined frames expanded. The process element is
 * the label set's "process_name" label (or "unknown"). */
int encode_folded(const struct profile *p, char **ret_buf, size_t *ret_len);

#endif
