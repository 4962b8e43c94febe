/* gopclntab.c: the Go runtime's own symbol table (.gopclntab, Go 1.18 and later): function
 * names, file:line and inlined calls of Go binaries stripped of .symtab and DWARF. */
#include "gopclntab.h"

#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "object.h"
#include "prowl_limits.h"

/* The layout is a fact of the Go runtime (runtime/symtab.go, runtime2.go). */
#define MAGIC_GO118 0xfffffff0u /* Go 1.18, 1.19 */
#define MAGIC_GO120 0xfffffff1u /* Go 1.20 and later */
#define HDR_WORDS   8            /* nfunc .. pclnOffset, after 8 bytes of magic and sizes */
#define PCDATA_INLTREE  2
#define FUNCDATA_INLTREE 3
#define MAX_FUNCS   (1u << 24)
#define MAX_STEPS   (1u << 20)   /* entries of one pc-value table walked at most */
#define MAX_NAME    PROWL_NAME_MAX /* a longer name is not read */
#define MAX_INLINE  64

struct gopcln {
	const uint8_t *tab;      /* the section's bytes (pcHeader first) */
	uint64_t size;
	uint32_t magic;
	uint8_t quantum;         /* minLC */
	uint32_t nfunc;
	uint64_t text;           /* ELF virtual address entry offsets count from */
	uint64_t funcname, cu, file, pc, ftab; /* offsets from tab */
	size_t func_size;        /* bytes of _func before its pcdata */
	/* The inline trees live in go:func.*, found through the runtime's
	 * module data; without it there are no inlined frames. */
	const uint8_t *image;    /* the whole file */
	size_t image_size;
	struct obj_load *loads;
	size_t nloads;
	uint64_t gofunc;         /* ELF virtual address; 0: not found */
};

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* A NUL-terminated string at off inside [base, base + len), or NULL. */
static const char *str_at(const struct gopcln *g, uint64_t base, uint64_t off)
{
	uint64_t at = base + off, left;

	if (off >= g->size || at >= g->size || at < base)
		return NULL;
	left = g->size - at;
	if (left > MAX_NAME)
		left = MAX_NAME;
	return memchr(g->tab + at, 0, left) ? (const char *)g->tab + at : NULL;
}

static int find_section(Elf *elf, const char *suffix, GElf_Shdr *ret_sh, Elf_Scn **ret)
{
	size_t shstrndx, sl = strlen(suffix);
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return -ENOENT;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		size_t nl;

		if (!gelf_getshdr(scn, ret_sh) || ret_sh->sh_type != SHT_PROGBITS ||
		    !(name = elf_strptr(elf, shstrndx, ret_sh->sh_name)))
			continue;
		nl = strlen(name);
		if (nl >= sl && strcmp(name + nl - sl, suffix) == 0) {
			*ret = scn;
			return 0;
		}
	}
	return -ENOENT;
}

/* The file bytes at ELF virtual address addr, n of them, or NULL. */
static const uint8_t *image_at(const struct gopcln *g, uint64_t addr, uint64_t n)
{
	for (size_t i = 0; i < g->nloads; i++) {
		const struct obj_load *l = &g->loads[i];
		uint64_t off;

		if (addr < l->vaddr || addr - l->vaddr >= l->filesz || n > l->filesz - (addr - l->vaddr))
			continue;
		off = l->offset + (addr - l->vaddr);
		if (off > g->image_size || n > g->image_size - off)
			return NULL;
		return g->image + off;
	}
	return NULL;
}

/* Finds go:func.* through runtime.firstmoduledata: the word that points at
 * the pcHeader, followed by the funcnametab slice; gofunc is a fixed number
 * of words further on (two more since Go 1.20 added the coverage counters). */
static void find_gofunc(struct gopcln *g, Elf *elf, uint64_t tab_vaddr)
{
	size_t idx = g->magic == MAGIC_GO118 ? 38 : 40;
	GElf_Shdr sh;
	Elf_Scn *scn;
	Elf_Data *d;

	if (find_section(elf, ".noptrdata", &sh, &scn) < 0 || !(d = elf_getdata(scn, NULL)) || !d->d_buf)
		return;
	for (uint64_t off = 0; off + (idx + 1) * 8 <= d->d_size; off += 8) {
		const uint8_t *w = (const uint8_t *)d->d_buf + off;
		uint64_t gofunc, rodata;

		if (rd64(w) != tab_vaddr || rd64(w + 8) != tab_vaddr + g->funcname)
			continue;
		gofunc = rd64(w + idx * 8);
		rodata = rd64(w + (idx - 1) * 8);
		/* go:func.* is read-only data past the start of rodata. */
		if (gofunc >= rodata && image_at(g, gofunc, 1))
			g->gofunc = gofunc;
		return;
	}
}

int gopcln_open(Elf *elf, struct gopcln **ret)
{
	struct gopcln *g;
	GElf_Shdr sh, text;
	Elf_Scn *scn;
	Elf_Data *d;
	uint64_t w[HDR_WORDS], prev = 0;
	const uint8_t *t;
	uint32_t magic;
	int r;

	*ret = NULL;
	if (find_section(elf, ".gopclntab", &sh, &scn) < 0)
		return -ENOENT;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size < 8 + HDR_WORDS * 8)
		return -EBADMSG;
	t = d->d_buf;
	magic = rd32(t);
	if (magic != MAGIC_GO118 && magic != MAGIC_GO120)
		return (magic & 0xfffffff0u) == 0xfffffff0u ? -ENOTSUP : -EBADMSG;
	if (t[4] || t[5] || (t[6] != 1 && t[6] != 2 && t[6] != 4) || t[7] != 8)
		return -EBADMSG;
	for (int i = 0; i < HDR_WORDS; i++)
		w[i] = rd64(t + 8 + 8 * i);
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	*g = (struct gopcln){
		.tab = t, .size = d->d_size, .magic = magic, .quantum = t[6], .text = w[2],
		.funcname = w[3], .cu = w[4], .file = w[5], .pc = w[6], .ftab = w[7],
		.func_size = magic == MAGIC_GO118 ? 40 : 44,
	};
	r = -EBADMSG;
	if (w[0] == 0 || w[0] > MAX_FUNCS || g->funcname >= g->size || g->cu >= g->size || g->file >= g->size ||
	    g->pc >= g->size || g->ftab >= g->size || (w[0] + 1) * 8 > g->size - g->ftab)
		goto fail;
	g->nfunc = (uint32_t)w[0];
	/* A position-independent binary has its textStart relocated at run time. */
	if (g->text == 0) {
		if (find_section(elf, ".text", &text, &scn) < 0)
			goto fail;
		g->text = text.sh_addr;
	}
	/* The function table must be sorted, and each _func must fit: lookups
	 * search it in halves and read the _func without further checks. */
	for (uint32_t i = 0; i <= g->nfunc; i++) {
		const uint8_t *e = t + g->ftab + 8ull * i;
		uint32_t entry = rd32(e), funcoff = rd32(e + 4);

		if ((i && entry < prev) || (i < g->nfunc && (funcoff > g->size - g->ftab ||
							     g->func_size > g->size - g->ftab - funcoff)))
			goto fail;
		prev = entry;
	}
	if (obj_read_loads(elf, &g->loads, &g->nloads) == 0) {
		g->image = (const uint8_t *)elf_rawfile(elf, &g->image_size);
		if (g->image)
			find_gofunc(g, elf, sh.sh_addr);
	}
	*ret = g;
	return 0;
fail:
	gopcln_free(g);
	return r;
}

struct func {
	const uint8_t *p;  /* the _func */
	uint64_t entry;    /* ELF virtual address */
	uint64_t end;
};

/* The function covering pc. */
static bool find_func(const struct gopcln *g, uint64_t pc, struct func *ret)
{
	const uint8_t *ft = g->tab + g->ftab;
	uint32_t lo = 0, hi = g->nfunc, off;

	if (pc < g->text || pc - g->text > UINT32_MAX)
		return false;
	off = (uint32_t)(pc - g->text);
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (rd32(ft + 8ull * mid) <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* The last entry (index nfunc) only ends the table. */
	if (lo == 0 || lo > g->nfunc || off >= rd32(ft + 8ull * lo))
		return false;
	ret->p = g->tab + g->ftab + rd32(ft + 8ull * (lo - 1) + 4);
	ret->entry = g->text + rd32(ft + 8ull * (lo - 1));
	ret->end = g->text + rd32(ft + 8ull * lo);
	return true;
}

static bool uvarint(const uint8_t **p, const uint8_t *end, uint32_t *ret)
{
	uint32_t v = 0;

	for (int shift = 0; shift < 35; shift += 7) {
		if (*p >= end)
			return false;
		v |= (uint32_t)(**p & 0x7f) << shift;
		if (!(*(*p)++ & 0x80)) {
			*ret = v;
			return true;
		}
	}
	return false;
}

/* The value of the pc-value table at off (in pctab) for pc, as the runtime's
 * pcvalue() computes it; -1 when the table has none. */
static int32_t pcvalue(const struct gopcln *g, const struct func *f, uint32_t off, uint64_t pc)
{
	const uint8_t *p, *end = g->tab + g->size;
	uint64_t at = f->entry;
	int32_t val = -1;

	if (off == 0 || off >= g->size - g->pc)
		return -1;
	p = g->tab + g->pc + off;
	for (uint32_t i = 0; i < MAX_STEPS; i++) {
		uint32_t uv, pcd;

		if (!uvarint(&p, end, &uv) || (uv == 0 && i > 0) || !uvarint(&p, end, &pcd))
			return -1;
		/* Zig-zag deltas added with wrap-around, as the Go runtime does: a
		 * hostile table's sum is no overflow, only a wrong value, refused below. */
		val = (int32_t)((uint32_t)val + (-(uv & 1) ^ (uv >> 1)));
		at += (uint64_t)pcd * g->quantum;
		if (pc < at)
			return val;
		if (at >= f->end)
			return -1;
	}
	return -1;
}

static uint32_t func_u32(const struct func *f, size_t off)
{
	return rd32(f->p + off);
}

static const char *file_of(const struct gopcln *g, const struct func *f, int32_t fileno)
{
	uint64_t at;
	uint32_t fileoff;

	if (fileno < 0)
		return NULL;
	at = g->cu + 4ull * ((uint64_t)func_u32(f, 32) + (uint32_t)fileno);
	if (at > g->size - 4)
		return NULL;
	fileoff = rd32(g->tab + at);
	return fileoff == UINT32_MAX ? NULL : str_at(g, g->file, fileoff);
}

/* The inline tree entry ix of f: its name offset and parent pc offset. */
static bool inline_entry(const struct gopcln *g, const struct func *f, int32_t ix, uint32_t *ret_name,
			 uint32_t *ret_parent_pc)
{
	uint32_t npcdata = func_u32(f, 28), off;
	uint8_t nfuncdata = f->p[g->func_size - 1];
	size_t esize = g->magic == MAGIC_GO118 ? 20 : 16;
	const uint8_t *e, *fd;

	if (!g->gofunc || ix < 0 || nfuncdata <= FUNCDATA_INLTREE)
		return false;
	fd = f->p + g->func_size + 4ull * npcdata + 4ull * FUNCDATA_INLTREE;
	if (fd + 4 > g->tab + g->size)
		return false;
	off = rd32(fd);
	if (off == UINT32_MAX || !(e = image_at(g, g->gofunc + off + (uint64_t)ix * esize, esize)))
		return false;
	*ret_name = rd32(e + (g->magic == MAGIC_GO118 ? 12 : 4));
	*ret_parent_pc = rd32(e + (g->magic == MAGIC_GO118 ? 16 : 8));
	return true;
}

void gopcln_lookup(const struct gopcln *g, uint64_t pc, struct gopcln_frame *frames, size_t max, size_t *ret_n)
{
	struct func f;
	size_t n = 0;

	*ret_n = 0;
	if (!max || !find_func(g, pc, &f))
		return;
	for (int depth = 0; n < max; depth++) {
		uint32_t npcdata = func_u32(&f, 28), name_off, parent_pc;
		int32_t ix = -1, line;
		const char *name;

		if (npcdata > PCDATA_INLTREE && depth < MAX_INLINE &&
		    f.p + g->func_size + 4ull * npcdata <= g->tab + g->size)
			ix = pcvalue(g, &f, func_u32(&f, g->func_size + 4 * PCDATA_INLTREE), pc);
		line = pcvalue(g, &f, func_u32(&f, 24), pc);
		frames[n].file = file_of(g, &f, pcvalue(g, &f, func_u32(&f, 20), pc));
		frames[n].line = line > 0 ? line : 0;
		if (n + 1 < max && inline_entry(g, &f, ix, &name_off, &parent_pc) &&
		    (uint64_t)parent_pc < f.end - f.entry && (name = str_at(g, g->funcname, name_off))) {
			frames[n++].function = name;
			pc = f.entry + parent_pc;
			continue;
		}
		name = str_at(g, g->funcname, (uint32_t)func_u32(&f, 4));
		if (!name)
			break; /* a function without a readable name: nothing is passed off */
		frames[n++].function = name;
		*ret_n = n;
		return;
	}
	*ret_n = 0;
}

int gopcln_version(const struct gopcln *g, int *ret_has_inline)
{
	*ret_has_inline = g->gofunc != 0;
	return g->magic == MAGIC_GO118 ? 118 : 120;
}

void gopcln_free(struct gopcln *g)
{
	if (!g)
		return;
	free(g->loads);
	free(g);
}
