/* regex_re2.h: compiles a regex a user wrote in RE2 syntax (as in Prometheus) with
 * glibc's POSIX ERE: the RE2 escapes ERE lacks translated, the rest of RE2 refused. */
#ifndef PROWL_REGEX_RE2_H
#define PROWL_REGEX_RE2_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

/* Compiles re (after regex_guard) into *ret with REG_EXTENDED | cflags, as
 * "^(re)$" when anchored (the user's groups keep their numbers). \d \D become
 * [0-9] [^0-9] (0-9 in brackets), \s \w \S \W \b \B are glibc's own; other
 * letter or digit escapes, '(?' and non-greedy repetitions are refused. Returns 0,
 * -EINVAL with the reason in err (one phrase, for "bad regex 're': ERR"), or -ENOMEM. */
int regex_re2_compile(const char *re, bool anchored, int cflags, regex_t *ret, char *err, size_t errsz);

#endif
