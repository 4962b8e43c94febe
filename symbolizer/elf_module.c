/* elf_module.c: opens one ELF object (mapped file or memory image), records its
 * build id and PT_LOAD segments, and converts process mappings to biases. */
#include "elf_module.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dwarf_frames.h"

#define PAGE_MASK_4K (~(uint64_t)0xfff)

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s && s[1] ? s + 1 : path;
}

static int module_alloc(enum sym_module_kind kind, const char *path, const char *name, struct module **ret)
{
	struct module *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->path = strdup(path);
	m->name = strdup(name ? name : base_name(path));
	m->build_id = strdup("");
	if (!m->path || !m->name || !m->build_id) {
		module_free(m);
		return -ENOMEM;
	}
	m->pub.kind = kind;
	m->pub.path = m->path;
	m->pub.name = m->name;
	m->pub.build_id = m->build_id;
	m->pub.start = 0;
	m->pub.limit = UINT64_MAX;
	m->pub.offset = 0;
	*ret = m;
	return 0;
}

int module_new_plain(enum sym_module_kind kind, const char *path, const char *name, struct module **ret)
{
	return module_alloc(kind, path, name, ret);
}

#define BUILD_ID_MAX 64

/* The GNU build id of elf as lowercase hex into buf (2 * BUILD_ID_MAX + 1
 * bytes); "" when it has none. */
static void build_id_hex(Elf *elf, char *buf)
{
	static const char hex[] = "0123456789abcdef";
	const void *p = NULL;
	ssize_t len = dwelf_elf_gnu_build_id(elf, &p);

	if (len <= 0 || len > BUILD_ID_MAX)
		len = 0;
	for (ssize_t i = 0; i < len; i++) {
		buf[2 * i] = hex[((const unsigned char *)p)[i] >> 4];
		buf[2 * i + 1] = hex[((const unsigned char *)p)[i] & 15];
	}
	buf[len * 2] = 0;
}

static int set_build_id(struct module *m)
{
	char id[2 * BUILD_ID_MAX + 1], *s;

	build_id_hex(m->elf, id);
	if (!id[0])
		return 0;
	s = strdup(id);
	if (!s)
		return -ENOMEM;
	free(m->build_id);
	m->build_id = s;
	m->pub.build_id = s;
	return 0;
}

/* Reads headers from m->elf; on any inconsistency drops the ELF so the module
 * degrades to file-offset fallbacks. Returns 0 or -ENOMEM. */
static int read_elf(struct module *m)
{
	GElf_Ehdr ehdr;
	size_t phnum = 0;
	const struct elf_load *text = NULL;
	int r;

	if (elf_kind(m->elf) != ELF_K_ELF || !gelf_getehdr(m->elf, &ehdr) ||
	    (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN) || elf_getphdrnum(m->elf, &phnum) < 0 ||
	    phnum == 0 || phnum > 4096)
		goto not_elf;
	m->loads = calloc(phnum, sizeof(*m->loads));
	if (!m->loads)
		return -ENOMEM;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(m->elf, (int)i, &ph))
			goto not_elf;
		if (ph.p_type != PT_LOAD)
			continue;
		if (ph.p_filesz > ph.p_memsz || ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
			goto not_elf;
		m->loads[m->nloads++] = (struct elf_load){
			.vaddr = ph.p_vaddr,
			.memsz = ph.p_memsz,
			.offset = ph.p_offset,
			.filesz = ph.p_filesz,
			.exec = ph.p_flags & PF_X,
		};
	}
	if (!m->nloads)
		goto not_elf;
	m->e_type = ehdr.e_type;
	for (size_t i = 0; i < m->nloads && !text; i++)
		if (m->loads[i].exec)
			text = &m->loads[i];
	if (!text)
		text = &m->loads[0];
	m->pub.start = text->vaddr;
	m->pub.limit = text->vaddr + text->memsz;
	m->pub.offset = text->offset;
	r = set_build_id(m);
	if (r < 0)
		return r;
	return 0;

not_elf:
	free(m->loads);
	m->loads = NULL;
	m->nloads = 0;
	elf_end(m->elf);
	m->elf = NULL;
	return 0;
}

int module_open_file(const char *const *paths, size_t npaths, const char *path, struct module **ret)
{
	struct module *m = NULL;
	struct stat st;
	int fd = -1, r = -ENOENT;

	for (size_t i = 0; i < npaths && fd < 0; i++) {
		fd = open(paths[i], O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (fd < 0) {
			r = -errno;
			continue;
		}
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			r = -ENOEXEC;
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0)
		return r;

	r = module_alloc(SYM_MOD_ELF, path, NULL, &m);
	if (r < 0)
		goto out;
	m->pub.limit = (uint64_t)st.st_size;
	m->file_dev = st.st_dev;
	m->file_ino = st.st_ino;
	m->file_size = (uint64_t)st.st_size;
	m->elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	/* Map (or read) everything now so the descriptor can be closed: a host has
	 * more distinct binaries than a process may keep descriptors open. */
	if (m->elf && elf_cntl(m->elf, ELF_C_FDREAD) < 0) {
		elf_end(m->elf);
		m->elf = NULL;
	}
	if (m->elf) {
		r = read_elf(m);
		if (r < 0)
			goto out;
	}
	*ret = m;
	m = NULL;
	r = 0;
out:
	close(fd);
	module_free(m);
	return r;
}

int module_open_image(const void *image, size_t size, enum sym_module_kind kind, const char *path,
		      struct module **ret)
{
	struct module *m = NULL;
	int r;

	r = module_alloc(kind, path, NULL, &m);
	if (r < 0)
		return r;
	m->pub.limit = size;
	m->image = malloc(size ? size : 1);
	if (!m->image) {
		module_free(m);
		return -ENOMEM;
	}
	memcpy(m->image, image, size);
	m->image_size = size;
	m->elf = elf_memory(m->image, size);
	if (m->elf) {
		r = read_elf(m);
		if (r < 0) {
			module_free(m);
			return r;
		}
	}
	*ret = m;
	return 0;
}

static const struct elf_load *load_for_offset(const struct module *m, uint64_t map_offset)
{
	const struct elf_load *best = NULL;

	for (size_t i = 0; i < m->nloads; i++) {
		const struct elf_load *l = &m->loads[i];

		if (map_offset < (l->offset & PAGE_MASK_4K) || map_offset >= l->offset + l->filesz)
			continue;
		if (!best || (l->exec && !best->exec))
			best = l;
	}
	if (best)
		return best;
	for (size_t i = 0; i < m->nloads; i++)
		if (m->loads[i].exec)
			return &m->loads[i];
	return m->nloads ? &m->loads[0] : NULL;
}

uint64_t module_bias(const struct module *m, uint64_t map_start, uint64_t map_offset)
{
	const struct elf_load *l = load_for_offset(m, map_offset);

	if (!l) /* normalized address = file offset */
		return map_start - map_offset;
	return map_start - map_offset + l->offset - l->vaddr;
}

uint64_t module_file_offset(const struct module *m, uint64_t addr)
{
	for (size_t i = 0; i < m->nloads; i++) {
		const struct elf_load *l = &m->loads[i];

		if (addr >= l->vaddr && addr - l->vaddr < l->memsz)
			return addr - l->vaddr + l->offset;
	}
	return addr - m->pub.start + m->pub.offset;
}

void module_close(struct module *m)
{
	dwarf_ctx_free(m);
	if (m->elf)
		elf_end(m->elf);
	m->elf = NULL;
}

/* Opens path as an Elf when it is the file m was read from. */
static int reopen_file(struct module *m, const char *path, Elf **ret)
{
	char id[2 * BUILD_ID_MAX + 1];
	struct stat st;
	bool same;
	Elf *elf;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -ENOEXEC;
	}
	same = (uint64_t)st.st_dev == m->file_dev && (uint64_t)st.st_ino == m->file_ino &&
	       (uint64_t)st.st_size == m->file_size;
	if (!same && !m->build_id[0]) {
		close(fd);
		return -ESTALE;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && elf_cntl(elf, ELF_C_FDREAD) < 0) {
		elf_end(elf);
		elf = NULL;
	}
	close(fd);
	if (!elf)
		return -ENOEXEC;
	if (!same) {
		/* Another file (a container's copy, a reinstall): fine when it is
		 * the same build. */
		build_id_hex(elf, id);
		if (strcmp(id, m->build_id) != 0) {
			elf_end(elf);
			return -ESTALE;
		}
	}
	*ret = elf;
	return 0;
}

int module_reopen(struct module *m, const char *const *paths, size_t npaths)
{
	Elf *elf = NULL;

	if (module_is_open(m))
		return 0;
	if (m->image) {
		elf = elf_memory(m->image, m->image_size);
	} else {
		for (size_t i = 0; i < npaths && !elf; i++)
			if (reopen_file(m, paths[i], &elf) < 0)
				elf = NULL;
	}
	if (!elf)
		return -ENOENT;
	m->elf = elf;
	return 0;
}

size_t module_light_bytes(const struct module *m)
{
	return sizeof(*m) + strlen(m->path) + strlen(m->name) + strlen(m->build_id) + 3 +
	       m->nloads * sizeof(*m->loads) + m->image_size;
}

void module_free(struct module *m)
{
	if (!m)
		return;
	module_close(m);
	free(m->image);
	free(m->loads);
	free(m->path);
	free(m->name);
	free(m->build_id);
	free(m);
}
