/* utf8.h: UTF-8 validation for label values and names that come from processes,
 * binaries and API servers prowl does not trust: invalid bytes become U+FFFD. */
#ifndef PROWL_UTF8_H
#define PROWL_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if it is not one
 * (overlong forms, surrogates and code points past U+10FFFF are invalid). */
size_t utf8_seq(const unsigned char *s, size_t n);
/* Decodes the sequence utf8_seq() measured; returns its code point. */
uint32_t utf8_decode(const unsigned char *s, size_t len);
/* Encodes cp (<= U+10FFFF) into out (room for 4); returns the length. */
size_t utf8_encode(uint32_t cp, char *out);
/* Copies s[0..n) to out as valid UTF-8, each invalid byte as U+FFFD. out has
 * room for 3 * n bytes; returns the length written (no NUL added). */
size_t utf8_clean(const char *s, size_t n, char *out);

#endif
