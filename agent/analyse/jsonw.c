/* jsonw.c: JSON values for report, diff and the HTML page: strings through the one
 * escaper (lib/escape.c, HTML-safe), numbers trimmed of trailing zeros. */
#include "analyse/jsonw.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "escape.h"

int json_str(struct sbuf *b, const char *str)
{
	return escape_json_sbuf(b, str, ESCAPE_HTML);
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
