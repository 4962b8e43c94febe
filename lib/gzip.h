/* gzip.h: one-shot gzip (RFC 1952) compression of an in-memory buffer, shared by
 * the pprof encoder and the HTTP exporters that send gzip'ed bodies. */
#ifndef PROWL_GZIP_H
#define PROWL_GZIP_H

#include <stddef.h>
#include <stdint.h>

/* Compresses in[0..len) in one deflate call into a malloc'ed *ret_buf of *ret_len
 * bytes (owned by the caller). Returns 0, or -EFBIG (input too large), -ENOMEM or
 * -ENOBUFS; on error *ret_buf and *ret_len are left as they were. */
int gzip_compress(const void *in, size_t len, uint8_t **ret_buf, size_t *ret_len);

#endif
