/* rules_regex.c: simplifies a function rule's regex before it is compiled: drops the
 * leading and trailing `.*` (and `^.*`, `.*$`) that cannot change an unanchored match. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "rules_priv.h"

/* One piece of a branch: an atom [start, qual) and its quantifiers [qual, end). */
struct piece {
	size_t start, qual, end;
};

#define MAX_PIECES (RULES_MAX_REGEX + 1)

static bool is_quant(char c)
{
	return c == '*' || c == '+' || c == '?' || c == '{';
}

/* The end of the bracket expression opening at s[i] == '[', or 0 when unterminated. */
static size_t bracket_end(const char *s, size_t i)
{
	i++;
	if (s[i] == '^')
		i++;
	if (s[i] == ']')
		i++;
	for (; s[i]; i++) {
		if (s[i] == '[' && (s[i + 1] == '.' || s[i + 1] == ':' || s[i + 1] == '=')) {
			char kind = s[i + 1];
			const char *close = s + i + 2;

			while (*close && !(close[0] == kind && close[1] == ']'))
				close++;
			if (!*close)
				return 0;
			i = (size_t)(close - s) + 1;
			continue;
		}
		if (s[i] == ']')
			return i + 1;
	}
	return 0;
}

/* The end of the atom starting at s[i], or 0 when the text is not one we
 * understand (the pattern is then kept as it is). */
static size_t atom_end(const char *s, size_t i)
{
	int depth = 0;

	if (s[i] == '\\')
		return s[i + 1] ? i + 2 : 0;
	if (s[i] == '[')
		return bracket_end(s, i);
	if (s[i] == ')' || is_quant(s[i]))
		return 0;
	if (s[i] != '(')
		return i + 1;
	/* A group, nested groups, brackets and escapes inside it. */
	for (; s[i]; i++) {
		if (s[i] == '\\') {
			if (!s[++i])
				return 0;
		} else if (s[i] == '[') {
			size_t e = bracket_end(s, i);

			if (!e)
				return 0;
			i = e - 1;
		} else if (s[i] == '(') {
			depth++;
		} else if (s[i] == ')' && --depth == 0) {
			return i + 1;
		}
	}
	return 0;
}

static bool piece_is(const char *s, const struct piece *p, const char *atom, const char *quant)
{
	size_t an = strlen(atom), qn = strlen(quant);

	return p->qual - p->start == an && memcmp(s + p->start, atom, an) == 0 && p->end - p->qual == qn &&
	       memcmp(s + p->qual, quant, qn) == 0;
}

/* Drops from pieces [*lo, *hi) of one branch what cannot change whether it
 * matches somewhere: a leading `.*` or `^.*`, a trailing `.*` or `.*$`. Never
 * empties the branch. */
static void strip_branch(const char *s, const struct piece *p, size_t *lo, size_t *hi)
{
	for (bool again = true; again;) {
		again = false;
		if (*hi - *lo > 2 && piece_is(s, &p[*lo], "^", "") && piece_is(s, &p[*lo + 1], ".", "*")) {
			*lo += 2;
			again = true;
		} else if (*hi - *lo > 1 && piece_is(s, &p[*lo], ".", "*")) {
			*lo += 1;
			again = true;
		}
		if (*hi - *lo > 2 && piece_is(s, &p[*hi - 1], "$", "") && piece_is(s, &p[*hi - 2], ".", "*")) {
			*hi -= 2;
			again = true;
		} else if (*hi - *lo > 1 && piece_is(s, &p[*hi - 1], ".", "*")) {
			*hi -= 1;
			again = true;
		}
	}
}

int rules_regex_simplify(const char *re, char **ret)
{
	size_t n = strlen(re), np = 0, o = 0, branch = 0;
	struct piece *p;
	char *out;

	*ret = NULL;
	if (n > RULES_MAX_REGEX)
		return 0;
	p = calloc(n + 1, sizeof(*p));
	out = malloc(n + 1);
	if (!p || !out)
		goto nomem;
	for (size_t i = 0; i <= n;) {
		size_t lo, hi;

		if (i < n && re[i] != '|') {
			size_t e = atom_end(re, i);

			if (!e)
				goto keep;
			p[np] = (struct piece){ .start = i, .qual = e, .end = e };
			while (is_quant(re[p[np].end])) {
				if (re[p[np].end] == '{') {
					const char *close = strchr(re + p[np].end, '}');

					if (!close)
						goto keep;
					p[np].end = (size_t)(close - re) + 1;
				} else {
					p[np].end++;
				}
			}
			i = p[np++].end;
			continue;
		}
		/* The end of a branch: its pieces are p[branch, np). */
		lo = branch;
		hi = np;
		if (hi > lo)
			strip_branch(re, p, &lo, &hi);
		if (hi > lo) {
			memcpy(out + o, re + p[lo].start, p[hi - 1].end - p[lo].start);
			o += p[hi - 1].end - p[lo].start;
		}
		if (i < n)
			out[o++] = '|';
		branch = np;
		i++;
	}
	out[o] = 0;
	free(p);
	if (o == n) {
		free(out);
		return 0;
	}
	*ret = out;
	return 0;
keep:
	free(p);
	free(out);
	return 0;
nomem:
	free(p);
	free(out);
	return -ENOMEM;
}
