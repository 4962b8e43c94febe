/* plt.c: the stubs of an object's .plt, .plt.sec and .plt.got sections and the function
 * each one jumps to, read from the dynamic relocations, so a frame there is `name@plt`. */
#include "plt.h"

#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RELOCS   (1u << 20)
#define MAX_NAME     512
#define PLT0_SIZE    16

/* A GOT slot and the symbol a relocation binds to it. */
struct slot {
	uint64_t got;
	const char *name; /* in the dynamic string table; NULL: IRELATIVE */
	uint64_t addend;
};

struct reader {
	Elf *elf;
	struct slot *slots;      /* sorted by got */
	size_t nslots;
	struct slot *jump_slots; /* .rela.plt in order, for push-index stubs */
	size_t njump;
	struct obj_plt *out;
	size_t cap, names_cap;
};

static int cmp_slot(const void *a, const void *b)
{
	const struct slot *x = a, *y = b;

	return x->got < y->got ? -1 : x->got > y->got;
}

static const struct slot *find_slot(const struct reader *r, uint64_t got)
{
	size_t lo = 0, hi = r->nslots;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->slots[mid].got < got)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->nslots && r->slots[lo].got == got ? &r->slots[lo] : NULL;
}

/* DT_RELACOUNT of the dynamic section dyn: how many R_X86_64_RELATIVE entries open
 * .rela.dyn (0 when unknown). */
static size_t relative_count(Elf_Scn *dyn)
{
	GElf_Shdr sh;
	Elf_Data *d;
	GElf_Dyn e;

	if (!dyn || !gelf_getshdr(dyn, &sh) || !sh.sh_entsize || !(d = elf_getdata(dyn, NULL)))
		return 0;
	for (size_t i = 0; i < sh.sh_size / sh.sh_entsize && gelf_getdyn(d, (int)i, &e); i++) {
		if (e.d_tag == DT_NULL)
			break;
		if (e.d_tag == DT_RELACOUNT)
			return (size_t)e.d_un.d_val;
	}
	return 0;
}

/* Adds the GOT slots of one SHT_RELA section (jump slots, GLOB_DAT, IRELATIVE), from
 * its entry skip on. Past skip only the rest of the section is read: in a big C++
 * binary, .rela.dyn holds a million relative relocations (26 MB in chromium) before
 * the few that name symbols. */
static int read_relocs(struct reader *r, Elf_Scn *scn, const GElf_Shdr *sh, bool jump, size_t skip)
{
	Elf_Scn *symscn = elf_getscn(r->elf, sh->sh_link);
	GElf_Shdr symsh;
	Elf_Data *d, *syms;
	size_t n;

	if (!sh->sh_entsize || !symscn || !gelf_getshdr(symscn, &symsh) || !(syms = elf_getdata(symscn, NULL)))
		return 0;
	n = sh->sh_size / sh->sh_entsize;
	if (skip >= n)
		return 0;
	if (skip && sh->sh_entsize == sizeof(Elf64_Rela)) {
		n -= skip;
		d = elf_getdata_rawchunk(r->elf, (int64_t)(sh->sh_offset + skip * sh->sh_entsize),
					 n * sh->sh_entsize, ELF_T_RELA);
	} else {
		d = elf_getdata(scn, NULL);
	}
	if (!d)
		return 0;
	if (n > MAX_RELOCS - r->nslots)
		n = MAX_RELOCS - r->nslots;
	if (n == 0)
		return 0;
	{
		struct slot *v = reallocarray(r->slots, r->nslots + n, sizeof(*v));

		if (!v)
			return -ENOMEM;
		r->slots = v;
	}
	if (jump) {
		r->jump_slots = calloc(n, sizeof(*r->jump_slots));
		if (!r->jump_slots)
			return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		GElf_Rela rela;
		GElf_Sym sym;
		unsigned type, symi;
		struct slot s = { 0 };

		if (!gelf_getrela(d, (int)i, &rela))
			break;
		type = GELF_R_TYPE(rela.r_info);
		symi = GELF_R_SYM(rela.r_info);
		if (type == R_X86_64_IRELATIVE) {
			s.addend = (uint64_t)rela.r_addend;
		} else if (type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT) {
			if (!symi || !gelf_getsym(syms, (int)symi, &sym))
				continue;
			s.name = elf_strptr(r->elf, symsh.sh_link, sym.st_name);
			if (!s.name || !*s.name || strnlen(s.name, MAX_NAME) == MAX_NAME)
				continue;
		} else {
			continue;
		}
		s.got = rela.r_offset;
		r->slots[r->nslots++] = s;
		if (jump)
			r->jump_slots[r->njump++] = s;
	}
	return 0;
}

static int add_stub(struct reader *r, uint64_t addr, uint32_t size, const struct slot *s)
{
	struct obj_plt *p = r->out;
	char name[MAX_NAME + 32];
	size_t len;

	if (s->name)
		snprintf(name, sizeof(name), "%s@plt", s->name);
	else
		snprintf(name, sizeof(name), "*ABS*+0x%" PRIx64 "@plt", s->addend);
	len = strlen(name) + 1;
	if (p->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 64;
		struct obj_plt_stub *v = reallocarray(p->v, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->v = v;
		r->cap = cap;
	}
	if (p->names_len + len > r->names_cap) {
		size_t cap = r->names_cap ? 2 * r->names_cap : 4096;
		char *v;

		while (cap < p->names_len + len)
			cap *= 2;
		v = realloc(p->names, cap);
		if (!v)
			return -ENOMEM;
		p->names = v;
		r->names_cap = cap;
	}
	memcpy(p->names + p->names_len, name, len);
	p->v[p->n++] = (struct obj_plt_stub){ .addr = addr, .size = size, .name = (uint32_t)p->names_len };
	p->names_len += len;
	return 0;
}

/* The slot a stub at addr with bytes b[0..size) uses: the GOT entry of its
 * `jmp *disp(%rip)` (ff 25, also after endbr64 and the bnd prefix), or, for
 * the lazy-binding half of an IBT .plt, the relocation its `push $index` names. */
static const struct slot *stub_slot(const struct reader *r, uint64_t addr, const uint8_t *b, uint32_t size)
{
	for (uint32_t k = 0; k + 6 <= size; k++) {
		int32_t disp;

		if (b[k] != 0xff || b[k + 1] != 0x25)
			continue;
		memcpy(&disp, b + k + 2, 4);
		return find_slot(r, addr + k + 6 + (int64_t)disp);
	}
	for (uint32_t k = 0; k + 5 <= size; k++) {
		uint32_t idx;

		if (b[k] != 0x68)
			continue;
		memcpy(&idx, b + k + 1, 4);
		return idx < r->njump ? &r->jump_slots[idx] : NULL;
	}
	return NULL;
}

static int read_stubs(struct reader *r, Elf_Scn *scn, const GElf_Shdr *sh, bool lazy_plt)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	uint32_t ent = sh->sh_entsize == 8 || sh->sh_entsize == 16 ? (uint32_t)sh->sh_entsize : 16;
	const uint8_t *b;
	uint64_t off = lazy_plt ? PLT0_SIZE : 0;
	int ret;

	if (!d || !d->d_buf || d->d_size < sh->sh_size)
		return 0;
	b = d->d_buf;
	for (; off + ent <= sh->sh_size; off += ent) {
		const struct slot *s = stub_slot(r, sh->sh_addr + off, b + off, ent);

		if (s && (ret = add_stub(r, sh->sh_addr + off, ent, s)) < 0)
			return ret;
	}
	return 0;
}

static int cmp_stub(const void *a, const void *b)
{
	const struct obj_plt_stub *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int obj_plt_read(Elf *elf, struct obj_plt *ret)
{
	struct reader r = { .elf = elf, .out = ret };
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	GElf_Ehdr eh;
	Elf_Scn *rela_plt = NULL, *rela_dyn = NULL, *dynamic = NULL;
	GElf_Shdr plt_sh, dyn_sh;
	bool plt_got = false;
	int err = 0;

	memset(ret, 0, sizeof(*ret));
	if (!gelf_getehdr(elf, &eh) || eh.e_machine != EM_X86_64 || elf_getshdrstrndx(elf, &shstrndx) < 0)
		return 0;
	/* The relocation sections, and whether there are .plt.got stubs: .rela.dyn
	 * names only their slots (GLOB_DAT), so it is read only when they exist. */
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNAMIC && !dynamic)
			dynamic = scn;
		if ((sh.sh_type != SHT_RELA && sh.sh_type != SHT_PROGBITS) ||
		    !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
			continue;
		if (sh.sh_type == SHT_RELA && strcmp(name, ".rela.plt") == 0 && !rela_plt) {
			rela_plt = scn;
			plt_sh = sh;
		} else if (sh.sh_type == SHT_RELA && strcmp(name, ".rela.dyn") == 0 && !rela_dyn) {
			rela_dyn = scn;
			dyn_sh = sh;
		} else if (sh.sh_type == SHT_PROGBITS && (sh.sh_flags & SHF_EXECINSTR) && strcmp(name, ".plt.got") == 0) {
			plt_got = true;
		}
	}
	/* Relocations first: the stubs are named through them. */
	if (rela_plt)
		err = read_relocs(&r, rela_plt, &plt_sh, true, 0);
	if (err == 0 && rela_dyn && plt_got)
		err = read_relocs(&r, rela_dyn, &dyn_sh, false, relative_count(dynamic));
	if (err == 0 && r.nslots) {
		qsort(r.slots, r.nslots, sizeof(*r.slots), cmp_slot);
		scn = NULL;
		while ((scn = elf_nextscn(elf, scn)) && err == 0) {
			GElf_Shdr sh;
			const char *name;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_EXECINSTR) ||
			    !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
				continue;
			if (strcmp(name, ".plt") == 0 || strcmp(name, ".plt.sec") == 0 || strcmp(name, ".plt.got") == 0)
				err = read_stubs(&r, scn, &sh, strcmp(name, ".plt") == 0);
		}
	}
	free(r.slots);
	free(r.jump_slots);
	if (err < 0) {
		obj_plt_free(ret);
		return err;
	}
	if (ret->n > 1)
		qsort(ret->v, ret->n, sizeof(*ret->v), cmp_stub);
	/* Sections that overlap in a damaged file: keep the first stub at each place. */
	{
		size_t k = 0;

		for (size_t i = 0; i < ret->n; i++)
			if (k == 0 || ret->v[i].addr >= ret->v[k - 1].addr + ret->v[k - 1].size)
				ret->v[k++] = ret->v[i];
		ret->n = k;
	}
	return 0;
}

void obj_plt_free(struct obj_plt *p)
{
	free(p->v);
	free(p->names);
	memset(p, 0, sizeof(*p));
}
