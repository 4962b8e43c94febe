/* sbuf.c: the growing string buffer; doubles its capacity so appends are
 * amortised O(1), and keeps a NUL after the data at all times. */
#include "sbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sbuf_reserve(struct sbuf *b, size_t extra)
{
	size_t cap = b->cap ? b->cap : 256;
	char *s;

	if (extra > (size_t)-1 / 4 - b->len)
		return -ENOMEM;
	if (b->len + extra + 1 <= b->cap)
		return 0;
	while (cap < b->len + extra + 1)
		cap *= 2;
	s = realloc(b->s, cap);
	if (!s)
		return -ENOMEM;
	if (!b->s)
		s[0] = 0;
	b->s = s;
	b->cap = cap;
	return 0;
}

int sbuf_put(struct sbuf *b, const void *s, size_t n)
{
	if (sbuf_reserve(b, n))
		return -ENOMEM;
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = 0;
	return 0;
}

int sbuf_putc(struct sbuf *b, char c)
{
	return sbuf_put(b, &c, 1);
}

int sbuf_puts(struct sbuf *b, const char *s)
{
	return sbuf_put(b, s, strlen(s));
}

int sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || sbuf_reserve(b, (size_t)n))
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

int sbuf_take(struct sbuf *b, char **ret_buf, size_t *ret_len)
{
	if (sbuf_reserve(b, 0))
		return -ENOMEM;
	*ret_buf = b->s;
	*ret_len = b->len;
	*b = (struct sbuf){};
	return 0;
}

void sbuf_free(struct sbuf *b)
{
	free(b->s);
	*b = (struct sbuf){};
}
