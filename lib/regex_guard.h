/* regex_guard.h: refuses, before glibc's regcomp() sees them, the regular expressions
 * whose compilation would take unbounded memory or stack (stacked or huge repetitions). */
#ifndef PROWL_REGEX_GUARD_H
#define PROWL_REGEX_GUARD_H

#include <stddef.h>

#define REGEX_MAX_REPEAT 1000 /* the sum of the bounds of {n,m} (RE2's limit per bound) */
#define REGEX_MAX_DEPTH  64   /* nested groups */

/* 0 when re may go to regcomp(); else -EINVAL with the reason in err, in words a
 * Prometheus user knows from RE2 ("bad repetition operator: ++"). */
int regex_guard(const char *re, char *err, size_t errsz);

#endif
