/* pydetect.c: finds _PyRuntime (3.6: interp_head), the type objects and the version in an
 * object's symbols and data (Py_Version, Py_GetVersion's string), else its file name. */
#include "pydetect.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "elfsyms.h"

/* The bytes at virtual address addr in the section that holds it, and how many of them
 * there are (*avail), or NULL (-ENOENT in no section, -EIO unreadable: *err). */
static const uint8_t *bytes_at(Elf *elf, uint64_t addr, size_t *avail, int *err)
{
	Elf_Scn *scn = NULL;

	*err = -ENOENT;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC))
			continue;
		if (addr < sh.sh_addr || addr - sh.sh_addr >= sh.sh_size)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || addr - sh.sh_addr >= d->d_size || d->d_size > sh.sh_size) {
			*err = -EIO;
			return NULL;
		}
		*avail = d->d_size - (addr - sh.sh_addr);
		return (const uint8_t *)d->d_buf + (addr - sh.sh_addr);
	}
	return NULL;
}

/* Reads len bytes at virtual address addr from the section that holds it. */
static int read_at(Elf *elf, uint64_t addr, void *ret, size_t len)
{
	size_t avail;
	int err;
	const uint8_t *b = bytes_at(elf, addr, &avail, &err);

	if (!b)
		return err;
	if (len > avail)
		return -EIO;
	memcpy(ret, b, len);
	return 0;
}

/* Reads the NUL-terminated string at virtual address addr, at most size - 1 bytes, from
 * the section that holds it. Returns 0, or -ENOENT when it is not there or longer. */
static int read_str_at(Elf *elf, uint64_t addr, char *ret, size_t size)
{
	size_t avail;
	int err;
	const uint8_t *b = bytes_at(elf, addr, &avail, &err);
	const uint8_t *nul = b ? memchr(b, 0, avail < size ? avail : size) : NULL;

	if (!nul)
		return -ENOENT;
	memcpy(ret, b, (size_t)(nul - b) + 1);
	return 0;
}

/* PY_VERSION as the build spells it: "3.8.18", "3.10.0rc2", "3.9.2+", "2.7.18". The major
 * (2 or 3) and the minor; false for any other text. */
static bool version_from_text(const char *s, uint8_t *major, uint8_t *minor)
{
	unsigned int ma, mi, micro;
	int end = 0;

	if (!isdigit((unsigned char)s[0]) || sscanf(s, "%1u.%2u.%2u%n", &ma, &mi, &micro, &end) != 3 ||
	    (ma != 2 && ma != 3) || !isdigit((unsigned char)s[end - 1]))
		return false;
	for (const char *c = s + end; *c; c++)
		if (!isdigit((unsigned char)*c) && !strchr("abrc+", *c))
			return false;
	*major = (uint8_t)ma;
	*minor = (uint8_t)mi;
	return true;
}

/* Py_GetVersion() formats "%.80s (%.80s) %.80s" from PY_VERSION, which its code loads by
 * address (x86_64: lea disp32(%rip), reg). The version of the first such string among its
 * first PY_GETVERSION_SCAN bytes; false when none is one, or two disagree. */
#define PY_GETVERSION_SCAN 96
static bool version_from_code(Elf *elf, uint64_t fn, uint8_t *major, uint8_t *minor)
{
	const uint8_t *c;
	uint8_t ma, mi;
	bool found = false;
	size_t n;
	char s[24];
	int err;

	/* The function may end its section (a small program's .text): what there is. */
	if (!fn || !(c = bytes_at(elf, fn, &n, &err)))
		return false;
	if (n > PY_GETVERSION_SCAN)
		n = PY_GETVERSION_SCAN;
	for (size_t i = 0; i + 7 <= n; i++) {
		int32_t disp;

		/* REX.W (0x48) or REX.WR (0x4c), lea, ModRM with mod 00 and r/m 101 (rip + disp32) */
		if ((c[i] & 0xfb) != 0x48 || c[i + 1] != 0x8d || (c[i + 2] & 0xc7) != 0x05)
			continue;
		memcpy(&disp, c + i + 3, 4);
		if (read_str_at(elf, fn + i + 7 + (uint64_t)(int64_t)disp, s, sizeof(s)) < 0 ||
		    !version_from_text(s, &ma, &mi))
			continue;
		if (found && (ma != *major || mi != *minor))
			return false;
		*major = ma;
		*minor = mi;
		found = true;
	}
	return found;
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
	uint64_t *py_version, *head_fn, *getversion_fn, *pthread_size;
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
		else if (strcmp(name, "Py_GetVersion") == 0)
			*sc->getversion_fn = sym->st_value;
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
	else if (strcmp(name, "_thread_db_sizeof_pthread") == 0 && sym->st_size == 4)
		*sc->pthread_size = sym->st_value;
}

static void scan_symtab(Elf *elf, Elf_Scn *scn, struct scan *sc)
{
	elf_each_symbol(elf, scn, on_symbol, sc);
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
	uint64_t py_version = 0, head_fn = 0, getversion_fn = 0, pthread_size = 0;
	struct scan sc = { ret, &py_version, &head_fn, &getversion_fn, &pthread_size };
	uint8_t smajor = 0, sminor = 0;
	bool from_string;
	uint32_t hex = 0;

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
		scan_symtab(elf, dynsym, &sc);
	if (!ret->runtime && symtab)
		scan_symtab(elf, symtab, &sc);
	if (!ret->runtime && !ret->interp_head)
		ret->interp_head = head_from_function(elf, head_fn);
	/* libc: where a thread's pthread_self() lies below its thread pointer on arm64. */
	if (pthread_size && read_at(elf, pthread_size, &ret->pthread_size, sizeof(ret->pthread_size)) == 0 &&
	    (ret->pthread_size < PY_PTHREAD_SIZE_MIN || ret->pthread_size > PY_PTHREAD_SIZE_MAX))
		ret->pthread_size = 0;
	/* _PyRuntime exists since 3.7; an older CPython (2.7, 3.6) is told by its code
	 * object type, so that it too is named as a version prowl cannot read. */
	if (!ret->runtime && !ret->code_type)
		return 0;
	ret->found = true;
	from_string = version_from_code(elf, getversion_fn, &smajor, &sminor);
	/* Py_Version is PY_VERSION_HEX: 0x030b02f0 is 3.11.2 final (the low 4 bytes
	 * of an 8-byte one on x86_64, which is little-endian). Where Py_GetVersion's
	 * string says otherwise, the build is not what it seems: no version. */
	if (py_version && read_at(elf, py_version, &hex, sizeof(hex)) == 0 && (hex >> 24) == 3) {
		if (!from_string || (smajor == 3 && sminor == ((hex >> 16) & 0xff))) {
			ret->major = 3;
			ret->minor = (hex >> 16) & 0xff;
		}
	} else if (from_string) {
		/* The build's own PY_VERSION (3.10 and older: no Py_Version). One that claims
		 * 3.11+ without Py_Version, or 3.6 with a _PyRuntime, is not believed. */
		ret->version_from_string = true;
		if (!(smajor == 3 && (sminor >= 11 || (sminor == 6 && ret->runtime)))) {
			ret->major = smajor;
			ret->minor = sminor;
		}
	} else {
		ret->version_from_name = version_from_name(path, &ret->major, &ret->minor);
	}
	return 0;
}
