/* kallsyms.c: "addr type name [module]" parser and binary-search lookup.
 * Entries are parallel arrays of addresses and offsets into one name blob. */
#include "kallsyms.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PFX "__pfx_"
#define PFX_LEN (sizeof(PFX) - 1)
#define RECENT_MAX 8 /* names remembered for sharing */

struct parser {
	struct kallsyms *k;
	size_t cap, names_cap, mods_cap;
	uint32_t recent[RECENT_MAX]; /* the latest symbol names stored, newest first */
	size_t nrecent;
	uint16_t last_mod;
	uint64_t last_addr;
	bool unsorted;
};

/* Sets *p to an array of n elements of size bytes, keeping its contents. */
static int resize(void **p, size_t n, size_t size)
{
	void *q;

	if (n == 0) {
		free(*p);
		*p = NULL;
		return 0;
	}
	if (n > SIZE_MAX / size)
		return -ENOMEM;
	q = realloc(*p, n * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	return 0;
}

#define RESIZE(p, n) resize((void **)&(p), (n), sizeof(*(p)))

/* Grows by half: less slack than doubling while parsing; shrink() drops it. */
static size_t grown(size_t cap, size_t need, size_t min)
{
	if (cap < min)
		cap = min;
	while (cap < need)
		cap += cap / 2;
	return cap;
}

uint64_t kallsyms_addr(const struct kallsyms *k, size_t i)
{
	return k->addr64 ? k->addr64[i] : k->base + k->addr32[i];
}

/* Appends s and a NUL to the name blob; its offset goes to *ret. */
static int add_name(struct parser *ps, const char *s, size_t len, uint32_t *ret)
{
	struct kallsyms *k = ps->k;
	int r;

	if (len >= KSYM_NAME_PFX - k->names_len)
		return -E2BIG;
	if (ps->names_cap - k->names_len < len + 1) {
		size_t cap = grown(ps->names_cap, k->names_len + len + 1, 64 * 1024);

		r = RESIZE(k->names, cap);
		if (r < 0)
			return r;
		ps->names_cap = cap;
	}
	memcpy(k->names + k->names_len, s, len);
	k->names[k->names_len + len] = 0;
	*ret = (uint32_t)k->names_len;
	k->names_len += len + 1;
	return 0;
}

/* A __pfx_ entry sits next to the function it pads: a name equal to one of
 * the latest ones stored shares its bytes. */
static int add_symbol_name(struct parser *ps, const char *name, uint32_t *ret)
{
	bool pfx = strncmp(name, PFX, PFX_LEN) == 0;
	uint32_t off;
	int r;

	if (pfx)
		name += PFX_LEN;
	for (size_t i = 0; i < ps->nrecent; i++)
		if (strcmp(ps->k->names + ps->recent[i], name) == 0) {
			*ret = ps->recent[i] | (pfx ? KSYM_NAME_PFX : 0);
			return 0;
		}
	r = add_name(ps, name, strlen(name), &off);
	if (r < 0)
		return r;
	memmove(ps->recent + 1, ps->recent, (RECENT_MAX - 1) * sizeof(*ps->recent));
	ps->recent[0] = off;
	if (ps->nrecent < RECENT_MAX)
		ps->nrecent++;
	*ret = off | (pfx ? KSYM_NAME_PFX : 0);
	return 0;
}

/* Module names are kept once; *ret is 1 + their index in mods. */
static int add_module(struct parser *ps, const char *mod, uint16_t *ret)
{
	struct kallsyms *k = ps->k;
	uint32_t off;
	int r;

	if (ps->last_mod && strcmp(k->names + k->mods[ps->last_mod - 1], mod) == 0) {
		*ret = ps->last_mod;
		return 0;
	}
	for (size_t i = 0; i < k->nmods; i++)
		if (strcmp(k->names + k->mods[i], mod) == 0) {
			*ret = ps->last_mod = (uint16_t)(i + 1);
			return 0;
		}
	if (k->nmods == UINT16_MAX)
		return -E2BIG;
	if (k->nmods == ps->mods_cap) {
		size_t cap = grown(ps->mods_cap, k->nmods + 1, 16);

		r = RESIZE(k->mods, cap);
		if (r < 0)
			return r;
		ps->mods_cap = cap;
	}
	r = add_name(ps, mod, strlen(mod), &off);
	if (r < 0)
		return r;
	k->mods[k->nmods++] = off;
	*ret = ps->last_mod = (uint16_t)k->nmods;
	return 0;
}

/* An address outside base's 4 GiB: switches to full addresses. */
static int widen(struct parser *ps)
{
	struct kallsyms *k = ps->k;
	uint64_t *a = NULL;
	int r = RESIZE(a, ps->cap);

	if (r < 0)
		return r;
	for (size_t i = 0; i < k->n; i++)
		a[i] = k->base + k->addr32[i];
	free(k->addr32);
	k->addr32 = NULL;
	k->addr64 = a;
	return 0;
}

static int add_symbol(struct parser *ps, uint64_t addr, const char *name, const char *mod)
{
	struct kallsyms *k = ps->k;
	uint32_t name_off;
	uint16_t mod_idx = 0;
	int r;

	if (k->n == UINT32_MAX)
		return -E2BIG;
	if (k->n == ps->cap) {
		size_t cap = grown(ps->cap, k->n + 1, 4096);

		r = k->addr64 ? RESIZE(k->addr64, cap) : RESIZE(k->addr32, cap);
		if (r == 0)
			r = RESIZE(k->name, cap);
		if (r == 0)
			r = RESIZE(k->mod, cap);
		if (r < 0)
			return r;
		ps->cap = cap;
	}
	if (k->n == 0)
		k->base = addr & ~(uint64_t)UINT32_MAX;
	else if (!k->addr64 && addr - k->base > UINT32_MAX) {
		r = widen(ps);
		if (r < 0)
			return r;
	}
	r = add_symbol_name(ps, name, &name_off);
	if (r == 0 && mod)
		r = add_module(ps, mod, &mod_idx);
	if (r < 0)
		return r;

	if (k->n > 0 && addr < ps->last_addr)
		ps->unsorted = true;
	ps->last_addr = addr;
	if (k->addr64)
		k->addr64[k->n] = addr;
	else
		k->addr32[k->n] = (uint32_t)(addr - k->base);
	k->name[k->n] = name_off;
	k->mod[k->n] = mod_idx;
	k->n++;
	return 0;
}

/* Drops the growth slack; a failed shrink keeps the larger block. */
static void shrink(struct kallsyms *k)
{
	(void)RESIZE(k->addr32, k->addr64 ? 0 : k->n);
	(void)RESIZE(k->addr64, k->addr64 ? k->n : 0);
	(void)RESIZE(k->name, k->n);
	(void)RESIZE(k->mod, k->n);
	(void)RESIZE(k->mods, k->nmods);
	(void)RESIZE(k->names, k->names_len);
}

static int cmp_order(const void *a, const void *b, void *userdata)
{
	const struct kallsyms *k = userdata;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	uint64_t ax = kallsyms_addr(k, x), ay = kallsyms_addr(k, y);

	if (ax != ay)
		return ax < ay ? -1 : 1;
	return x < y ? -1 : x > y; /* equal addresses keep file order */
}

/* Reorders the n elements of size bytes at *p: element i becomes old element order[i]. */
static int gather(void **p, const uint32_t *order, size_t n, size_t size)
{
	const char *src = *p;
	char *dst;

	if (!src)
		return 0;
	dst = malloc(n * size);
	if (!dst)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		memcpy(dst + i * size, src + order[i] * size, size);
	free(*p);
	*p = dst;
	return 0;
}

#define GATHER(p, order, n) gather((void **)&(p), (order), (n), sizeof(*(p)))

/* /proc/kallsyms is normally in address order; when not, sorts a permutation
 * and applies it to each array in turn. */
static int sort_symbols(struct kallsyms *k)
{
	uint32_t *order = NULL;
	int r = RESIZE(order, k->n);

	if (r < 0)
		return r;
	for (size_t i = 0; i < k->n; i++)
		order[i] = (uint32_t)i;
	qsort_r(order, k->n, sizeof(*order), cmp_order, k);
	r = GATHER(k->addr32, order, k->n);
	if (r == 0)
		r = GATHER(k->addr64, order, k->n);
	if (r == 0)
		r = GATHER(k->name, order, k->n);
	if (r == 0)
		r = GATHER(k->mod, order, k->n);
	free(order);
	return r;
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
	struct parser ps = { .k = k };
	size_t seen = 0, linecap = 0;
	char *line = NULL;
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
		r = add_symbol(&ps, addr, name, mod);
		if (r < 0)
			break;
	}
	free(line);
	if (r < 0)
		goto fail;

	if (seen && !nonzero) {
		k->hidden = true;
		k->n = k->nmods = k->names_len = 0;
	}
	shrink(k);
	if (ps.unsorted && !k->hidden) {
		r = sort_symbols(k);
		if (r < 0)
			goto fail;
	}
	*ret = k;
	return 0;
fail:
	kallsyms_free(k);
	return r;
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

bool kallsyms_find(const struct kallsyms *k, uint64_t addr, struct ksym *ret)
{
	size_t lo = 0, hi = k->n;
	uint64_t at;
	uint32_t name;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (kallsyms_addr(k, mid) <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return false;
	lo--;
	at = kallsyms_addr(k, lo);
	if (lo == k->n - 1 && addr - at >= KSYM_LAST_MAX)
		return false;
	while (lo > 0 && kallsyms_addr(k, lo - 1) == at)
		lo--;
	name = k->name[lo];
	*ret = (struct ksym){
		.addr = at,
		.prefix = name & KSYM_NAME_PFX ? PFX : "",
		.name = k->names + (name & ~KSYM_NAME_PFX),
		.module = k->mod[lo] ? k->names + k->mods[k->mod[lo] - 1] : NULL,
	};
	return true;
}

size_t kallsyms_mem_bytes(const struct kallsyms *k)
{
	size_t addr_size;

	if (!k)
		return 0;
	addr_size = k->addr64 ? sizeof(*k->addr64) : sizeof(*k->addr32);
	return sizeof(*k) + k->n * (addr_size + sizeof(*k->name) + sizeof(*k->mod)) +
	       k->nmods * sizeof(*k->mods) + k->names_len;
}

void kallsyms_free(struct kallsyms *k)
{
	if (!k)
		return;
	free(k->addr32);
	free(k->addr64);
	free(k->name);
	free(k->mod);
	free(k->mods);
	free(k->names);
	free(k);
}
