/* kallsyms.c: "addr type name [module]" parser and binary-search lookup.
 * Names live in one growable buffer; offsets become pointers after parsing. */
#include "kallsyms.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* While parsing, name/module hold offsets into strings (+1, 0 = none). */
struct raw_sym {
	uint64_t addr;
	size_t name_off, mod_off;
	size_t seq;
};

static int add_string(struct kallsyms *k, const char *s, size_t len, size_t *ret_off)
{
	if (k->strings_cap - k->strings_len < len + 1) {
		size_t cap = k->strings_cap ? k->strings_cap : 1u << 20;
		char *n;

		while (cap - k->strings_len < len + 1)
			cap *= 2;
		n = realloc(k->strings, cap);
		if (!n)
			return -ENOMEM;
		k->strings = n;
		k->strings_cap = cap;
	}
	memcpy(k->strings + k->strings_len, s, len);
	k->strings[k->strings_len + len] = 0;
	*ret_off = k->strings_len + 1;
	k->strings_len += len + 1;
	return 0;
}

static int cmp_raw(const void *a, const void *b)
{
	const struct raw_sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool is_text(char t)
{
	return t == 't' || t == 'T' || t == 'w' || t == 'W';
}

/* Splits "ffffffff81000000 T name\t[module]" in place; returns false if malformed. */
static bool split_line(char *line, uint64_t *ret_addr, char *ret_type, char **ret_name, char **ret_mod)
{
	char *end, *p, *mod = NULL;

	errno = 0;
	*ret_addr = strtoull(line, &end, 16);
	if (end == line || errno || *end != ' ')
		return false;
	p = end + 1;
	if (!*p || p[1] != ' ')
		return false;
	*ret_type = *p;
	p += 2;
	p[strcspn(p, "\n")] = 0;
	end = p + strcspn(p, " \t");
	if (end == p)
		return false;
	if (*end) {
		*end++ = 0;
		end += strspn(end, " \t");
		if (*end == '[') {
			mod = end + 1;
			mod[strcspn(mod, "]")] = 0;
		}
	}
	*ret_name = p;
	*ret_mod = mod && *mod ? mod : NULL;
	return true;
}

int kallsyms_parse(FILE *f, struct kallsyms **ret)
{
	struct kallsyms *k = calloc(1, sizeof(*k));
	struct raw_sym *raw = NULL;
	size_t nraw = 0, capraw = 0, seen = 0;
	char *line = NULL;
	size_t linecap = 0;
	bool nonzero = false;
	int r = 0;

	if (!k)
		return -ENOMEM;
	for (;;) {
		uint64_t addr;
		char type, *name, *mod;
		ssize_t len;

		errno = 0;
		len = getline(&line, &linecap, f);
		if (len < 0) {
			if (errno == ENOMEM)
				r = -ENOMEM;
			else if (ferror(f))
				r = errno ? -errno : -EIO;
			break;
		}
		if (!split_line(line, &addr, &type, &name, &mod))
			continue;
		seen++;
		if (addr)
			nonzero = true;
		if (!is_text(type))
			continue;
		if (nraw == capraw) {
			size_t cap = capraw ? capraw * 2 : 4096;
			struct raw_sym *n = realloc(raw, cap * sizeof(*n));

			if (!n) {
				r = -ENOMEM;
				break;
			}
			raw = n;
			capraw = cap;
		}
		raw[nraw] = (struct raw_sym){ .addr = addr, .seq = nraw };
		r = add_string(k, name, strlen(name), &raw[nraw].name_off);
		if (r == 0 && mod)
			r = add_string(k, mod, strlen(mod), &raw[nraw].mod_off);
		if (r < 0)
			break;
		nraw++;
	}
	free(line);
	if (r < 0)
		goto out;

	if (seen && !nonzero) {
		k->hidden = true;
		nraw = 0;
	}
	if (nraw > 1)
		qsort(raw, nraw, sizeof(*raw), cmp_raw);
	if (nraw) {
		k->v = malloc(nraw * sizeof(*k->v));
		if (!k->v) {
			r = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < nraw; i++) {
		k->v[i].addr = raw[i].addr;
		k->v[i].name = k->strings + raw[i].name_off - 1;
		k->v[i].module = raw[i].mod_off ? k->strings + raw[i].mod_off - 1 : NULL;
	}
	k->n = nraw;
out:
	free(raw);
	if (r < 0) {
		kallsyms_free(k);
		return r;
	}
	*ret = k;
	return 0;
}

int kallsyms_load(const char *path, struct kallsyms **ret)
{
	FILE *f = fopen(path, "re");
	int r;

	if (!f)
		return -errno;
	r = kallsyms_parse(f, ret);
	fclose(f);
	return r;
}

const struct ksym *kallsyms_find(const struct kallsyms *k, uint64_t addr)
{
	size_t lo = 0, hi = k->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->v[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	lo--;
	if (lo == k->n - 1 && addr - k->v[lo].addr >= KSYM_LAST_MAX)
		return NULL;
	while (lo > 0 && k->v[lo - 1].addr == k->v[lo].addr)
		lo--;
	return &k->v[lo];
}

void kallsyms_free(struct kallsyms *k)
{
	if (!k)
		return;
	free(k->v);
	free(k->strings);
	free(k);
}
