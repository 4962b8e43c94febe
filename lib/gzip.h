/* gzip.h: one-shot gzip (RFC 1952) compression and bounded decompression of
 * in-memory buffers, for the pprof encoder, the HTTP exporters and the pprof reader. */
#ifndef PROWL_GZIP_H
#define PROWL_GZIP_H

#include <stddef.h>
#include <stdint.h>

/* Compresses in[0..len) in one deflate call into a malloc'ed *ret_buf of *ret_len
 * bytes (owned by the caller). Returns 0, or -EFBIG (input too large), -ENOMEM or
 * -ENOBUFS; on error *ret_buf and *ret_len are left as they were. */
int gzip_compress(const void *in, size_t len, uint8_t **ret_buf, size_t *ret_len);
/* The same at zlib level 0-9 (1: fastest). */
int gzip_compress_level(const void *in, size_t len, int level, uint8_t **ret_buf, size_t *ret_len);

/* Inflates the gzip stream in[0..len) (members one after another; other trailing
 * bytes refused) into a
 * malloc'ed *ret_buf of *ret_len bytes. -EFBIG when the output would pass
 * max_out bytes, -EBADMSG for a corrupt or truncated stream, -ENOMEM. */
int gzip_decompress(const void *in, size_t len, size_t max_out, uint8_t **ret_buf, size_t *ret_len);

#endif
