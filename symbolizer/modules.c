/* modules.c: the symbolizer's modules: one per object of the object cache (or pseudo
 * module), and the LRU of those holding an open ELF/DWARF state, within their caps. */
#include "symbolizer_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "clock.h"
#include "dwarf_frames.h"
#include "log.h"
#include "escape.h"

#define VDSO_MAX_SIZE (1u << 20)

/* Closes open module v (on the open LRU) and forgets its measured heap. */
static void close_open_module(struct symbolizer *s, struct module *v)
{
	dwarf_ctx_free(v);
	module_close(v);
	lru_unlink(&v->open_link);
	s->nopen--;
	s->open_heap -= v->heap_bytes;
	v->heap_bytes = 0;
	v->heap_misses = 0;
	s->st.module_evictions++;
}

void sym_close_module(struct symbolizer *s, struct module *m)
{
	if (lru_linked(&m->open_link)) {
		close_open_module(s, m);
		s->st.module_evictions--; /* not an eviction */
	} else {
		dwarf_ctx_free(m);
		module_close(m);
	}
}

/* Closes the least recently used modules other than keep while more than
 * max_modules are open or they hold more than max_module_heap. */
void sym_enforce_open_caps(struct symbolizer *s, struct module *keep)
{
	struct lru_link *t;

	while ((s->nopen > s->max_modules || s->open_heap > s->max_module_heap) &&
	       (t = lru_tail(&s->open)) != (keep ? &keep->open_link : NULL) && t)
		close_open_module(s, lru_entry(t, struct module, open_link));
}

/* Marks m as just used: first in the LRU of open modules, then applies the
 * caps to the others. */
void sym_module_touch(struct symbolizer *s, struct module *m)
{
	if (!module_is_open(m))
		return;
	if (!lru_linked(&m->open_link))
		s->nopen++;
	lru_touch(&s->open, &m->open_link);
	m->touched_ns = clock_mono_ns();
	sym_enforce_open_caps(s, m);
}

void symbolizer_close_idle(struct symbolizer *s, uint64_t idle_ns)
{
	uint64_t now = clock_mono_ns();
	struct lru_link *t;

	/* The LRU tail is the module used longest ago: stop at the first recent one. */
	while ((t = lru_tail(&s->open))) {
		struct module *v = lru_entry(t, struct module, open_link);

		if (now - v->touched_ns < idle_ns)
			break;
		close_open_module(s, v);
	}
}

/* Bytes of file-backed (and shared) pages the process has resident: statm's third
 * field. 0 when it cannot be read. */
uint64_t sym_file_resident_bytes(void)
{
	unsigned long size, resident, shared = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu %lu", &size, &resident, &shared) != 3)
		shared = 0;
	fclose(f);
	return (uint64_t)shared * (uint64_t)sysconf(_SC_PAGESIZE);
}

void symbolizer_release_pages(struct symbolizer *s)
{
	s->released_ns = clock_mono_ns();
	for (struct lru_link *l = s->open.next; l != &s->open; l = l->next)
		module_release_pages(lru_entry(l, struct module, open_link));
	s->released_file_bytes = sym_file_resident_bytes();
	s->checked_ns = s->released_ns;
}

/* Takes m off the open LRU when it no longer holds heavy state. */
void sym_module_sync(struct symbolizer *s, struct module *m)
{
	if (!module_is_open(m) && lru_linked(&m->open_link)) {
		lru_unlink(&m->open_link);
		s->nopen--;
		s->open_heap -= m->heap_bytes;
		m->heap_bytes = 0;
		m->heap_misses = 0;
	}
}

/* Makes a closed module usable again. Returns 1 when it is, 0 when its file is
 * gone (fallback names then), -ENOMEM. */
int sym_module_ready(struct symbolizer *s, struct module *m)
{
	struct obj_source src = { .proc_root = s->proc_root, .path = m->path, .try_plain_path = true };

	if (!module_can_reopen(m))
		return 1; /* open, or nothing to open (dwarf_symbolize copes) */
	if (m->reopen_failed)
		return 0;
	if (m->seen_pid) {
		src.pid = m->seen_pid;
		src.start = m->seen_start;
		src.end = m->seen_end;
		src.dev = m->seen_dev;
		src.ino = m->seen_ino;
	}
	if (module_reopen(m, &src, 1) < 0) {
		m->reopen_failed = true;
		return 0;
	}
	s->st.module_reopens++;
	return 1;
}

/* Gives m its id; s owns it from now on (frees it at once on failure). */
int sym_add_module(struct symbolizer *s, struct module *m)
{
	if (s->nmods == s->mods_cap) {
		uint32_t cap = s->mods_cap ? s->mods_cap * 2 : 64;
		struct module **v = realloc(s->mods, cap * sizeof(*v));

		if (!v) {
			module_free(m);
			return -ENOMEM;
		}
		s->mods = v;
		s->mods_cap = cap;
	}
	s->mods[s->nmods++] = m;
	m->pub.id = s->nmods;
	s->mod_bytes += module_light_bytes(m) + MALLOC_OVERHEAD * 5;
	sym_module_touch(s, m);
	return 0;
}

static struct module *find_key(struct symbolizer *s, const char *key)
{
	uint32_t id = intern_find(s->keys, key, strlen(key));

	return id ? s->by_key[id] : NULL;
}

static int bind_key(struct symbolizer *s, const char *key, struct module *m)
{
	uint32_t id;
	int r = intern_put_str(s->keys, key, &id);

	if (r < 0)
		return r;
	if (id >= s->by_key_cap) {
		uint32_t cap = s->by_key_cap ? s->by_key_cap : 64;
		struct module **v;

		while (cap <= id)
			cap *= 2;
		v = realloc(s->by_key, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		memset(v + s->by_key_cap, 0, (cap - s->by_key_cap) * sizeof(*v));
		s->by_key = v;
		s->by_key_cap = cap;
	}
	s->by_key[id] = m;
	return 0;
}

/* The module of object o (whose reference is taken or given back): the one
 * made for it before, or a new one shown as path that takes file's Elf. */
static int object_module(struct symbolizer *s, struct object *o, const char *path, struct obj_file *file,
			 struct module **ret)
{
	struct module *m;
	uint64_t v;
	int r;

	if (u64map_get(&s->by_obj, o->id, &v)) {
		object_unref(s->objs, o);
		*ret = (struct module *)(uintptr_t)v;
		return 0;
	}
	r = module_new_object(s->objs, o, path, file, &s->inflate, &m);
	if (r == 0) {
		m->dbgd = s->dbgd;
		r = sym_add_module(s, m);
	}
	if (r == 0) /* on failure m stays in s->mods: freed with them */
		r = u64map_put(&s->by_obj, o->id, (uint64_t)(uintptr_t)m);
	if (r < 0)
		return r;
	*ret = m;
	return 0;
}

/* The module without an object known by key, made on first use. */
static int keyed_module(struct symbolizer *s, const char *key, enum sym_module_kind kind, const char *path,
			const char *name, struct module **ret)
{
	struct module *m = find_key(s, key);
	int r;

	if (!m) {
		r = module_new_plain(kind, path, name, &m);
		if (r == 0)
			r = sym_add_module(s, m);
		if (r == 0)
			r = bind_key(s, key, m);
		if (r < 0)
			return r;
	}
	*ret = m;
	return 0;
}

int sym_plain_module(struct symbolizer *s, enum sym_module_kind kind, const char *path, struct module **ret)
{
	char key[PATH_MAX + 8];

	snprintf(key, sizeof(key), "s:%s", path);
	return keyed_module(s, key, kind, path, path, ret);
}

static int vdso_module(struct symbolizer *s, uint32_t pid, const struct pm_entry *e, struct module **ret)
{
	char path[PATH_MAX];
	size_t size = e->end - e->start;
	void *image = NULL;
	ssize_t n = -1;
	struct module *m = NULL;
	struct object *o;
	uint64_t v;
	int fd, r;

	if (size <= VDSO_MAX_SIZE) {
		snprintf(path, sizeof(path), "%s/%" PRIu32 "/mem", s->proc_root, pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		image = malloc(size);
		if (fd >= 0 && image)
			n = pread(fd, image, size, (off_t)e->start);
		if (fd >= 0)
			close(fd);
	}
	if (n != (ssize_t)size) {
		free(image);
		return sym_plain_module(s, SYM_MOD_VDSO, "[vdso]", ret);
	}
	/* Every process of one ABI shares the same image: one object. */
	r = objcache_get_image(s->objs, image, size, &o);
	if (r == 0 && u64map_get(&s->by_obj, o->id, &v)) {
		object_unref(s->objs, o);
		m = (struct module *)(uintptr_t)v;
	} else if (r == 0) {
		r = module_new_image(s->objs, o, image, size, SYM_MOD_VDSO, "[vdso]", &m);
		if (r == 0)
			r = sym_add_module(s, m);
		if (r == 0)
			r = u64map_put(&s->by_obj, o->id, (uint64_t)(uintptr_t)m);
	}
	free(image);
	if (r < 0)
		return r;
	*ret = m;
	return 0;
}

/* The module of a mapped file that only /proc/PID/map_files could have opened
 * (deleted, or replaced at its path) and that prowl may not open: its name
 * says so, and so its fallback frames and the marker of stacks cut short in
 * it. One warning for the first such file. */
static int unreadable_module(struct symbolizer *s, const char *key, const struct pm_entry *e, struct module **ret)
{
	char name[PATH_MAX + 96], buf[PATH_MAX];
	const char *base = strrchr(e->path, '/');

	base = base && base[1] ? base + 1 : e->path;
	snprintf(name, sizeof(name), "%s [%sreading it needs CAP_CHECKPOINT_RESTORE]", base,
		 e->deleted ? "deleted; " : "");
	if (!s->warned_map_files) {
		s->warned_map_files = true;
		log_warn("cannot open %s%s: /proc/PID/map_files, the only way to it, needs CAP_CHECKPOINT_RESTORE "
			 "(or CAP_SYS_ADMIN); its frames are shown as addresses (further such files are logged at debug "
			 "level)", printable(e->path, buf, sizeof(buf)), e->deleted ? " (deleted)" : "");
	} else {
		log_debug("cannot open %s%s: /proc/PID/map_files needs CAP_CHECKPOINT_RESTORE",
			  printable(e->path, buf, sizeof(buf)), e->deleted ? " (deleted)" : "");
	}
	return keyed_module(s, key, SYM_MOD_ELF, e->path, name, ret);
}

/* The module of a file mapping: its object's, found or read through the object
 * cache. A file that cannot be opened still gets a module (remembered by its
 * identity and path), so its frames fall back to file offsets. */
static int file_module(struct symbolizer *s, uint32_t pid, const struct pm_entry *e, struct module **ret)
{
	struct obj_source src = {
		.proc_root = s->proc_root, .pid = pid, .start = e->start, .end = e->end,
		.dev = makedev(e->dev_major, e->dev_minor), .ino = e->inode, .path = e->path, .try_plain_path = true,
	};
	struct obj_file file;
	char key[PATH_MAX + 64];
	struct object *o;
	int r;

	snprintf(key, sizeof(key), "f:%" PRIx32 ":%" PRIx32 ":%" PRIu64 ":%s", e->dev_major, e->dev_minor, e->inode,
		 e->path);
	*ret = find_key(s, key);
	if (*ret)
		return 0;
	r = objcache_get(s->objs, &src, &o, &file);
	if (r == 0) {
		r = object_module(s, o, e->path, &file, ret);
		obj_file_close(&file);
		return r;
	}
	if (r == -ENOMEM)
		return r;
	if (r == -EPERM)
		return unreadable_module(s, key, e, ret);
	return keyed_module(s, key, SYM_MOD_ELF, e->path, NULL, ret);
}

int sym_mapping_module(struct symbolizer *s, uint32_t pid, const struct pm_entry *e, struct module **ret)
{
	switch (e->kind) {
	case PM_ANON:
		*ret = s->anon;
		return 0;
	case PM_VDSO:
		return vdso_module(s, pid, e, ret);
	case PM_SPECIAL:
		return sym_plain_module(s, SYM_MOD_ANON, e->path, ret);
	case PM_FILE:
		break;
	}
	return file_module(s, pid, e, ret);
}

int symbolizer_module_from_file(struct symbolizer *s, const char *path, const struct sym_module **ret)
{
	struct obj_source src = { .path = path };
	struct obj_file file;
	struct object *o;
	struct module *m;
	int r;

	if (!s || !path || !ret)
		return -EINVAL;
	r = objcache_get(s->objs, &src, &o, &file);
	if (r < 0)
		return r;
	r = object_module(s, o, path, &file, &m);
	obj_file_close(&file);
	if (r < 0)
		return r;
	*ret = &m->pub;
	return 0;
}
