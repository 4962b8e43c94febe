/* sbuf.h: a growing, always NUL-terminated string buffer for encoders that
 * build text output (folded stacks, JSON, HTML) in memory. */
#ifndef PROWL_SBUF_H
#define PROWL_SBUF_H

#include <stddef.h>

struct sbuf {
	char *s;
	size_t len, cap;
};

/* Makes room for extra more bytes plus the NUL. 0 or -ENOMEM. */
int sbuf_reserve(struct sbuf *b, size_t extra);
int sbuf_putc(struct sbuf *b, char c);
int sbuf_put(struct sbuf *b, const void *s, size_t n);
int sbuf_puts(struct sbuf *b, const char *s);
int sbuf_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the buffer to the caller (never NULL on success: "" for an empty one). */
int sbuf_take(struct sbuf *b, char **ret_buf, size_t *ret_len);
void sbuf_free(struct sbuf *b);

#endif
