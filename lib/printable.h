/* printable.h: UTF-8 checks and terminal-safe copies of strings that come from
 * profiles (function names are chosen by whoever built the program). */
#ifndef PROWL_PRINTABLE_H
#define PROWL_PRINTABLE_H

#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at s (1-4) with its code point, or 0 when
 * it is not one (overlong, surrogate, past U+10FFFF, truncated). */
int utf8_seq_len(const unsigned char *s, uint32_t *ret_cp);
/* s itself when it holds only printable text; else a copy in buf (n bytes,
 * truncated) where control characters (C0, DEL, C1) and invalid UTF-8 are '?'.
 * Keeps a function name from sending escape sequences to a terminal. */
const char *printable(const char *s, char *buf, size_t n);

#endif
