/* gzip.c: gzip (RFC 1952) of a whole in-memory buffer with zlib; one deflate
 * call into a buffer of deflateBound() bytes, so it never needs to grow. */
#include "gzip.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <zlib.h>

int gzip_compress(const void *in, size_t len, uint8_t **ret_buf, size_t *ret_len)
{
	z_stream zs = {};
	uint8_t *out = NULL;
	uLong bound;
	int r = 0;

	if (len > UINT_MAX / 2)
		return -EFBIG;
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	bound = deflateBound(&zs, (uLong)len);
	out = malloc(bound);
	if (!out) {
		r = -ENOMEM;
		goto out;
	}
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)len;
	zs.next_out = out;
	zs.avail_out = (uInt)bound;
	if (deflate(&zs, Z_FINISH) != Z_STREAM_END) {
		r = -ENOBUFS;
		goto out;
	}
	*ret_buf = out;
	*ret_len = zs.total_out;
	out = NULL;
out:
	deflateEnd(&zs);
	free(out);
	return r;
}
