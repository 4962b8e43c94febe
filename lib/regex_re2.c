/* regex_re2.c: the one reading of user regexes (relabel_configs, recording rules):
 * RE2 syntax rewritten to POSIX ERE, or refused in one line, then compiled by glibc. */
#include "regex_re2.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regex_guard.h"

/* Appends s[0..n) to out[*o..size) (translate checks the room first). */
static void emit(char *out, size_t size, size_t *o, const char *s, size_t n)
{
	if (*o + n >= size)
		n = *o + 1 < size ? size - 1 - *o : 0;
	memcpy(out + *o, s, n);
	*o += n;
}

/* RE2 escapes POSIX ERE lacks, translated outside a bracket expression;
 * glibc knows \w \W \s \S \b \B itself. */
static const char *class_of(char c, bool in_bracket)
{
	switch (c) {
	case 'd': return in_bracket ? "0-9" : "[0-9]";
	case 'D': return in_bracket ? NULL : "[^0-9]";
	case 's': return in_bracket ? "[:space:]" : "\\s";
	case 'w': return in_bracket ? "[:alnum:]_" : "\\w";
	case 'S': return in_bracket ? NULL : "\\S";
	case 'W': return in_bracket ? NULL : "\\W";
	case 'b': return in_bracket ? NULL : "\\b";
	case 'B': return in_bracket ? NULL : "\\B";
	default: return NULL;
	}
}

/* Rewrites re (RE2 syntax) into POSIX ERE in out; -EINVAL with err for what
 * POSIX has no equivalent of. */
static int translate(const char *re, char *out, size_t size, char *err, size_t errsz)
{
	size_t o = 0;
	bool bracket = false;
	size_t bracket_start = 0;

	for (size_t i = 0; re[i]; i++) {
		char c = re[i];

		if (o + 16 >= size) {
			snprintf(err, errsz, "too long");
			return -EINVAL;
		}
		if (bracket) {
			if (c == ']' && i > bracket_start) {
				bracket = false;
			} else if (c == '[' && (re[i + 1] == ':' || re[i + 1] == '.' || re[i + 1] == '=')) {
				const char *end = strstr(re + i + 2, (char[]){ re[i + 1], ']', 0 });

				if (end) {
					emit(out, size, &o, re + i, (size_t)(end + 2 - (re + i)));
					i = (size_t)(end + 1 - re);
					continue;
				}
			} else if (c == '\\' && re[i + 1]) {
				const char *cls = class_of(re[i + 1], true);
				char n = re[i + 1];

				i++;
				if (cls) {
					emit(out, size, &o, cls, strlen(cls));
					continue;
				}
				/* In POSIX a backslash in brackets is itself: keep only escapes that
				 * mean the plain character wherever it stands. */
				if ((n >= 'a' && n <= 'z') || (n >= 'A' && n <= 'Z') || n == ']' || n == '^' || n == '-' ||
				    (n >= '0' && n <= '9')) {
					snprintf(err, errsz, "'\\%c' inside [...] is RE2 syntax POSIX ERE does not have: write "
						 "the class by name instead, e.g. [[:alpha:]] (\\d \\s \\w work there)", n);
					return -EINVAL;
				}
				out[o++] = n;
				continue;
			}
			out[o++] = c;
			continue;
		}
		if (c == '[') {
			bracket = true;
			out[o++] = c;
			if (re[i + 1] == '^')
				out[o++] = re[++i];
			bracket_start = i + 1; /* a ']' right here is a member */
			continue;
		}
		if (c == '\\') {
			const char *cls;
			char n = re[i + 1];

			if (!n) {
				snprintf(err, errsz, "trailing backslash");
				return -EINVAL;
			}
			cls = class_of(n, false);
			i++;
			if (cls) {
				emit(out, size, &o, cls, strlen(cls));
				continue;
			}
			if ((n >= 'a' && n <= 'z') || (n >= 'A' && n <= 'Z') || (n >= '0' && n <= '9')) {
				snprintf(err, errsz,
					 "escape '\\%c' is RE2 syntax POSIX ERE does not have: write a bracket expression "
					 "instead, e.g. [0-9] or [[:alpha:]] (\\d \\s \\w \\b and their capitals work)", n);
				return -EINVAL;
			}
			out[o++] = '\\';
			out[o++] = n;
			continue;
		}
		if (c == '(' && re[i + 1] == '?') {
			snprintf(err, errsz,
				 "'(?' groups and flags are RE2 syntax POSIX ERE does not have: use a plain (...) "
				 "group (every group counts in $N)");
			return -EINVAL;
		}
		if ((c == '*' || c == '+' || c == '?' || c == '}') && re[i + 1] == '?') {
			snprintf(err, errsz, "non-greedy '%c?' is RE2 syntax POSIX ERE does not have: write '%c' alone "
				 "(POSIX takes the longest match)", c, c);
			return -EINVAL;
		}
		out[o++] = c;
	}
	if (bracket) {
		snprintf(err, errsz, "unmatched [");
		return -EINVAL;
	}
	out[o] = 0;
	return 0;
}

int regex_re2_compile(const char *re, bool anchored, int cflags, regex_t *ret, char *err, size_t errsz)
{
	size_t size = 3 * strlen(re) + 32;
	char *tr, *buf;
	int rc;

	rc = regex_guard(re, err, errsz);
	if (rc < 0)
		return rc;
	tr = malloc(size);
	buf = malloc(size + 8);
	if (!tr || !buf) {
		free(tr);
		free(buf);
		return -ENOMEM;
	}
	rc = translate(re, tr, size, err, errsz);
	if (rc == 0) {
		snprintf(buf, size + 8, anchored ? "^(%s)$" : "%s", tr);
		rc = regcomp(ret, buf, REG_EXTENDED | cflags);
		if (rc == REG_ESPACE) {
			rc = -ENOMEM;
		} else if (rc != 0) {
			/* Compiled again alone, so that the message is about the user's text. */
			rc = regcomp(ret, tr, REG_EXTENDED | cflags);
			if (rc == 0) {
				regfree(ret);
				snprintf(err, errsz, "not a valid regular expression");
			} else {
				regerror(rc, NULL, err, errsz);
			}
			rc = -EINVAL;
		}
	}
	free(tr);
	free(buf);
	return rc;
}
