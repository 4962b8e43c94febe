/* symindex.c: a module's function symbols, sorted once: libdwfl's own lookup scans every
 * symbol per call; names are checked to end inside their string table. */
#include "symindex.h"

#include <gelf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dwfl_session.h"

static int cmp_fsym(const void *a, const void *b)
{
	const struct fsym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return (int)x->rank - (int)y->rank;
}

/* One stable counting pass of v[n] into tmp by the 8-bit digit of each key;
 * false (nothing moved) when every key has the same digit. */
static bool fsyms_pass(struct fsym *v, struct fsym *tmp, size_t n, uint64_t min, unsigned shift, bool by_rank)
{
	size_t count[256] = { 0 }, sum = 0;

#define DIGIT(f) (by_rank ? (f).rank & 0xff : (((f).addr - min) >> shift) & 0xff)
	for (size_t i = 0; i < n; i++)
		count[DIGIT(v[i])]++;
	if (count[DIGIT(v[0])] == n)
		return false;
	for (size_t d = 0; d < 256; d++) {
		size_t k = count[d];

		count[d] = sum;
		sum += k;
	}
	for (size_t i = 0; i < n; i++)
		tmp[count[DIGIT(v[i])]++] = v[i];
#undef DIGIT
	memcpy(v, tmp, n * sizeof(*v));
	return true;
}

/* Sorts by (addr, rank) in linear time: a big binary has hundreds of thousands
 * of symbols, and qsort() of them was a fifth of a steady agent's CPU where new
 * programs keep starting. A stable LSD radix sort, rank first, then the bytes
 * of addr - min that differ; sorted input (common) costs one look. */
void fsyms_sort(struct fsym *v, size_t n)
{
	uint64_t min = UINT64_MAX, max = 0;
	bool sorted = true;
	struct fsym *tmp;

	for (size_t i = 0; i < n; i++) {
		if (i && cmp_fsym(&v[i - 1], &v[i]) > 0)
			sorted = false;
		min = v[i].addr < min ? v[i].addr : min;
		max = v[i].addr > max ? v[i].addr : max;
	}
	if (sorted)
		return;
	tmp = malloc(n * sizeof(*tmp));
	if (!tmp) {
		qsort(v, n, sizeof(*v), cmp_fsym);
		return;
	}
	fsyms_pass(v, tmp, n, min, 0, true);
	for (unsigned shift = 0; shift < 64 && (max - min) >> shift; shift += 8)
		fsyms_pass(v, tmp, n, min, shift, false);
	free(tmp);
}

static void strtabs_add(struct strtabs *t, Elf *elf)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while (elf && t->n < 16 && (scn = elf_nextscn(elf, scn))) {
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_STRTAB)
			continue;
		d = elf_getdata(scn, NULL);
		if (d && d->d_buf && d->d_size) {
			t->lo[t->n] = d->d_buf;
			t->hi[t->n++] = (const char *)d->d_buf + d->d_size;
		}
	}
}

/* True when name ends (NUL) inside the string table it starts in. A name in no
 * table we know (MiniDebugInfo's, which libdwfl keeps to itself) is refused. */
static bool name_bounded(const struct strtabs *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (name >= t->lo[i] && name < t->hi[i])
			return memchr(name, 0, (size_t)(t->hi[i] - name)) != NULL;
	return false;
}

/* The executable sections of elf, in libdwfl addresses, sorted. */
struct xsecs {
	uint64_t *start, *end;
	size_t n;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int xsecs_read(Elf *elf, uint64_t bias, struct xsecs *ret)
{
	Elf_Scn *scn = NULL;
	size_t shnum, n = 0;
	uint64_t *pairs;

	memset(ret, 0, sizeof(*ret));
	if (!elf || elf_getshdrnum(elf, &shnum) < 0 || shnum == 0)
		return 0;
	pairs = calloc(shnum, 2 * sizeof(*pairs));
	if (!pairs)
		return -ENOMEM;
	while ((scn = elf_nextscn(elf, scn)) && n < shnum) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) || !(sh.sh_flags & SHF_EXECINSTR) ||
		    !sh.sh_size || sh.sh_addr + sh.sh_size < sh.sh_addr)
			continue;
		pairs[2 * n] = sh.sh_addr + bias;
		pairs[2 * n + 1] = sh.sh_addr + sh.sh_size + bias;
		n++;
	}
	/* Pairs sort by start as one 16-byte record: qsort on the first word. */
	qsort(pairs, n, 2 * sizeof(*pairs), cmp_u64);
	ret->start = pairs;
	ret->n = n;
	return 0;
}

/* The end of the executable section holding a; 0 when none does, UINT64_MAX
 * when the file has no section headers (one unbounded section). */
static uint64_t xsecs_end(const struct xsecs *x, uint64_t a)
{
	size_t lo = 0, hi = x->n;

	if (!x->start)
		return UINT64_MAX;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (x->start[2 * mid] <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && a < x->start[2 * (lo - 1) + 1] ? x->start[2 * (lo - 1) + 1] : 0;
}

/* Bounds every zero-sized symbol (_init, hand-written assembly): up to the next
 * symbol, and never past the end of its section (.init is followed by .plt). */
static void bound_unsized(struct dwarf_ctx *c, const struct xsecs *x)
{
	for (size_t i = 0; i < c->nsyms; i++) {
		uint64_t end;
		size_t j;

		if (c->syms[i].size)
			continue;
		end = xsecs_end(x, c->syms[i].addr);
		for (j = i + 1; j < c->nsyms && c->syms[j].addr == c->syms[i].addr; j++)
			;
		if (j < c->nsyms && c->syms[j].addr < end)
			end = c->syms[j].addr;
		/* end == 0: in no executable section; UINT64_MAX: the last symbol of
		 * a file without section headers, which covers what follows. */
		c->syms[i].size = end > c->syms[i].addr ? end - c->syms[i].addr : 0;
	}
}

static int syms_build(struct dwarf_ctx *c)
{
	int total = dwfl_module_getsymtab(c->mod);
	struct xsecs x;
	Dwarf_Addr bias;
	Dwarf *dw;
	size_t n = 0, cap;
	int r;

	c->syms_done = true;
	if (total < 1)
		total = 1;
	/* The stubs are in the object file itself (not a separate debug file),
	 * named from its dynamic relocations. */
	r = obj_plt_read(c->main_elf, &c->plt);
	if (r < 0)
		return r;
	cap = (size_t)total - 1 + c->plt.n;
	if (cap == 0)
		return 0;
	c->syms = malloc(cap * sizeof(*c->syms));
	if (!c->syms)
		return -ENOMEM;
	c->strtabs.n = 0;
	strtabs_add(&c->strtabs, dwfl_module_getelf(c->mod, &bias));
	dw = dwfl_module_getdwarf(c->mod, &bias);
	if (dw)
		strtabs_add(&c->strtabs, dwarf_getelf(dw));
	for (int i = 1; i < total; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(c->mod, i, &sym, &addr, &shndx, NULL, NULL);
		unsigned type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);

		/* The name itself is not read here (a big binary's .strtab is many MiB
		 * of pages): sym_lookup checks the one it returns. */
		if (!name || shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC))
			continue;
		c->syms[n++] = (struct fsym){
			.addr = addr,
			.size = addr + sym.st_size >= addr ? sym.st_size : 0,
			.name = name,
			.rank = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2,
		};
	}
	for (size_t i = 0; i < c->plt.n; i++) {
		const struct obj_plt_stub *st = &c->plt.v[i];

		c->syms[n++] = (struct fsym){ .addr = st->addr + c->bias, .size = st->size,
					      .name = obj_plt_name(&c->plt, st), .rank = 3 };
	}
	c->nsyms = n;
	/* Most symbols are not functions: give the rest back. */
	if (n == 0) {
		free(c->syms);
		c->syms = NULL;
	} else if (n < cap) {
		struct fsym *v = realloc(c->syms, n * sizeof(*c->syms));

		if (v)
			c->syms = v;
	}
	fsyms_sort(c->syms, n);
	r = xsecs_read(c->main_elf, c->bias, &x);
	if (r < 0)
		return r;
	bound_unsized(c, &x);
	free(x.start);
	return 0;
}

/* The function symbol covering q: among the symbols at the nearest address at
 * or before q, the best ranked, when one of them (sized, or bounded by
 * bound_unsized) reaches q. */
int sym_lookup(struct dwarf_ctx *c, Dwarf_Addr q, const char **ret)
{
	size_t lo = 0, hi, first;
	uint64_t size = 0;
	const struct fsym *f;
	int r;

	*ret = NULL;
	if (!c->syms_done) {
		r = syms_build(c);
		if (r < 0)
			return r;
	}
	hi = c->nsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->syms[mid].addr <= q)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return 0;
	first = lo - 1;
	while (first > 0 && c->syms[first - 1].addr == c->syms[lo - 1].addr)
		first--;
	for (size_t i = first; i < lo; i++)
		if (c->syms[i].size > size)
			size = c->syms[i].size;
	f = &c->syms[first];
	/* A stub's name is prowl's own; an ELF name is checked to end in its table. */
	if (q - f->addr < size && (f->rank == 3 || name_bounded(&c->strtabs, f->name)) && f->name[0])
		*ret = f->name;
	return 0;
}

