/* utf8.c: UTF-8 validation, decoding and repair (invalid bytes become U+FFFD),
 * for text from untrusted sources that ends up in exported labels. */
#include "utf8.h"

#include <string.h>

size_t utf8_seq(const unsigned char *s, size_t n)
{
	size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 :
		     (s[0] & 0xf8) == 0xf0 ? 4 : 0;
	uint32_t cp;

	if (!len || len > n)
		return 0;
	cp = len == 1 ? s[0] : s[0] & (0x7f >> len);
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

uint32_t utf8_decode(const unsigned char *s, size_t len)
{
	uint32_t cp = len == 1 ? s[0] : s[0] & (0x7f >> len);

	for (size_t i = 1; i < len; i++)
		cp = cp << 6 | (s[i] & 0x3f);
	return cp;
}

size_t utf8_encode(uint32_t cp, char *out)
{
	unsigned char *o = (unsigned char *)out;

	if (cp < 0x80) {
		o[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (unsigned char)(0xc0 | cp >> 6);
		o[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (unsigned char)(0xe0 | cp >> 12);
		o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | cp >> 18);
	o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

size_t utf8_clean(const char *s, size_t n, char *out)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		size_t len = utf8_seq(u + i, n - i);

		if (len) {
			memcpy(out + o, s + i, len);
			o += len;
			i += len;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	return o;
}
