/* printable.c: validates UTF-8 and replaces what a terminal would act on (control
 * characters, C1 codes, broken sequences) before a string from a profile is printed. */
#include "printable.h"

#include <stdbool.h>

int utf8_seq_len(const unsigned char *s, uint32_t *ret_cp)
{
	uint32_t cp;
	int n;

	if (s[0] < 0x80) {
		*ret_cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	*ret_cp = cp;
	return n;
}

static bool is_control(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp < 0xa0);
}

const char *printable(const char *str, char *buf, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t o = 0;
	bool clean = true;

	for (const unsigned char *p = s; *p && clean; p++)
		clean = *p >= 0x20 && *p < 0x7f;
	if (clean || !n)
		return str;
	while (*s && o + 1 < n) {
		uint32_t cp;
		int k = utf8_seq_len(s, &cp);

		if (k == 0 || is_control(cp) || o + (size_t)k >= n) {
			buf[o++] = '?';
			s += k ? k : 1;
			continue;
		}
		for (int i = 0; i < k; i++)
			buf[o++] = (char)s[i];
		s += k;
	}
	buf[o] = 0;
	return buf;
}
