/* v8meta.c: finds the v8dbg_* constants and V8's builtins in an ELF object's symbols and
 * reads each constant's value from the file's section bytes (.bss: zero), bounded and checked. */
#include "v8meta.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "elfsyms.h"
#include "v8baseline.h"

#define V8_PREFIX     "v8dbg_"
/* v8::internal::interpreter::Bytecodes::kBytecodeSizes, in the dynamic symbols of node 18-22 */
#define V8_BYTECODE_SIZES "_ZN2v88internal11interpreter9Bytecodes14kBytecodeSizesE"
#define V8_PREFIX_LEN 6

struct const_def {
	const char *name, *old;
	enum v8_kind kind;
	uint8_t need;
};

static const struct const_def defs[V8__N] = {
#define V8_DEF(id, k, n, name, o) [V8_##id] = { name, o, V8K_##k, n },
	V8_CONSTS(V8_DEF)
#undef V8_DEF
};

const char *v8_const_name(unsigned int i)
{
	return i < V8__N ? defs[i].name : NULL;
}

struct scan {
	Elf *elf;
	struct v8_meta *m;
	bool old[V8__N]; /* the value came from the older name (the newer one wins) */
	bool consts;     /* read v8dbg_ constants from this table (else builtins only) */
};

/* The int32 at ELF vaddr sym->st_value, from its section (NOBITS: zero). */
static int sym_value(Elf *elf, const GElf_Sym *sym, int32_t *ret)
{
	Elf_Scn *scn;
	GElf_Shdr sh;
	Elf_Data *d;
	uint64_t off;

	if (sym->st_size != 4 || sym->st_shndx >= SHN_LORESERVE || !(scn = elf_getscn(elf, sym->st_shndx)) ||
	    !gelf_getshdr(scn, &sh) || sym->st_value < sh.sh_addr || sym->st_value - sh.sh_addr > sh.sh_size ||
	    sh.sh_size - (sym->st_value - sh.sh_addr) < 4)
		return -EBADMSG;
	if (sh.sh_type == SHT_NOBITS) {
		*ret = 0;
		return 0;
	}
	off = sym->st_value - sh.sh_addr;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || off > d->d_size || d->d_size - off < 4)
		return -EBADMSG;
	memcpy(ret, (const char *)d->d_buf + off, 4);
	return 0;
}

/* name as V8 11 spells it: V8 12 writes a field's type "Tagged_T_" where V8 11 wrote
 * "T", and "Address" for "uintptr_t" (class_SharedFunctionInfo__name_or_scope_info__
 * Tagged_Object_). name itself when it needs no change or does not fit buf. */
static const char *canonical(const char *name, char *buf, size_t len)
{
	const char *t = strstr(name, "__Tagged_");
	size_t n = strlen(name);

	/* t + 9: the type, then '_' ending the name (at least one character before it). */
	if (t && strlen(t + 9) >= 2 && name[n - 1] == '_' && strstr(t + 9, "__") == NULL && n < len) {
		size_t head = (size_t)(t - name) + 2, type = strlen(t + 9) - 1;

		memcpy(buf, name, head);
		memcpy(buf + head, t + 9, type);
		buf[head + type] = 0;
		return buf;
	}
	if (n > 9 && strcmp(name + n - 9, "__Address") == 0 && n + 2 < len) {
		memcpy(buf, name, n - 7);
		memcpy(buf + n - 7, "uintptr_t", 10);
		return buf;
	}
	return name;
}

/* Whether name is one of the space-separated names of list. */
static bool in_list(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; *p;) {
		const char *e = strchr(p, ' ');
		size_t l = e ? (size_t)(e - p) : strlen(p);

		if (l == n && strncmp(p, name, n) == 0)
			return true;
		p += l + (e != NULL);
	}
	return false;
}

static void on_symbol(void *ctx, const char *name, const GElf_Sym *sym)
{
	struct scan *s = ctx;
	struct v8_meta *m = s->m;
	char buf[256];
	int32_t v;

	if (GELF_ST_TYPE(sym->st_info) == STT_FUNC) {
		if (strncmp(name, "Builtins_", 9) != 0)
			return;
		m->is_v8 = true;
		if (!m->builtins_lo || sym->st_value < m->builtins_lo)
			m->builtins_lo = sym->st_value;
		if (sym->st_value + sym->st_size > m->builtins_hi && sym->st_value + sym->st_size >= sym->st_value)
			m->builtins_hi = sym->st_value + sym->st_size;
		return;
	}
	if (GELF_ST_TYPE(sym->st_info) == STT_OBJECT && strcmp(name, V8_BYTECODE_SIZES) == 0) {
		/* uint8_t[3][count]: a size a row, V8's bytecodes fit a byte */
		if (sym->st_size % 3 == 0 && sym->st_size / 3 >= V8_BC_PREFIXES + 1 && sym->st_size / 3 <= 256) {
			m->bc_sizes = sym->st_value;
			m->bc_count = (uint32_t)(sym->st_size / 3);
		}
		return;
	}
	if (!s->consts || strncmp(name, V8_PREFIX, V8_PREFIX_LEN) != 0 || m->nsyms >= V8_MAX_SYMS)
		return;
	m->nsyms++;
	name = canonical(name + V8_PREFIX_LEN, buf, sizeof(buf));
	for (unsigned int i = 0; i < V8__N; i++) {
		bool is_old = defs[i].old && in_list(defs[i].old, name);

		if (!is_old && strcmp(name, defs[i].name) != 0)
			continue;
		if (is_old && m->has[i] && !s->old[i])
			return; /* the newer name was read */
		if (sym_value(s->elf, sym, &v) < 0)
			return; /* not an int where it says: left missing */
		m->v[i] = v;
		m->has[i] = 1;
		s->old[i] = is_old;
		return;
	}
}

static bool in_range(enum v8_kind k, int32_t v)
{
	switch (k) {
	case V8K_FP:
		return v >= -256 && v <= 256 && v % 8 == 0;
	case V8K_FTYPE:
		return v >= 0 && v < 64;
	case V8K_ITYPE:
		return v >= 0 && v <= 0xffff;
	case V8K_OFF:
		return v >= 0 && v < 1024;
	case V8K_SMALL:
		return v >= 0 && v <= 255;
	case V8K_ANY:
		return true;
	}
	return false;
}

static Elf_Scn *symbol_section(Elf *elf, Elf64_Word type)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == type)
			return scn;
	return NULL;
}

static int check(struct v8_meta *m)
{
	for (unsigned int i = 0; i < V8__N; i++) {
		if (!m->has[i]) {
			if (defs[i].need) {
				m->bad = (int)i;
				return -ENOENT;
			}
			continue;
		}
		if (!in_range(defs[i].kind, m->v[i])) {
			m->bad = (int)i;
			return -EBADMSG;
		}
	}
	/* The walk reads 8-byte tagged words with 32-bit small integers in the upper half. */
	if (m->v[V8_POINTER_SIZE] != 8 || (m->has[V8_TAGGED_SIZE] && m->v[V8_TAGGED_SIZE] != 8) ||
	    m->v[V8_SMI_SHIFT] != 31) {
		m->bad = m->v[V8_POINTER_SIZE] != 8 ? V8_POINTER_SIZE : m->v[V8_SMI_SHIFT] != 31 ? V8_SMI_SHIFT : V8_TAGGED_SIZE;
		return -EOPNOTSUPP;
	}
	if (m->v[V8_HEAP_TAG_MASK] == 0 || (m->v[V8_HEAP_TAG] & ~m->v[V8_HEAP_TAG_MASK]) ||
	    m->v[V8_SMI_TAG_MASK] == 0 || (m->v[V8_SMI_TAG] & ~m->v[V8_SMI_TAG_MASK]) ||
	    m->v[V8_SMI_TAG] == m->v[V8_HEAP_TAG]) {
		m->bad = V8_HEAP_TAG;
		return -EBADMSG;
	}
	return 0;
}

int v8_meta_read(Elf *elf, struct v8_meta *ret)
{
	struct scan s = { .elf = elf, .m = ret, .consts = true };
	Elf_Scn *scn;
	int r;

	memset(ret, 0, sizeof(*ret));
	ret->bad = -1;
	if (!elf)
		return -EINVAL;
	if ((scn = symbol_section(elf, SHT_DYNSYM)))
		elf_each_symbol(elf, scn, on_symbol, &s);
	/* The builtins are local symbols (.symtab only); the constants are read from
	 * there only when .dynsym has none. */
	if ((scn = symbol_section(elf, SHT_SYMTAB))) {
		s.consts = !ret->nsyms;
		elf_each_symbol(elf, scn, on_symbol, &s);
	}
	if (!ret->nsyms)
		return ret->is_v8 ? -ENODATA : 0;
	ret->is_v8 = true;
	r = check(ret);
	ret->found = r == 0;
	return r;
}

const char *v8_meta_why(const struct v8_meta *m, int r, char *buf, size_t len)
{
	const char *name = m->bad >= 0 && m->bad < V8__N ? defs[m->bad].name : "?";

	switch (r) {
	case -ENODATA:
		snprintf(buf, len, "it has no v8dbg_ symbols: V8 was built without post-mortem support");
		break;
	case -ENOENT:
		snprintf(buf, len, "its v8dbg_ symbols lack v8dbg_%s", name);
		break;
	case -EBADMSG:
		snprintf(buf, len, "v8dbg_%s = %d is not a value V8 uses", name, m->bad >= 0 ? m->v[m->bad] : 0);
		break;
	case -EOPNOTSUPP:
		snprintf(buf, len, "v8dbg_%s = %d: pointer compression or 32-bit V8 is not read", name,
			 m->bad >= 0 ? m->v[m->bad] : 0);
		break;
	default:
		snprintf(buf, len, "%s", strerror(r < 0 ? -r : r));
	}
	return buf;
}
