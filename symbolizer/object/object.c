/* object.c: opens a mapped file by the routes /proc offers and checks it is the one
 * mapped; reads an ELF object's build id, PT_LOADs and debug sections; bias arithmetic. */
#include "object.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "intern.h"
#include "trust.h"

#define PAGE_MASK_4K (~(uint64_t)0xfff)
#define PHNUM_MAX    4096
#define HASH_CHUNK   4096 /* bytes hashed at each end of a file */

/* ---- opening ---- */

/* Opens path when it is a regular file and, with want, the file want names.
 * O_NONBLOCK: a FIFO a user put at the path must not block prowl (and a
 * regular file ignores the flag). */
static int open_candidate(const char *path, const struct obj_source *want, struct obj_file *ret)
{
	struct stat st;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -ENOEXEC;
	}
	if (want && ((uint64_t)st.st_dev != want->dev || (uint64_t)st.st_ino != want->ino)) {
		close(fd);
		return -ESTALE;
	}
	*ret = (struct obj_file){
		.fd = fd,
		.ident = { .dev = st.st_dev, .ino = st.st_ino, .size = (uint64_t)st.st_size,
			   .mtime_ns = timespec_ns(&st.st_mtim),
			   .uid = st.st_uid, .mode = st.st_mode },
	};
	return 0;
}

/* The first route that reaches the file, or the error that tells best why none did. */
static int open_routes(const struct obj_source *src, struct obj_file *ret)
{
	char path[PATH_MAX * 2];
	int r, rmf;

	if (!src->pid)
		return src->path ? open_candidate(src->path, NULL, ret) : -ENOENT;
	snprintf(path, sizeof(path), "%s/%" PRIu32 "/map_files/%" PRIx64 "-%" PRIx64, src->proc_root, src->pid,
		 src->start, src->end);
	r = rmf = open_candidate(path, NULL, ret);
	/* Other routes reach a path, not the mapping: without an inode to compare
	 * with, whatever is there now cannot be told from what was mapped. */
	if (r == 0 || !src->ino)
		return r;
	/* The main executable, even deleted; needs only ptrace access. */
	snprintf(path, sizeof(path), "%s/%" PRIu32 "/exe", src->proc_root, src->pid);
	r = open_candidate(path, src, ret);
	if (r == 0 || !src->path)
		return r == 0 || rmf != -EPERM ? r : rmf;
	if ((size_t)snprintf(path, sizeof(path), "%s/%" PRIu32 "/root%s", src->proc_root, src->pid, src->path) <
	    sizeof(path)) {
		r = open_candidate(path, src, ret);
		if (r == 0)
			return 0;
	}
	if (src->try_plain_path)
		r = open_candidate(src->path, src, ret);
	/* map_files alone could have opened it: say that its capability is missing. */
	return r == 0 || rmf != -EPERM ? r : rmf;
}

int obj_open(const struct obj_source *src, struct obj_file *ret)
{
	int r;

	*ret = OBJ_FILE_NONE;
	r = open_routes(src, ret);
	if (r == 0)
		ret->ident.trusted = obj_trusted_ident(src, &ret->ident);
	return r;
}

int obj_file_begin(struct obj_file *f)
{
	if (f->elf)
		return 0;
	f->elf = elf_begin(f->fd, f->ident.trusted ? ELF_C_READ_MMAP : ELF_C_READ, NULL);
	return f->elf ? 0 : -EINVAL;
}

int obj_file_unchanged(int fd, const struct obj_ident *id)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size != id->size ||
	    timespec_ns(&st.st_mtim) != id->mtime_ns)
		return -ESTALE;
	return 0;
}

void obj_file_close(struct obj_file *f)
{
	if (f->elf)
		elf_end(f->elf);
	if (f->fd >= 0)
		close(f->fd);
	*f = OBJ_FILE_NONE;
}

/* ---- facts ---- */

void build_id_to_hex(const uint8_t *id, size_t len, char *buf)
{
	static const char hex[] = "0123456789abcdef";

	if (len > OBJ_BUILD_ID_MAX)
		len = OBJ_BUILD_ID_MAX;
	for (size_t i = 0; i < len; i++) {
		buf[2 * i] = hex[id[i] >> 4];
		buf[2 * i + 1] = hex[id[i] & 15];
	}
	buf[2 * len] = 0;
}

int obj_read_loads(Elf *elf, struct obj_load **ret, size_t *ret_n)
{
	struct obj_load *loads;
	size_t phnum = 0, n = 0;

	*ret = NULL;
	*ret_n = 0;
	if (elf_getphdrnum(elf, &phnum) < 0 || phnum == 0 || phnum > PHNUM_MAX)
		return -EINVAL;
	loads = calloc(phnum, sizeof(*loads));
	if (!loads)
		return -ENOMEM;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph))
			goto bad;
		if (ph.p_type != PT_LOAD)
			continue;
		if (ph.p_filesz > ph.p_memsz || ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
			goto bad;
		loads[n++] = (struct obj_load){
			.vaddr = ph.p_vaddr,
			.memsz = ph.p_memsz,
			.offset = ph.p_offset,
			.filesz = ph.p_filesz,
			.exec = ph.p_flags & PF_X,
		};
	}
	if (!n)
		goto bad;
	*ret = loads;
	*ret_n = n;
	return 0;
bad:
	free(loads);
	return -EINVAL;
}

void obj_load_span(const struct obj_load *loads, size_t n, uint64_t *lo, uint64_t *hi)
{
	*lo = UINT64_MAX;
	*hi = 0;
	for (size_t i = 0; i < n; i++) {
		if (loads[i].vaddr < *lo)
			*lo = loads[i].vaddr;
		if (loads[i].vaddr + loads[i].memsz > *hi)
			*hi = loads[i].vaddr + loads[i].memsz;
	}
}

static uint32_t section_source(const char *name, const GElf_Shdr *sh)
{
	uint32_t f = sh->sh_flags & SHF_COMPRESSED ? OBJ_SRC_COMPRESSED : 0;

	if (sh->sh_type == SHT_SYMTAB)
		return f | OBJ_SRC_SYMTAB;
	if (sh->sh_type == SHT_DYNSYM)
		return f | OBJ_SRC_DYNSYM;
	if (sh->sh_type == SHT_NOBITS || !name) /* stripped into a debug file */
		return f;
	if (!strcmp(name, ".debug_info") || !strcmp(name, ".zdebug_info"))
		f |= OBJ_SRC_DEBUG_INFO;
	else if (!strcmp(name, ".eh_frame"))
		f |= OBJ_SRC_EH_FRAME;
	else if (!strcmp(name, ".debug_frame") || !strcmp(name, ".zdebug_frame"))
		f |= OBJ_SRC_DEBUG_FRAME;
	else if (!strcmp(name, ".gnu_debuglink"))
		f |= OBJ_SRC_DEBUGLINK;
	else if (!strcmp(name, ".gnu_debugaltlink"))
		f |= OBJ_SRC_DEBUGALTLINK;
	else if (!strcmp(name, ".gnu_debugdata"))
		f |= OBJ_SRC_MINIDEBUG;
	else if (!strcmp(name, ".gopclntab") || !strcmp(name, ".data.rel.ro.gopclntab"))
		f |= OBJ_SRC_GOPCLNTAB;
	return f;
}

static uint32_t read_sources(Elf *elf)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	uint32_t f = 0;

	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		shstrndx = SHN_UNDEF;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh))
			f |= section_source(shstrndx != SHN_UNDEF ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL, &sh);
	}
	return f;
}

int obj_facts_read(Elf *elf, struct obj_facts *ret)
{
	const void *id = NULL;
	ssize_t len;
	GElf_Ehdr eh;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (elf_kind(elf) != ELF_K_ELF)
		return 0;
	len = dwelf_elf_gnu_build_id(elf, &id);
	if (len > 0 && len <= OBJ_BUILD_ID_MAX) {
		memcpy(ret->build_id, id, (size_t)len);
		ret->build_id_len = (uint8_t)len;
	}
	build_id_to_hex(ret->build_id, ret->build_id_len, ret->build_id_hex);
	ret->sources = read_sources(elf);
	if (!gelf_getehdr(elf, &eh) || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN))
		return 0;
	r = obj_read_loads(elf, &ret->loads, &ret->nloads);
	if (r == -ENOMEM)
		return r;
	if (r == 0)
		ret->e_type = eh.e_type;
	return 0;
}

void obj_facts_free(struct obj_facts *f)
{
	free(f->loads);
	f->loads = NULL;
	f->nloads = 0;
}

/* ---- content hash ---- */

static int pread_all(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pread(fd, buf, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* shorter than fstat() said */
		buf += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int obj_content_hash_fd(int fd, uint64_t size, uint64_t *ret)
{
	uint8_t buf[2 * HASH_CHUNK + sizeof(size)];
	size_t nhead = size < HASH_CHUNK ? (size_t)size : HASH_CHUNK;
	size_t ntail = size - nhead < HASH_CHUNK ? (size_t)(size - nhead) : HASH_CHUNK;
	int r;

	/* head, tail, length */
	r = pread_all(fd, buf, nhead, 0);
	if (r == 0)
		r = pread_all(fd, buf + nhead, ntail, size - ntail);
	if (r < 0)
		return r;
	memcpy(buf + nhead + ntail, &size, sizeof(size));
	*ret = hash_bytes(buf, nhead + ntail + sizeof(size));
	return 0;
}

/* ---- addresses ---- */

const struct obj_load *obj_load_at(const struct obj_facts *f, uint64_t map_offset)
{
	const struct obj_load *best = NULL;

	for (size_t i = 0; i < f->nloads; i++) {
		const struct obj_load *l = &f->loads[i];

		if (map_offset < (l->offset & PAGE_MASK_4K) || map_offset >= l->offset + l->filesz)
			continue;
		if (!best || (l->exec && !best->exec))
			best = l;
	}
	return best;
}

const struct obj_load *obj_text_load(const struct obj_facts *f)
{
	for (size_t i = 0; i < f->nloads; i++)
		if (f->loads[i].exec)
			return &f->loads[i];
	return f->nloads ? &f->loads[0] : NULL;
}

bool obj_file_offset(const struct obj_facts *f, uint64_t addr, uint64_t *ret)
{
	for (size_t i = 0; i < f->nloads; i++) {
		const struct obj_load *l = &f->loads[i];

		if (addr >= l->vaddr && addr - l->vaddr < l->memsz) {
			*ret = addr - l->vaddr + l->offset;
			return true;
		}
	}
	return false;
}
