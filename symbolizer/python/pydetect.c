/* pydetect.c: finds _PyRuntime, the type objects and Py_Version in an object's dynamic
 * (or full) symbol table; the version falls back to the file name (libpythonM.N.so). */
#include "pydetect.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "elfsyms.h"

/* Reads 4 bytes at virtual address addr from the section that holds it. */
static int read_u32_at(Elf *elf, uint64_t addr, uint32_t *ret)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC))
			continue;
		if (addr < sh.sh_addr || addr - sh.sh_addr + 4 > sh.sh_size)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || addr - sh.sh_addr + 4 > d->d_size)
			return -EIO;
		memcpy(ret, (const char *)d->d_buf + (addr - sh.sh_addr), 4);
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
	uint64_t *py_version;
};

static void on_symbol(void *ctx, const char *name, const GElf_Sym *sym)
{
	struct scan *sc = ctx;
	struct py_elf *p = sc->p;

	if (name[0] != '_' && name[0] != 'P')
		return;
	if (strcmp(name, "_PyRuntime") == 0)
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

static void scan_symtab(Elf *elf, Elf_Scn *scn, struct py_elf *p, uint64_t *py_version)
{
	struct scan sc = { p, py_version };

	elf_each_data_symbol(elf, scn, on_symbol, &sc);
}

int py_detect_elf(Elf *elf, const char *path, struct py_elf *ret)
{
	Elf_Scn *scn = NULL, *dynsym = NULL, *symtab = NULL;
	uint64_t py_version = 0;
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
		scan_symtab(elf, dynsym, ret, &py_version);
	if (!ret->runtime && symtab)
		scan_symtab(elf, symtab, ret, &py_version);
	/* _PyRuntime exists since 3.7; an older CPython (2.7, 3.6) is told by its code
	 * object type, so that it too is named as a version prowl cannot read. */
	if (!ret->runtime && !ret->code_type)
		return 0;
	ret->found = true;
	/* Py_Version is PY_VERSION_HEX: 0x030b02f0 is 3.11.2 final (the low 4 bytes
	 * of an 8-byte one on x86_64, which is little-endian). */
	if (py_version && read_u32_at(elf, py_version, &hex) == 0 && (hex >> 24) == 3) {
		ret->major = 3;
		ret->minor = (hex >> 16) & 0xff;
	} else {
		version_from_name(path, &ret->major, &ret->minor);
	}
	return 0;
}
