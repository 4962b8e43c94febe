/* fdegroup.c: the start of the .eh_frame FDE around an address, which names the frames of
 * code no symbol covers: one row per function (`lib.so+0x16900`), not one per address. */
#include "fdegroup.h"

#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>

#include "cfi.h"
#include "object.h"

#define MAX_FDES (4u << 20)

struct fde_range {
	uint64_t start, end;
};

struct fde_groups {
	struct fde_range *v;
	size_t n, cap;
};

static int add_fde(void *ctx, const struct cfi_fde *f)
{
	struct fde_groups *g = ctx;

	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 256;
		struct fde_range *v;

		if (cap > MAX_FDES)
			return -E2BIG;
		v = reallocarray(g->v, cap, sizeof(*v));
		if (!v)
			return -ENOMEM;
		g->v = v;
		g->cap = cap;
	}
	g->v[g->n++] = (struct fde_range){ f->start, f->end };
	return 0;
}

static int cmp_fde(const void *a, const void *b)
{
	const struct fde_range *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

/* .eh_frame's bytes and address. */
static int eh_frame(Elf *elf, struct cfi_section *ret)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	GElf_Ehdr eh;

	if (!gelf_getehdr(elf, &eh) || elf_getshdrstrndx(elf, &shstrndx) < 0)
		return -ENOENT;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(name = elf_strptr(elf, shstrndx, sh.sh_name)) || strcmp(name, ".eh_frame") != 0)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || !d->d_size)
			return -ENOENT;
		*ret = (struct cfi_section){ .data = d->d_buf, .size = d->d_size, .vaddr = sh.sh_addr, .eh = true,
					     .addr_size = eh.e_ident[EI_CLASS] == ELFCLASS32 ? 4 : 8 };
		return 0;
	}
	return -ENOENT;
}

int fde_groups_build(Elf *elf, struct fde_groups **ret)
{
	const struct cfi_ops ops = { .fde_begin = add_fde };
	struct cfi_counts counts = { 0 };
	struct cfi_section sec;
	struct obj_load *loads;
	struct fde_groups *g;
	size_t nloads, k = 0;
	uint64_t lo = UINT64_MAX, hi = 0;
	int r;

	*ret = NULL;
	r = eh_frame(elf, &sec);
	if (r < 0)
		return r;
	r = obj_read_loads(elf, &loads, &nloads);
	if (r < 0)
		return r == -ENOMEM ? r : -ENOENT;
	for (size_t i = 0; i < nloads; i++) {
		if (!loads[i].exec)
			continue;
		if (loads[i].vaddr < lo)
			lo = loads[i].vaddr;
		if (loads[i].vaddr + loads[i].memsz > hi)
			hi = loads[i].vaddr + loads[i].memsz;
	}
	free(loads);
	if (hi <= lo)
		return -ENOENT;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	r = cfi_read_section(&sec, lo, hi, &ops, g, &counts);
	if (r == 0 && !g->n)
		r = -ENOENT;
	if (r < 0)
		goto fail;
	qsort(g->v, g->n, sizeof(*g->v), cmp_fde);
	/* The same FDE twice is harmless; two that overlap make every group
	 * doubtful (a lying table), and a wrong group would pass for a function. */
	for (size_t i = 0; i < g->n; i++) {
		if (k && g->v[i].start == g->v[k - 1].start && g->v[i].end == g->v[k - 1].end)
			continue;
		if (k && g->v[i].start < g->v[k - 1].end) {
			r = -EBADMSG;
			goto fail;
		}
		g->v[k++] = g->v[i];
	}
	g->n = k;
	*ret = g;
	return 0;
fail:
	fde_groups_free(g);
	return r == -E2BIG ? -EBADMSG : r;
}

bool fde_groups_find(const struct fde_groups *g, uint64_t addr, uint64_t *ret_start)
{
	size_t lo = 0, hi = g ? g->n : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (g->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || addr >= g->v[lo - 1].end)
		return false;
	*ret_start = g->v[lo - 1].start;
	return true;
}

size_t fde_groups_bytes(const struct fde_groups *g)
{
	return g ? sizeof(*g) + g->cap * sizeof(*g->v) : 0;
}

void fde_groups_free(struct fde_groups *g)
{
	if (!g)
		return;
	free(g->v);
	free(g);
}
