/* jsonw.c: escapes strings from profiles (function names are chosen by whoever
 * built the program) into JSON that is also safe inside an HTML script element. */
#include "analyse/jsonw.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "printable.h"

int json_str(struct sbuf *b, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	int r = sbuf_putc(b, '"');

	while (*s && !r) {
		uint32_t cp;
		int n = utf8_seq_len(s, &cp);

		if (n == 0) {
			r = sbuf_puts(b, "\\ufffd");
			s++;
			continue;
		}
		if (cp == '"' || cp == '\\')
			r = sbuf_putc(b, '\\') ?: sbuf_putc(b, (char)cp);
		else if (cp < 0x20 || cp == '<' || cp == '>' || cp == '&' || cp == 0x2028 || cp == 0x2029 || cp == 0x7f)
			r = sbuf_printf(b, "\\u%04x", cp);
		else
			r = sbuf_put(b, s, (size_t)n);
		s += n;
	}
	return r ?: sbuf_putc(b, '"');
}

int json_num(struct sbuf *b, double v, int decimals)
{
	char tmp[64];
	int n;

	if (!isfinite(v))
		return sbuf_putc(b, '0');
	n = snprintf(tmp, sizeof(tmp), "%.*f", decimals, v);
	/* Trim trailing zeros: 12.5000 -> 12.5, 3.000 -> 3; "-0" -> "0". */
	if (decimals > 0 && n > 0 && n < (int)sizeof(tmp)) {
		while (n > 1 && tmp[n - 1] == '0')
			tmp[--n] = 0;
		if (tmp[n - 1] == '.')
			tmp[--n] = 0;
	}
	if (tmp[0] == '-' && tmp[1] == '0' && tmp[2] == 0)
		return sbuf_putc(b, '0');
	return sbuf_puts(b, tmp);
}
