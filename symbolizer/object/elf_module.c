/* elf_module.c: a module's Elf, taken from the object layer or reopened through it
 * (inflating compressed debug sections), its file pages, and its bias per mapping. */
#include "elf_module.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inflate.h"
#include "log.h"

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
	if (!m->path || !m->name) {
		module_free(m);
		return -ENOMEM;
	}
	m->fd = -1;
	m->pub.kind = kind;
	m->pub.path = m->path;
	m->pub.name = m->name;
	m->pub.build_id = "";
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

int module_set_build_id(struct module *m, const char *hex)
{
	char *s = strdup(hex);

	if (!s)
		return -ENOMEM;
	free(m->own_build_id);
	m->own_build_id = s;
	m->pub.build_id = s;
	return 0;
}

/* The normalized address space of a usable ELF: that of its text segment. */
static void set_layout(struct module *m)
{
	const struct obj_load *text = obj_text_load(&m->obj->f);

	m->pub.build_id = m->obj->f.build_id_hex;
	if (!text)
		return;
	m->pub.start = text->vaddr;
	m->pub.limit = text->vaddr + text->memsz;
	m->pub.offset = text->offset;
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

/* Makes elf independent of its descriptor (everything mapped, or read, now):
 * a host has more distinct binaries than a process may keep descriptors open. */
static Elf *detach(Elf *elf)
{
	if (elf && elf_cntl(elf, ELF_C_FDREAD) < 0) {
		elf_end(elf);
		elf = NULL;
	}
	return elf;
}

bool module_check_file(struct module *m)
{
	if (m->fd < 0 || obj_file_unchanged(m->fd, &m->fd_ident) != -ESTALE)
		return true;
	objcache_mark_broken(m->objs, m->obj);
	return false;
}

/* Keeps the untrusted file's Elf (read with pread(), never mapped) with its
 * descriptor, which it needs while it lives. */
static Elf *keep_fd(struct module *m, struct obj_file *file, Elf *elf)
{
	m->fd = file->fd;
	m->fd_ident = file->ident;
	file->fd = -1;
	return elf;
}

/* Takes file's Elf, or that of an inflated copy of the file when it has
 * compressed sections (rare: only then is the file read a second time). The
 * copy is prowl's own file, so it is mapped whoever owns the original; the
 * original must not have changed while it was copied. */
static Elf *take_elf(struct module *m, struct obj_file *file)
{
	Elf *elf = file->elf, *inflated;
	int ifd;

	file->elf = NULL;
	if (!elf)
		return NULL;
	if (!(m->obj->f.sources & OBJ_SRC_COMPRESSED) || (ifd = module_inflate_fd(m, file->fd)) < 0)
		return file->ident.trusted ? detach(elf) : keep_fd(m, file, elf);
	inflated = elf_begin(ifd, ELF_C_READ_MMAP, NULL);
	inflated = detach(inflated);
	close(ifd);
	if (inflated && !file->ident.trusted && obj_file_unchanged(file->fd, &file->ident) == -ESTALE) {
		objcache_mark_broken(m->objs, m->obj);
		elf_end(inflated);
		inflated = NULL;
		inflate_release(m);
		elf_end(elf);
		return NULL;
	}
	if (!inflated) {
		inflate_release(m); /* the copy is gone with its descriptor */
		return file->ident.trusted ? detach(elf) : keep_fd(m, file, elf);
	}
	elf_end(elf);
	return inflated;
}

/* A module of object o (its reference taken, or given back on failure). */
static int module_alloc_object(struct objcache *c, struct object *o, enum sym_module_kind kind, const char *path,
			       struct module **ret)
{
	int r = module_alloc(kind, path, NULL, ret);

	if (r < 0) {
		object_unref(c, o);
		return r;
	}
	(*ret)->objs = c;
	(*ret)->obj = o;
	return 0;
}

int module_new_object(struct objcache *c, struct object *o, const char *path, struct obj_file *file,
		      struct inflate_budget *inflate, struct module **ret)
{
	struct module *m = NULL;
	int r;

	r = module_alloc_object(c, o, SYM_MOD_ELF, path, &m);
	if (r < 0)
		return r;
	m->inflate = inflate;
	m->pub.limit = o->size;
	set_layout(m);
	if (o->f.nloads && file && file->elf && !object_broken(o)) {
		m->elf = take_elf(m, file);
		if (m->fd < 0)
			file_map_note(&m->map, m->elf);
	}
	*ret = m;
	return 0;
}

int module_new_image(struct objcache *c, struct object *o, const void *image, size_t size, enum sym_module_kind kind,
		     const char *path, struct module **ret)
{
	struct module *m = NULL;
	int r;

	r = module_alloc_object(c, o, kind, path, &m);
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
	set_layout(m);
	if (o->f.nloads)
		m->elf = elf_memory(m->image, size);
	*ret = m;
	return 0;
}

uint64_t module_bias(const struct module *m, uint64_t map_start, uint64_t map_offset)
{
	const struct obj_facts *f = module_facts(m);
	const struct obj_load *l = f ? obj_load_at(f, map_offset) : NULL;

	if (!l && f)
		l = obj_text_load(f);
	if (!l) /* normalized address = file offset */
		return map_start - map_offset;
	return obj_load_bias(l, map_start, map_offset);
}

uint64_t module_file_offset(const struct module *m, uint64_t addr)
{
	const struct obj_facts *f = module_facts(m);
	uint64_t off;

	if (f && obj_file_offset(f, addr, &off))
		return off;
	return addr - m->pub.start + m->pub.offset;
}

void module_close(struct module *m)
{
	if (m->elf)
		elf_end(m->elf);
	m->elf = NULL;
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
	m->map = (struct file_map){ 0 };
	m->dbg_map = (struct file_map){ 0 };
	inflate_release(m);
}

int module_reopen(struct module *m, const struct obj_source *srcs, size_t nsrcs)
{
	struct obj_file file;
	Elf *elf = NULL;

	if (module_is_open(m))
		return 0;
	if (m->image) {
		elf = elf_memory(m->image, m->image_size);
	} else {
		for (size_t i = 0; i < nsrcs && !elf; i++) {
			if (objcache_open(m->objs, m->obj, &srcs[i], &file) < 0)
				continue;
			elf = take_elf(m, &file);
			obj_file_close(&file);
		}
	}
	if (!elf)
		return -ENOENT;
	m->elf = elf;
	if (!m->image && m->fd < 0)
		file_map_note(&m->map, elf);
	return 0;
}

size_t module_light_bytes(const struct module *m)
{
	return sizeof(*m) + strlen(m->path) + strlen(m->name) + 2 +
	       (m->own_build_id ? strlen(m->own_build_id) + 1 : 0) + m->image_size;
}

void module_free(struct module *m)
{
	if (!m)
		return;
	module_close(m);
	object_unref(m->objs, m->obj);
	free(m->image);
	free(m->path);
	free(m->name);
	free(m->own_build_id);
	free(m);
}
