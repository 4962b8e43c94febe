/* gzip.c: gzip (RFC 1952) of whole in-memory buffers with zlib: one deflate call
 * into a buffer of deflateBound() bytes, and an inflate that stops at a size cap. */
#include "gzip.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <zlib.h>

int gzip_compress(const void *in, size_t len, uint8_t **ret_buf, size_t *ret_len)
{
	return gzip_compress_level(in, len, Z_DEFAULT_COMPRESSION, ret_buf, ret_len);
}

int gzip_compress_level(const void *in, size_t len, int level, uint8_t **ret_buf, size_t *ret_len)
{
	z_stream zs = {};
	uint8_t *out = NULL;
	uLong bound;
	int r = 0;

	if (len > UINT_MAX / 2)
		return -EFBIG;
	if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
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

int gzip_decompress(const void *in, size_t len, size_t max_out, uint8_t **ret_buf, size_t *ret_len)
{
	z_stream zs = {};
	uint8_t *out = NULL, *n;
	size_t cap = len < 4096 ? 16384 : len * 4, used = 0;
	int rc, r = 0;

	if (len > UINT_MAX / 2 || max_out > UINT_MAX / 2)
		return -EFBIG;
	if (cap > max_out)
		cap = max_out;
	if (inflateInit2(&zs, 15 + 16) != Z_OK)
		return -ENOMEM;
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)len;
	for (;;) {
		if (!out || used == cap) {
			if (out && cap >= max_out) {
				r = -EFBIG;
				goto out;
			}
			if (out)
				cap = cap > max_out / 2 ? max_out : cap * 2;
			n = realloc(out, cap ? cap : 1);
			if (!n) {
				r = -ENOMEM;
				goto out;
			}
			out = n;
		}
		zs.next_out = out + used;
		zs.avail_out = (uInt)(cap - used);
		rc = inflate(&zs, Z_NO_FLUSH);
		used = cap - zs.avail_out;
		if (rc == Z_STREAM_END) {
			/* Concatenated members are one gzip file (RFC 1952 2.2). */
			if (zs.avail_in < 2 || zs.next_in[0] != 0x1f || zs.next_in[1] != 0x8b)
				break;
			if (inflateReset(&zs) != Z_OK) {
				r = -EBADMSG;
				goto out;
			}
			continue;
		}
		if (rc == Z_MEM_ERROR) {
			r = -ENOMEM;
			goto out;
		}
		/* Anything else than progress, or an input that ends inside the stream. */
		if ((rc != Z_OK && rc != Z_BUF_ERROR) || (zs.avail_in == 0 && zs.avail_out > 0)) {
			r = -EBADMSG;
			goto out;
		}
	}
	if (zs.avail_in) {
		r = -EBADMSG; /* bytes after the stream */
		goto out;
	}
	*ret_buf = out;
	*ret_len = used;
	out = NULL;
out:
	inflateEnd(&zs);
	free(out);
	return r;
}
