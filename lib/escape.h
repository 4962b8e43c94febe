/* escape.h: the one writer of strings prowl did not choose itself (process, file and
 * function names, config values): as JSON strings and as terminal-safe text. */
#ifndef PROWL_ESCAPE_H
#define PROWL_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct sbuf;

/* Length (1..4) of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing past U+10FFFF) and its code point in *ret_cp (when
 * not NULL), or 0 when s[0] does not start one within the n bytes there are. Reads
 * no further than the first byte that breaks the sequence, so n may be SIZE_MAX for
 * a NUL-terminated string. */
size_t utf8_seq_len(const unsigned char *s, size_t n, uint32_t *ret_cp);

/* Copies s[0..n) to out as valid UTF-8, each invalid byte as U+FFFD (so out needs
 * room for 3 * n bytes). Returns the length written; out is not NUL-terminated. */
size_t utf8_sanitize(const char *s, size_t n, char *out);

/* utf8_sanitize(), and then every control character (C0, DEL, C1) and the line and
 * paragraph separators U+2028/U+2029, which text readers take for line ends, made
 * '?': what a name may hold once it is in a profile or a label. out needs 3 * n bytes;
 * returns the length written (not NUL-terminated). */
size_t utf8_text(const char *s, size_t n, char *out);
/* The length of s[0..n) cut to at most max bytes without splitting a UTF-8
 * sequence (n itself when n <= max). */
size_t utf8_cut(const char *s, size_t n, size_t max);
/* True when s is already what utf8_text() makes of it (the common case: no copy). */
bool utf8_is_text(const char *s);

/* Also escape '<', '>' and '&', so that the JSON can sit inside an
 * HTML <script> element ("</script>" in a function name stays text). */
#define ESCAPE_HTML 1u

/* Appends s as a double-quoted JSON string (RFC 8259) that is valid UTF-8 whatever s
 * holds: '"' and '\' are escaped, control characters (C0, DEL and C1) become \n, \t,
 * \r or \u00XX, U+2028 and U+2029 (line ends to some readers) \u2028 and \u2029,
 * and every byte that is not part of well-formed UTF-8 becomes \ufffd.
 * The result is also a valid YAML double-quoted scalar and logfmt quoted value.
 * s may be NULL (""). Returns 0 or -ENOMEM. */
int escape_json_sbuf(struct sbuf *b, const char *s, unsigned int flags);
/* The same, written to f. */
void escape_json(FILE *f, const char *s);

/* s itself when it holds only printable ASCII; else a copy in buf (n bytes, truncated)
 * where control characters (C0, DEL, C1) and invalid UTF-8 are '?', so that a name
 * can neither start a line of its own nor send escape sequences to a terminal. */
const char *printable(const char *s, char *buf, size_t n);

#endif
