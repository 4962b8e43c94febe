/* escape.c: writes untrusted strings as JSON (valid UTF-8, invalid bytes as U+FFFD,
 * controls escaped) or as terminal-safe text, with one UTF-8 decoder for both. */
#include "escape.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sbuf.h"

size_t utf8_seq_len(const unsigned char *s, size_t n, uint32_t *ret_cp)
{
	uint32_t cp;
	size_t len;

	if (n == 0)
		return 0;
	if (s[0] < 0x80) {
		len = 1;
		cp = s[0];
	} else if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0; /* a continuation byte, 0xc0/0xc1 (overlong) or 0xf5.. */
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0; /* also stops at the terminating NUL */
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	if (ret_cp)
		*ret_cp = cp;
	return len;
}

size_t utf8_sanitize(const char *s, size_t n, char *out)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		size_t len = utf8_seq_len(u + i, n - i, NULL);

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

/* C0 controls, DEL and the C1 controls (U+0080..U+009F, CSI among them). */
static bool is_control(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp < 0xa0);
}

static bool is_line_break(uint32_t cp)
{
	return is_control(cp) || cp == 0x2028 || cp == 0x2029;
}

size_t utf8_text(const char *s, size_t n, char *out)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		uint32_t cp = 0;
		size_t len = utf8_seq_len(u + i, n - i, &cp);

		if (!len) {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		} else if (is_line_break(cp)) {
			out[o++] = '?';
			i += len;
		} else {
			memcpy(out + o, s + i, len);
			o += len;
			i += len;
		}
	}
	return o;
}

size_t utf8_cut(const char *s, size_t n, size_t max)
{
	size_t k = max;

	if (n <= max)
		return n;
	/* s[k] continues a sequence: the cut moves back to that sequence's start. */
	for (int i = 0; i < 3 && k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80; i++)
		k--;
	return k;
}

bool utf8_is_text(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; u[i];) {
		uint32_t cp = 0;
		size_t len;

		if (u[i] >= 0x20 && u[i] < 0x7f) { /* printable ASCII */
			i++;
			continue;
		}
		len = utf8_seq_len(u + i, SIZE_MAX, &cp);
		if (!len || is_line_break(cp))
			return false;
		i += len;
	}
	return true;
}

int escape_json_sbuf(struct sbuf *b, const char *str, unsigned int flags)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	int r = sbuf_putc(b, '"');

	while (*s && !r) {
		uint32_t cp;
		size_t n = utf8_seq_len(s, SIZE_MAX, &cp);

		if (n == 0) {
			r = sbuf_puts(b, "\\ufffd");
			s++;
			continue;
		}
		if (cp == '"' || cp == '\\')
			r = sbuf_putc(b, '\\') ?: sbuf_putc(b, (char)cp);
		else if (cp == '\n' || cp == '\r' || cp == '\t')
			r = sbuf_puts(b, cp == '\n' ? "\\n" : cp == '\r' ? "\\r" : "\\t");
		else if (is_line_break(cp) || ((flags & ESCAPE_HTML) && (cp == '<' || cp == '>' || cp == '&')))
			r = sbuf_printf(b, "\\u%04x", cp);
		else
			r = sbuf_put(b, s, n);
		s += n;
	}
	return r ?: sbuf_putc(b, '"');
}

void escape_json(FILE *f, const char *s)
{
	struct sbuf b = {};

	if (escape_json_sbuf(&b, s, 0) < 0)
		fputs("\"\"", f); /* out of memory: an empty string keeps the record valid */
	else
		fwrite(b.s, 1, b.len, f);
	sbuf_free(&b);
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
		size_t k = utf8_seq_len(s, SIZE_MAX, &cp);

		if (k == 0 || is_line_break(cp) || o + k >= n) {
			buf[o++] = '?';
			s += k ? k : 1;
			continue;
		}
		memcpy(buf + o, s, k);
		o += k;
		s += k;
	}
	buf[o] = 0;
	return buf;
}
