/* pydetect.c: finds _PyRuntime (3.6: interp_head), the type objects and Py_Version in an
 * object's dynamic (or full) symbol table; the version falls back to the file name. */
#include "pydetect.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "elfsyms.h"

/* Reads len bytes at virtual address addr from the section that holds it. */
static int read_at(Elf *elf, uint64_t addr, void *ret, size_t len)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC))
			continue;
		if (addr < sh.sh_addr || addr - sh.sh_addr + len > sh.sh_size)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || addr - sh.sh_addr + len > d->d_size)
			return -EIO;
		memcpy(ret, (const char *)d->d_buf + (addr - sh.sh_addr), len);
		return 0;
	}
	return -ENOENT;
}

/* "libpython3.11.so.1.0", "python3.12", ".../libpython3.6m.so", "python2.7": the
 * major (2 or 3) and the minor. */
static bool version_from_name(const char *path, uint8_t *major, uint8_t *minor)
{
	const char *b = path ? strrchr(path, '/') : NULL;
	unsigned int ma, mi;

	b = b ? b + 1 : path;
	if (!b)
		return false;
	if (strncmp(b, "lib", 3) == 0)
		b += 3;
	if (sscanf(b, "python%u.%u", &ma, &mi) != 2 || (ma != 2 && ma != 3) || mi > 99)
		return false;
	*major = (uint8_t)ma;
	*minor = (uint8_t)mi;
	return true;
}

struct scan {
	struct py_elf *p;
	uint64_t *py_version, *head_fn;
};

static void on_symbol(void *ctx, const char *name, const GElf_Sym *sym)
{
	struct scan *sc = ctx;
	struct py_elf *p = sc->p;

	if (name[0] != '_' && name[0] != 'P' && name[0] != 'i')
		return;
	if (GELF_ST_TYPE(sym->st_info) == STT_FUNC) {
		if (strcmp(name, "PyInterpreterState_Head") == 0)
			*sc->head_fn = sym->st_value;
		return;
	}
	if (strcmp(name, "interp_head") == 0 && GELF_ST_BIND(sym->st_info) == STB_LOCAL && sym->st_size == 8)
		p->interp_head = sym->st_value;
	else if (strcmp(name, "_PyRuntime") == 0)
		p->runtime = sym->st_value;
	else if (strcmp(name, "PyCode_Type") == 0)
		p->code_type = sym->st_value;
	else if (strcmp(name, "PyUnicode_Type") == 0)
		p->unicode_type = sym->st_value;
	else if (strcmp(name, "PyBytes_Type") == 0)
		p->bytes_type = sym->st_value;
	else if (strcmp(name, "Py_Version") == 0 && (sym->st_size == 4 || sym->st_size == 8))
		*sc->py_version = sym->st_value; /* unsigned int on 3.11, 3.12; unsigned long on 3.13 */
}

static void scan_symtab(Elf *elf, Elf_Scn *scn, struct py_elf *p, uint64_t *py_version, uint64_t *head_fn)
{
	struct scan sc = { p, py_version, head_fn };

	elf_each_symbol(elf, scn, on_symbol, &sc);
}

/* 3.6's PyInterpreterState_Head() is `return interp_head;`: mov interp_head(%rip),%rax
 * (48 8b 05 disp32) then ret (c3). The variable it loads, or 0 for any other code. */
static uint64_t head_from_function(Elf *elf, uint64_t fn)
{
	uint8_t c[8];
	int32_t disp;

	if (!fn || read_at(elf, fn, c, sizeof(c)) < 0 || c[0] != 0x48 || c[1] != 0x8b || c[2] != 0x05 || c[7] != 0xc3)
		return 0;
	memcpy(&disp, c + 3, 4);
	return fn + 7 + (uint64_t)(int64_t)disp;
}

int py_detect_elf(Elf *elf, const char *path, struct py_elf *ret)
{
	Elf_Scn *scn = NULL, *dynsym = NULL, *symtab = NULL;
	uint64_t py_version = 0, head_fn = 0;
	uint32_t hex;

	memset(ret, 0, sizeof(*ret));
	if (!elf)
		return -EINVAL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNSYM)
			dynsym = scn;
		else if (sh.sh_type == SHT_SYMTAB)
			symtab = scn;
	}
	if (dynsym)
		scan_symtab(elf, dynsym, ret, &py_version, &head_fn);
	if (!ret->runtime && symtab)
		scan_symtab(elf, symtab, ret, &py_version, &head_fn);
	if (!ret->runtime && !ret->interp_head)
		ret->interp_head = head_from_function(elf, head_fn);
	/* _PyRuntime exists since 3.7; an older CPython (2.7, 3.6) is told by its code
	 * object type, so that it too is named as a version prowl cannot read. */
	if (!ret->runtime && !ret->code_type)
		return 0;
	ret->found = true;
	/* Py_Version is PY_VERSION_HEX: 0x030b02f0 is 3.11.2 final (the low 4 bytes
	 * of an 8-byte one on x86_64, which is little-endian). */
	if (py_version && read_at(elf, py_version, &hex, sizeof(hex)) == 0 && (hex >> 24) == 3) {
		ret->major = 3;
		ret->minor = (hex >> 16) & 0xff;
	} else {
		ret->version_from_name = version_from_name(path, &ret->major, &ret->minor);
	}
	return 0;
}
