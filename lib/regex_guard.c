/* regex_guard.c: a pre-check of regular expressions from configs and flags: glibc
 * compiles "a++++..." or "(a{999}){999}" by copying trees, until memory runs out. */
#include "regex_guard.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* Skips a bracket expression starting at re[i] == '['; returns the index after it. */
static size_t skip_bracket(const char *re, size_t i)
{
	i++;
	if (re[i] == '^')
		i++;
	if (re[i] == ']')
		i++;
	for (; re[i] && re[i] != ']'; i++)
		if (re[i] == '[' && (re[i + 1] == ':' || re[i + 1] == '.' || re[i + 1] == '=')) {
			char end = re[i + 1];

			for (i += 2; re[i] && !(re[i] == end && re[i + 1] == ']'); i++)
				;
			if (re[i])
				i++;
		}
	return re[i] ? i + 1 : i;
}

/* Parses "{n}", "{n,}" or "{n,m}" at re[i]; returns its length (0: not one) and
 * the largest count it allows in *ret_max. */
static size_t counted(const char *re, size_t i, unsigned long *ret_max)
{
	char *end;
	unsigned long lo, hi;

	if (re[i] != '{' || re[i + 1] < '0' || re[i + 1] > '9')
		return 0;
	lo = strtoul(re + i + 1, &end, 10);
	hi = lo;
	if (*end == ',') {
		hi = end[1] >= '0' && end[1] <= '9' ? strtoul(end + 1, &end, 10) : lo;
		if (*end == ',')
			end++;
	}
	if (*end != '}')
		return 0;
	*ret_max = hi > lo ? hi : lo;
	return (size_t)(end + 1 - (re + i));
}

int regex_guard(const char *re, char *err, size_t errsz)
{
	unsigned long total = 0, m;
	int depth = 0;
	int quant = 0; /* quantifiers just seen: one, then one '?' (lazy), no more */

	for (size_t i = 0; re[i];) {
		size_t n;
		char c = re[i];

		if (c == '\\') {
			i += re[i + 1] ? 2 : 1;
			quant = 0;
			continue;
		}
		if (c == '[') {
			i = skip_bracket(re, i);
			quant = 0;
			continue;
		}
		n = c == '{' ? counted(re, i, &m) : 0;
		if (c == '*' || c == '+' || c == '?' || n) {
			if (quant && !(quant == 1 && c == '?')) {
				snprintf(err, errsz, "bad repetition operator: %.*s", (int)(n ? n : 1), re + i);
				return -EINVAL;
			}
			quant = quant ? 2 : 1;
			if (n) {
				total += m;
				if (m > REGEX_MAX_REPEAT || total > REGEX_MAX_REPEAT) {
					snprintf(err, errsz, "repetition counts add up to more than %d", REGEX_MAX_REPEAT);
					return -EINVAL;
				}
				i += n;
			} else {
				i++;
			}
			continue;
		}
		quant = 0;
		if (c == '(' && ++depth > REGEX_MAX_DEPTH) {
			snprintf(err, errsz, "groups nested more than %d deep", REGEX_MAX_DEPTH);
			return -EINVAL;
		}
		if (c == ')' && depth > 0)
			depth--;
		i++;
	}
	return 0;
}
