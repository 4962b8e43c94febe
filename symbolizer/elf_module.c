/* elf_module.c: opens one ELF object (mapped file or memory image), records its
 * build id and PT_LOAD segments, and converts process mappings to biases. */
#include "elf_module.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dwarf_frames.h"
#include "inflate.h"
#include "log.h"

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

/* Whether a file-backed mapping starts at base and covers len bytes. */
static bool file_mapping_at(const uint8_t *base, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long start, end, ino;
		unsigned int maj, min;
		unsigned long long off;

		/* Long lines (paths) continue in the next fgets(): their tails do not
		 * parse as a mapping line, and the start address is compared anyway. */
		if (sscanf(line, "%lx-%lx %*s %llx %x:%x %lu", &start, &end, &off, &maj, &min, &ino) != 6)
			continue;
		if (start == (uintptr_t)base)
			found = ino != 0 && off == 0 && end - start >= len;
	}
	fclose(f);
	return found;
}

void file_map_note(struct file_map *map, Elf *elf)
{
	size_t len = 0, page = (size_t)sysconf(_SC_PAGESIZE), pos = 0, keep[3][2];
	uint8_t *base = elf ? (uint8_t *)elf_rawfile(elf, &len) : NULL;
	GElf_Ehdr eh;

	*map = (struct file_map){ 0 };
	if (!base || len == 0 || (uintptr_t)base % page || !gelf_getehdr(elf, &eh))
		return;
	if (!file_mapping_at(base, len))
		return;
	/* The header ranges, widened to whole pages; e_shnum 0 with sections
	 * means the count is in section 0: keep to the end. */
	keep[0][0] = 0;
	keep[0][1] = eh.e_ehsize;
	keep[1][0] = eh.e_phoff;
	keep[1][1] = eh.e_phoff + (size_t)eh.e_phnum * eh.e_phentsize;
	keep[2][0] = eh.e_shoff;
	keep[2][1] = eh.e_shnum ? eh.e_shoff + (size_t)eh.e_shnum * eh.e_shentsize : len;
	len = (len + page - 1) / page * page;
	for (int i = 0; i < 3; i++) {
		keep[i][0] = keep[i][0] > len ? len : keep[i][0] / page * page;
		keep[i][1] = keep[i][1] > len ? len : (keep[i][1] + page - 1) / page * page;
		for (int j = i; j > 0 && keep[j][0] < keep[j - 1][0]; j--) {
			size_t t[2] = { keep[j][0], keep[j][1] };

			memcpy(keep[j], keep[j - 1], sizeof(t));
			memcpy(keep[j - 1], t, sizeof(t));
		}
	}
	/* The pages to drop are the gaps between them (at most 4 ranges). */
	for (int i = 0; i < 3; i++) {
		if (keep[i][1] <= keep[i][0])
			continue;
		if (keep[i][0] > pos) {
			map->drop[map->ndrop][0] = pos;
			map->drop[map->ndrop++][1] = keep[i][0];
		}
		if (keep[i][1] > pos)
			pos = keep[i][1];
	}
	if (pos < len) {
		map->drop[map->ndrop][0] = pos;
		map->drop[map->ndrop++][1] = len;
	}
	map->base = base;
}

void file_map_release(const struct file_map *map)
{
	for (size_t i = 0; i < map->ndrop; i++)
		madvise(map->base + map->drop[i][0], map->drop[i][1] - map->drop[i][0], MADV_DONTNEED);
}

void module_release_pages(struct module *m)
{
	file_map_release(&m->map);
	file_map_release(&m->dbg_map);
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

int module_inflate_fd(struct module *m, int src_fd)
{
	struct inflate_budget *b = m->inflate;
	struct stat st;
	uint64_t left;
	int fd;

	if (!b || !b->dir || fstat(src_fd, &st) < 0)
		return -1;
	/* The copy holds the original file and the inflated sections. */
	left = b->max > b->used ? b->max - b->used : 0;
	left = left > (uint64_t)st.st_size ? left - (uint64_t)st.st_size : 0;
	fd = elf_inflate_debug(src_fd, b->dir, left);
	if (fd == -ENODATA || fd == -ENOEXEC)
		return -1;
	if (fd < 0) {
		if (fd != -EFBIG)
			log_debug("%s: cannot inflate its debug sections in %s: %s", m->path, b->dir, strerror(-fd));
		b->fallbacks++;
		return -1;
	}
	if (fstat(fd, &st) == 0) {
		m->inflated_bytes += (uint64_t)st.st_size;
		b->used += (uint64_t)st.st_size;
	}
	b->files++;
	return fd;
}

/* Gives back the budget of m's inflated files, once their Elfs are closed
 * (the files were unnamed: they are gone with their mappings). */
static void inflate_release(struct module *m)
{
	if (m->inflate)
		m->inflate->used -= m->inflated_bytes;
	m->inflated_bytes = 0;
}

/* elf_begin() on fd with everything mapped (or read) now, so the descriptor
 * can be closed: a host has more distinct binaries than a process may keep
 * descriptors open. */
static Elf *begin_mapped(int fd)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);

	if (elf && elf_cntl(elf, ELF_C_FDREAD) < 0) {
		elf_end(elf);
		elf = NULL;
	}
	return elf;
}

static bool has_compressed_sections(Elf *elf)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_COMPRESSED))
			return true;
	}
	return false;
}

/* The Elf of fd, or of an inflated copy of it when it has compressed
 * sections (rare: only then is the file read a second time). */
static Elf *open_elf(struct module *m, int fd)
{
	Elf *elf = begin_mapped(fd), *inflated;
	int ifd;

	if (!elf || !has_compressed_sections(elf) || (ifd = module_inflate_fd(m, fd)) < 0)
		return elf;
	inflated = begin_mapped(ifd);
	close(ifd);
	if (!inflated) {
		inflate_release(m); /* the copy is gone with its descriptor */
		return elf;
	}
	elf_end(elf);
	return inflated;
}

int module_open_file(const char *const *paths, size_t npaths, const char *path, struct inflate_budget *inflate,
		     struct module **ret)
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
	m->inflate = inflate;
	m->elf = open_elf(m, fd);
	if (m->elf) {
		r = read_elf(m);
		if (r < 0)
			goto out;
		file_map_note(&m->map, m->elf);
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
	m->map = (struct file_map){ 0 };
	m->dbg_map = (struct file_map){ 0 };
	inflate_release(m);
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
	elf = open_elf(m, fd);
	close(fd);
	if (!elf)
		return -ENOEXEC;
	if (!same) {
		/* Another file (a container's copy, a reinstall): fine when it is
		 * the same build. */
		build_id_hex(elf, id);
		if (strcmp(id, m->build_id) != 0) {
			elf_end(elf);
			inflate_release(m); /* closed before: this was its only file */
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
	if (!m->image)
		file_map_note(&m->map, elf);
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
