/* symbolizer.c: the resolve stage's front: per-process mapping tables, the kernel, and
 * the frame cache, each bounded by a cap with LRU eviction (modules.c has the modules). */
#include "symbolizer.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "demangle.h"
#include "dwarf_frames.h"
#include "symbolizer_priv.h"

#define REREAD_INTERVAL_NS (200ull * 1000 * 1000)
/* A gone pid is only worth remembering while it rate-limits retries. */
#define GONE_TTL_NS (10 * REREAD_INTERVAL_NS)

#define DEFAULT_MAX_CACHED_FRAMES 100000
#define DEFAULT_MAX_MODULES 48
#define DEFAULT_MAX_MODULE_HEAP (16u << 20)
#define DEFAULT_MAX_PROCESSES 32768
#define DEFAULT_MAX_GONE_PIDS 4096


struct pmap {
	uint64_t start, end, bias; /* normalized = runtime - bias */
	struct module *mod;
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	const char *path; /* NULL for anonymous memory; mod's path or owned (own_path) */
	bool own_path;
};

/* Every entry is on exactly one LRU list: live (maps read) or gone (a negative
 * cache entry for a pid that was never read successfully). */
struct proc {
	struct lru_link link;
	uint32_t pid;
	struct pmap *maps; /* executable mappings, sorted by start */
	size_t n;
	size_t bytes;      /* memory held, for the estimate */
	uint64_t read_ns;  /* last /proc/PID/maps read attempt */
	struct module *main_mod;
	struct perfmap *pm;     /* its JIT symbols; NULL while it has no perf map */
	uint64_t pm_checked_ns; /* last look for the perf map */
	bool main_done;
	bool gone;
};

static int intern_cstr(struct intern *t, const char *str, const char **ret)
{
	uint32_t id;
	int r = intern_put_str(t, str, &id);

	if (r < 0)
		return r;
	*ret = intern_str(t, id);
	return 0;
}

/* ---- processes ---- */

static void maps_free(struct pmap *maps, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (maps[i].own_path)
			free((char *)maps[i].path);
	free(maps);
}

static int read_maps(struct symbolizer *s, uint32_t pid, struct pmap **ret_maps, size_t *ret_n)
{
	struct procmaps pm = { 0 };
	struct pmap *maps = NULL;
	char path[PATH_MAX];
	FILE *f;
	int r;

	snprintf(path, sizeof(path), "%s/%" PRIu32 "/maps", s->proc_root, pid);
	s->st.maps_reads++;
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	r = procmaps_parse(f, PROCMAPS_EXEC_ONLY, &pm, NULL);
	fclose(f);
	if (r < 0)
		return r == -ENOENT ? -ESRCH : r;
	if (pm.n) {
		maps = calloc(pm.n, sizeof(*maps));
		if (!maps) {
			r = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < pm.n; i++) {
		const struct pm_entry *e = &pm.v[i];
		struct pmap *p = &maps[i];
		struct module *m;

		r = sym_mapping_module(s, pid, e, &p->mod);
		if (r < 0)
			goto out;
		m = p->mod;
		p->start = e->start;
		p->end = e->end;
		p->bias = m->pub.kind == SYM_MOD_ANON ? 0 : module_bias(m, e->start, e->offset);
		p->inode = e->inode;
		p->dev_major = e->dev_major;
		p->dev_minor = e->dev_minor;
		if (e->path && strcmp(e->path, m->pub.path) == 0) {
			p->path = m->pub.path; /* lives as long as the symbolizer */
		} else if (e->path) {
			p->path = strdup(e->path);
			if (!p->path) {
				r = -ENOMEM;
				goto out;
			}
			p->own_path = true;
		}
		if (e->kind == PM_FILE && module_facts(m) && module_facts(m)->nloads) {
			/* How to reopen the file after the module was closed. */
			m->seen_pid = pid;
			m->seen_start = e->start;
			m->seen_end = e->end;
			m->seen_dev = makedev(e->dev_major, e->dev_minor);
			m->seen_ino = e->inode;
			m->reopen_failed = false;
		}
	}
	*ret_maps = maps;
	*ret_n = pm.n;
	maps = NULL;
	r = 0;
out:
	if (maps)
		maps_free(maps, pm.n);
	procmaps_free(&pm);
	return r;
}

static struct proc *proc_find(struct symbolizer *s, uint32_t pid)
{
	uint64_t v;

	return u64map_get(&s->procs, pid, &v) ? (struct proc *)(uintptr_t)v : NULL;
}

static void proc_account(struct symbolizer *s, struct proc *p)
{
	size_t b = sizeof(*p) + MALLOC_OVERHEAD;

	if (p->maps)
		b += p->n * sizeof(*p->maps) + MALLOC_OVERHEAD;
	for (size_t i = 0; i < p->n; i++)
		if (p->maps[i].own_path)
			b += strlen(p->maps[i].path) + 1 + MALLOC_OVERHEAD;
	s->proc_bytes = s->proc_bytes - p->bytes + b;
	p->bytes = b;
}

/* Removes p from the table and its list and frees everything it holds. */
static void proc_drop(struct symbolizer *s, struct proc *p)
{
	u64map_del(&s->procs, p->pid);
	if (lru_linked(&p->link)) {
		if (p->gone)
			s->ngone--;
		else
			s->nlive--;
		lru_unlink(&p->link);
	}
	s->proc_bytes -= p->bytes;
	maps_free(p->maps, p->n);
	perfmap_free(p->pm, &s->perfmaps);
	free(p);
}

/* Drops remembered gone pids that are past their use, and the oldest while
 * there is no room for one more. The list is ordered by read_ns. */
static void gone_prune(struct symbolizer *s)
{
	uint64_t now = clock_mono_ns();
	struct lru_link *t;

	while ((t = lru_tail(&s->gone))) {
		struct proc *p = lru_entry(t, struct proc, link);

		if (s->ngone < s->max_gone && now - p->read_ns < GONE_TTL_NS)
			break;
		proc_drop(s, p);
	}
}

/* Marks p live and most recently used; evicts the least recently used live
 * processes beyond max_processes (never p). */
static void proc_set_live(struct symbolizer *s, struct proc *p)
{
	struct lru_link *t;

	if (lru_linked(&p->link) && p->gone) {
		lru_unlink(&p->link);
		s->ngone--;
	}
	if (!lru_linked(&p->link))
		s->nlive++;
	p->gone = false;
	lru_touch(&s->live, &p->link);
	while (s->nlive > s->max_processes && (t = lru_tail(&s->live)) != &p->link) {
		proc_drop(s, lru_entry(t, struct proc, link));
		s->st.process_evictions++;
	}
}

/* (Re)reads pid's maps into p; on failure p keeps its old maps. A new entry
 * (on no list yet) that finds no process becomes a gone entry. */
static int proc_reread(struct symbolizer *s, struct proc *p)
{
	struct pmap *maps = NULL;
	size_t n = 0;
	int r;

	p->read_ns = clock_mono_ns();
	r = read_maps(s, p->pid, &maps, &n);
	if (r < 0) {
		if (r == -ESRCH && !lru_linked(&p->link)) {
			p->gone = true;
			s->ngone++;
		}
		if (p->gone) /* keep the gone list ordered by read_ns */
			lru_touch(&s->gone, &p->link);
		return r;
	}
	maps_free(p->maps, p->n);
	p->maps = maps;
	p->n = n;
	p->main_done = false;
	p->main_mod = NULL;
	proc_account(s, p);
	proc_set_live(s, p);
	return 0;
}

static int proc_load(struct symbolizer *s, uint32_t pid, struct proc **ret)
{
	struct proc *p;
	int r;

	gone_prune(s);
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->pid = pid;
	r = u64map_put(&s->procs, pid, (uint64_t)(uintptr_t)p);
	if (r < 0) {
		free(p);
		return r;
	}
	proc_account(s, p);
	r = proc_reread(s, p);
	/* -ESRCH: remembered, so that a burst of samples from a process that
	 * already exited costs one /proc lookup per interval, not one each. */
	if (r < 0 && r != -ESRCH)
		proc_drop(s, p);
	if (r < 0)
		return r;
	*ret = p;
	return 0;
}

static const struct pmap *proc_lookup(const struct proc *p, uint64_t addr)
{
	size_t lo = 0, hi = p->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->maps[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || addr >= p->maps[lo - 1].end)
		return NULL;
	return &p->maps[lo - 1];
}

int symbolizer_add_process(struct symbolizer *s, uint32_t pid)
{
	struct proc *p;

	if (!s)
		return -EINVAL;
	p = proc_find(s, pid);
	if (p)
		return proc_reread(s, p);
	return proc_load(s, pid, &p);
}

/* A live process entry for pid, reading its maps if needed; -ESRCH when it is
 * gone and was never read (retried at most once per interval). */
static int proc_get(struct symbolizer *s, uint32_t pid, struct proc **ret)
{
	struct proc *p = proc_find(s, pid);
	int r;

	if (!p)
		return proc_load(s, pid, ret);
	if (p->gone) {
		if (clock_mono_ns() - p->read_ns < REREAD_INTERVAL_NS)
			return -ESRCH;
		r = proc_reread(s, p);
		if (r < 0)
			return r;
	} else if (s->live.next != &p->link) {
		lru_touch(&s->live, &p->link);
	}
	*ret = p;
	return 0;
}

void symbolizer_forget_process(struct symbolizer *s, uint32_t pid)
{
	struct proc *p;

	if (!s)
		return;
	p = proc_find(s, pid);
	if (p)
		proc_drop(s, p);
}

int symbolizer_resolve_user(struct symbolizer *s, uint32_t pid, uint64_t addr, struct sym_addr *ret)
{
	const struct pmap *m;
	struct proc *p;
	int r;

	if (!s || !ret)
		return -EINVAL;
	r = proc_get(s, pid, &p);
	if (r < 0)
		return r;
	m = proc_lookup(p, addr);
	if (!m && clock_mono_ns() - p->read_ns >= REREAD_INTERVAL_NS) {
		/* A dlopen() or exec since the last read; a gone process keeps its
		 * last known maps. */
		if (proc_reread(s, p) == 0)
			m = proc_lookup(p, addr);
	}
	if (!m)
		return -ENOENT;
	ret->mod = &m->mod->pub;
	ret->addr = addr - m->bias;
	ret->pid = m->mod->pub.kind == SYM_MOD_ANON ? pid : 0;
	return 0;
}

/* Perf maps are looked for again at most this often when an address is not in one. */
#define PERFMAP_INTERVAL_NS (250ull * 1000 * 1000)

int symbolizer_jit_frame(struct symbolizer *s, const struct sym_addr *a, struct sym_frame *ret, uint64_t *ret_key,
			 bool *ret_named)
{
	struct proc *p = s && a ? proc_find(s, a->pid) : NULL;
	const struct pmap *m = p ? proc_lookup(p, a->addr) : NULL;
	const char *name = p ? perfmap_lookup(p->pm, a->addr) : NULL;
	uint64_t now;
	int r;

	if (!s || !a || !ret || !ret_key)
		return -EINVAL;
	*ret = (struct sym_frame){ .function = "[jit]" };
	*ret_key = m ? m->start : a->addr;
	if (ret_named)
		*ret_named = false;
	if (!p)
		return 0;
	now = clock_mono_ns();
	if (!name && now - p->pm_checked_ns >= PERFMAP_INTERVAL_NS) {
		/* A map that appeared late, or grew since it was read. */
		p->pm_checked_ns = now;
		r = perfmap_refresh(&p->pm, s->proc_root, p->pid, &s->perfmaps, now, 0);
		if (r < 0)
			return r;
		name = perfmap_lookup(p->pm, a->addr);
	}
	if (!name)
		return 0;
	intern_clear(s->scratch);
	r = intern_cstr(s->scratch, name, &ret->function);
	if (r == 0 && s->demangle != SYM_DEMANGLE_NONE && sym_is_mangled(name)) {
		char *d = sym_demangle(name, (enum sym_demangle)s->demangle);

		if (d) {
			ret->system_name = ret->function;
			r = intern_cstr(s->scratch, d, &ret->function);
			free(d);
		}
	}
	if (r < 0)
		return r;
	*ret_key = a->addr;
	if (ret_named)
		*ret_named = true;
	return 0;
}

const struct sym_module *symbolizer_main_module(struct symbolizer *s, uint32_t pid)
{
	char exe[PATH_MAX], target[PATH_MAX];
	struct proc *p;
	struct stat st;
	bool have_st;
	ssize_t len;

	if (!s || proc_get(s, pid, &p) < 0)
		return NULL;
	if (p->main_done)
		return p->main_mod ? &p->main_mod->pub : NULL;
	p->main_done = true;
	snprintf(exe, sizeof(exe), "%s/%" PRIu32 "/exe", s->proc_root, pid);
	have_st = stat(exe, &st) == 0;
	len = readlink(exe, target, sizeof(target) - 1);
	if (len < 0) {
		len = 0;
	} else {
		static const char deleted[] = " (deleted)";
		size_t dl = sizeof(deleted) - 1;

		if ((size_t)len > dl && memcmp(target + len - dl, deleted, dl) == 0)
			len -= (ssize_t)dl;
	}
	target[len] = 0;
	for (size_t i = 0; i < p->n; i++) {
		const struct pmap *m = &p->maps[i];

		if (!m->path || m->mod->pub.kind != SYM_MOD_ELF)
			continue;
		if ((have_st && m->inode == st.st_ino && m->dev_major == major(st.st_dev) &&
		     m->dev_minor == minor(st.st_dev)) ||
		    (len > 0 && strcmp(m->path, target) == 0)) {
			p->main_mod = m->mod;
			break;
		}
	}
	return p->main_mod ? &p->main_mod->pub : NULL;
}

/* ---- kernel ---- */

static int kernel_load(struct symbolizer *s)
{
	int r;

	if (s->ksyms_tried)
		return 0;
	s->ksyms_tried = true;
	r = kallsyms_load(s->kallsyms_path, &s->ksyms);
	if (r == -ENOMEM)
		return r;
	if (r == 0)
		s->st.kernel_addrs_hidden = s->ksyms->hidden;
	/* Unreadable kallsyms: kernel frames use the fallback name. */
	return 0;
}

int symbolizer_resolve_kernel(struct symbolizer *s, uint64_t addr, struct sym_addr *ret)
{
	int r;

	if (!s || !ret)
		return -EINVAL;
	r = kernel_load(s);
	if (r < 0)
		return r;
	ret->mod = &s->kernel->pub;
	ret->addr = addr;
	return 0;
}

static int kernel_frame(struct symbolizer *s, uint64_t addr, struct sym_frame *f, size_t *ret_n)
{
	struct ksym k;
	char mod[256], name[sizeof("__pfx_") + KSYM_NAME_LEN];
	int r;

	*ret_n = 0;
	r = kernel_load(s);
	if (r < 0)
		return r;
	if (!s->ksyms || !kallsyms_find(s->ksyms, addr, &k))
		return 0;
	*f = (struct sym_frame){ 0 };
	r = 0;
	if (*k.prefix) {
		snprintf(name, sizeof(name), "%s%s", k.prefix, k.name);
		r = intern_cstr(s->scratch, name, &f->function);
	} else {
		f->function = k.name; /* lives as long as ksyms */
	}
	if (r == 0 && k.module) {
		snprintf(mod, sizeof(mod), "[%s]", k.module);
		r = intern_cstr(s->scratch, mod, &f->file);
	}
	if (r < 0)
		return r;
	*ret_n = 1;
	return 0;
}

/* Reads the kernel's GNU build id from /sys/kernel/notes (a raw note list). */
static int kernel_build_id(struct module *m)
{
	char hex[OBJ_BUILD_ID_HEX];
	unsigned char buf[4096];
	size_t off = 0, n;
	FILE *f = fopen("/sys/kernel/notes", "re");

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	while (off + 12 <= n) {
		uint32_t namesz, descsz, type;
		size_t name_off = off + 12, desc_off;

		memcpy(&namesz, buf + off, 4);
		memcpy(&descsz, buf + off + 4, 4);
		memcpy(&type, buf + off + 8, 4);
		if (namesz > n || descsz > n)
			break;
		desc_off = name_off + ((namesz + 3) & ~3u);
		if (desc_off + descsz > n)
			break;
		if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(buf + name_off, "GNU", 4) == 0 && descsz &&
		    descsz <= OBJ_BUILD_ID_MAX) {
			build_id_to_hex(buf + desc_off, descsz, hex);
			return module_set_build_id(m, hex);
		}
		off = desc_off + ((descsz + 3) & ~3u);
	}
	return 0;
}

/* ---- frames ---- */

/* Bytes malloc has handed out, in the heap and in mmap'ed blocks. */
static size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}


static void copy_out(const struct fc_entry *e, struct sym_frame *frames, size_t max, size_t *ret_n,
		     bool *ret_symbolized)
{
	size_t n = e->n < max ? e->n : max;

	memcpy(frames, e->frames, n * sizeof(*frames));
	*ret_n = n;
	if (ret_symbolized)
		*ret_symbolized = e->symbolized;
}

/* Symbolizes a cache miss into tmp; strings may live in s->scratch. */
static int frames_miss(struct symbolizer *s, struct module *m, uint64_t addr, struct sym_frame *tmp, size_t *ret_n,
		       uint64_t *ret_group)
{
	size_t heap, grown;
	uint64_t now;
	bool cold;
	int r = 0;

	*ret_n = 0;
	switch (m->pub.kind) {
	case SYM_MOD_KERNEL:
		return kernel_frame(s, addr, tmp, ret_n);
	case SYM_MOD_ELF:
	case SYM_MOD_VDSO:
		cold = !module_is_open(m);
		r = sym_module_ready(s, m);
		if (r <= 0)
			return r;
		sym_module_touch(s, m);
		/* What libdw allocates for m (its session, inflated sections, line
		 * tables and DIE caches) is measured as it grows, for the cap. */
		heap = heap_in_use();
		r = dwarf_symbolize(m, addr, s->scratch, tmp, SYM_MAX_INLINE, ret_n, ret_group);
		grown = heap_in_use();
		if (grown > heap && lru_linked(&m->open_link)) {
			m->heap_bytes += grown - heap;
			s->open_heap += grown - heap;
		}
		sym_module_sync(s, m);
		sym_enforce_open_caps(s, m);
		/* Drop the file pages lookups touched once a second, or as soon as
		 * they add up to RELEASE_FILE_BYTES: a burst of first lookups (a
		 * start-up, new binaries) must not pile up. */
		now = clock_mono_ns();
		if (cold)
			module_release_pages(m); /* an open reads the most: headers, symbol tables */
		if (now - s->released_ns >= RELEASE_INTERVAL_NS)
			symbolizer_release_pages(s);
		else if (now - s->checked_ns >= RELEASE_CHECK_NS) {
			s->checked_ns = now;
			if (sym_file_resident_bytes() > s->released_file_bytes + RELEASE_FILE_BYTES)
				symbolizer_release_pages(s);
		}
		return r;
	case SYM_MOD_ANON:
		break;
	}
	return 0;
}

/* C++ and Rust linkage names become readable ones (libiberty's demangler); the
 * linkage name stays as the frame's system name. */
static int demangle_frames(struct symbolizer *s, struct sym_frame *f, size_t n)
{
	if (s->demangle == SYM_DEMANGLE_NONE)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char *d;
		int r;

		if (!f[i].function || !sym_is_mangled(f[i].function) ||
		    !(d = sym_demangle(f[i].function, (enum sym_demangle)s->demangle)))
			continue;
		f[i].system_name = f[i].function;
		r = intern_cstr(s->scratch, d, &f[i].function);
		free(d);
		if (r < 0)
			return r;
	}
	return 0;
}

int symbolizer_frames(struct symbolizer *s, const struct sym_module *mod, uint64_t addr, struct sym_frame *frames,
		      size_t max, size_t *ret_n, bool *ret_symbolized)
{
	struct sym_frame tmp[SYM_MAX_INLINE];
	const struct fc_entry *e;
	struct module *m;
	size_t n = 0;
	uint64_t group = UINT64_MAX;
	bool ok;
	int r;

	if (!s || !mod || !frames || !max || !ret_n)
		return -EINVAL;
	m = module_of(mod);
	e = frame_cache_get(&s->frames, mod->id, addr);
	if (e) {
		s->st.frame_hits++;
		copy_out(e, frames, max, ret_n, ret_symbolized);
		return 0;
	}
	s->st.frame_misses++;

	intern_clear(s->scratch);
	r = frames_miss(s, m, addr, tmp, &n, &group);
	if (r == 0)
		r = demangle_frames(s, tmp, n);
	if (r < 0)
		return r;
	ok = n > 0;
	if (!ok) {
		tmp[0] = (struct sym_frame){ 0 };
		n = 1;
	}
	if (!tmp[0].function) {
		/* Nothing named it: "<module>+0x<file offset>" of the start of the
		 * function's FDE when one covers it (one row per function), keeping
		 * any line. The location keeps the exact address. */
		char name[PATH_MAX + 32];

		snprintf(name, sizeof(name), "%s+0x%" PRIx64, mod->name,
			 module_file_offset(m, group != UINT64_MAX ? group : addr));
		r = intern_cstr(s->scratch, name, &tmp[0].function);
		if (r < 0)
			return r;
	}
	/* The entry owns copies of the strings; the scratch table is reused. */
	r = frame_cache_put(&s->frames, mod->id, addr, tmp, n, ok, &e);
	if (r < 0)
		return r;
	copy_out(e, frames, max, ret_n, ret_symbolized);
	return 0;
}

/* ---- lifetime ---- */

static uint32_t opt_or(uint32_t v, uint32_t def)
{
	return v ? v : def;
}

int symbolizer_new(const struct symbolizer_opts *opts, struct symbolizer **ret)
{
	const struct symbolizer_opts none = { 0 };
	const char *proc_root, *kallsyms;
	struct symbolizer *s;
	int r = -ENOMEM;

	if (!ret)
		return -EINVAL;
	if (!opts)
		opts = &none;
	proc_root = opts->proc_root ? opts->proc_root : "/proc";
	kallsyms = opts->kallsyms ? opts->kallsyms : "/proc/kallsyms";
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EIO;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	lru_init(&s->live);
	lru_init(&s->gone);
	lru_init(&s->open);
	frame_cache_init(&s->frames, opt_or(opts->max_cached_frames, DEFAULT_MAX_CACHED_FRAMES));
	s->max_modules = opt_or(opts->max_modules, DEFAULT_MAX_MODULES);
	s->max_module_heap = opts->max_module_heap ? opts->max_module_heap : DEFAULT_MAX_MODULE_HEAP;
	s->max_processes = opt_or(opts->max_processes, DEFAULT_MAX_PROCESSES);
	s->max_gone = opt_or(opts->max_gone_pids, DEFAULT_MAX_GONE_PIDS);
	s->perfmaps.max_bytes = opts->perfmap_max_bytes;
	s->proc_root = strdup(proc_root);
	s->kallsyms_path = strdup(kallsyms);
	s->scratch = intern_new();
	s->keys = intern_new();
	s->objs = opts->objects ? objcache_ref(opts->objects) : objcache_shared();
	s->demangle = opts->demangle;
	if (!s->proc_root || !s->kallsyms_path || !s->scratch || !s->keys || !s->objs)
		goto fail;
	if (opts->inflate_dir && opts->inflate_max_bytes) {
		s->inflate.dir = strdup(opts->inflate_dir);
		if (!s->inflate.dir)
			goto fail;
		s->inflate.max = opts->inflate_max_bytes;
	}
	if (dbgd_enabled() && opts->debuginfod_cache) {
		const struct dbgd_opts dopts = {
			.cache_dir = opts->debuginfod_cache,
			.max_bytes = opts->debuginfod_cache_bytes,
			.miss_ttl_ns = opts->debuginfod_miss_ttl_ns,
			.fetch_timeout_ns = opts->debuginfod_timeout_ns,
		};

		/* Without its cache, debug files are only looked for locally. */
		r = dbgd_new(&dopts, &s->dbgd);
		if (r == -ENOMEM)
			goto fail;
	}
	r = module_new_plain(SYM_MOD_KERNEL, "[kernel.kallsyms]", "kernel", &s->kernel);
	if (r < 0)
		goto fail;
	if (strcmp(kallsyms, "/proc/kallsyms") == 0)
		r = kernel_build_id(s->kernel);
	if (r < 0) {
		module_free(s->kernel);
		goto fail;
	}
	r = sym_add_module(s, s->kernel);
	if (r < 0)
		goto fail;
	r = sym_plain_module(s, SYM_MOD_ANON, "[anon]", &s->anon);
	if (r < 0)
		goto fail;
	*ret = s;
	return 0;
fail:
	symbolizer_free(s);
	return r;
}

void symbolizer_free(struct symbolizer *s)
{
	struct lru_link *t;

	if (!s)
		return;
	while ((t = lru_tail(&s->live)))
		proc_drop(s, lru_entry(t, struct proc, link));
	while ((t = lru_tail(&s->gone)))
		proc_drop(s, lru_entry(t, struct proc, link));
	u64map_free(&s->procs);
	for (uint32_t i = 0; i < s->nmods; i++) {
		dwarf_ctx_free(s->mods[i]);
		module_free(s->mods[i]);
	}
	free(s->mods);
	u64map_free(&s->by_obj);
	objcache_unref(s->objs);
	free(s->by_key);
	intern_free(s->keys);
	intern_free(s->scratch);
	kallsyms_free(s->ksyms);
	frame_cache_free(&s->frames);
	free(s->proc_root);
	free(s->kallsyms_path);
	free(s->inflate.dir);
	dbgd_free(s->dbgd);
	free(s);
}

const struct sym_module *symbolizer_module(struct symbolizer *s, uint32_t id)
{
	return s && id >= 1 && id <= s->nmods ? &s->mods[id - 1]->pub : NULL;
}

int symbolizer_debuginfod_poll(struct symbolizer *s)
{
	char ids[32][OBJ_BUILD_ID_HEX];
	int changed = 0;
	size_t n;

	if (!s || !s->dbgd)
		return 0;
	while ((n = dbgd_take_arrived(s->dbgd, ids, 32)) > 0) {
		for (uint32_t i = 0; i < s->nmods; i++) {
			struct module *m = s->mods[i];

			if (m->pub.kind != SYM_MOD_ELF || !m->pub.build_id[0])
				continue;
			for (size_t k = 0; k < n; k++) {
				if (strcmp(m->pub.build_id, ids[k]) != 0)
					continue;
				/* Reopened on its next lookup, with the debug file now. */
				sym_close_module(s, m);
				m->dw_failed = false;
				m->reopen_failed = false;
				m->pub.debug_gen++;
				changed++;
			}
		}
	}
	if (changed) {
		/* Frames of those modules were cached without names. */
		uint32_t max = s->frames.max;

		frame_cache_free(&s->frames);
		frame_cache_init(&s->frames, max);
	}
	return changed;
}

int symbolizer_debuginfod_wait(struct symbolizer *s, uint64_t timeout_ns)
{
	if (!s || !s->dbgd)
		return 0;
	dbgd_wait_idle(s->dbgd, clock_mono_ns() + timeout_ns);
	return symbolizer_debuginfod_poll(s);
}

static size_t kallsyms_bytes(const struct kallsyms *k)
{
	return kallsyms_mem_bytes(k);
}

void symbolizer_get_stats(const struct symbolizer *s, struct symbolizer_stats *ret)
{
	struct objcache_stats os;
	size_t bytes = sizeof(*s);

	*ret = s->st;
	ret->modules = s->nmods;
	ret->processes = s->nlive;
	ret->gone_pids = s->ngone;
	ret->cached_frames = s->frames.count;
	ret->frame_evictions = s->frames.evictions;
	ret->open_modules = s->nopen;
	ret->inflated_bytes = s->inflate.used;
	ret->inflated_files = s->inflate.files;
	ret->inflate_fallbacks = s->inflate.fallbacks;
	ret->open_module_bytes = s->open_heap;
	bytes += s->open_heap;
	bytes += frame_cache_mem_bytes(&s->frames);
	bytes += s->proc_bytes + u64map_mem_bytes(&s->procs);
	bytes += s->mod_bytes + (size_t)s->mods_cap * sizeof(*s->mods) + (size_t)s->by_key_cap * sizeof(*s->by_key);
	bytes += intern_mem_bytes(s->keys) + intern_mem_bytes(s->scratch) + kallsyms_bytes(s->ksyms);
	objcache_get_stats(s->objs, &os);
	bytes += os.bytes + u64map_mem_bytes(&s->by_obj);
	ret->perfmap_bytes = s->perfmaps.bytes;
	ret->perfmap_symbols = s->perfmaps.symbols;
	ret->perfmaps = s->perfmaps.maps;
	ret->perfmap_dropped = s->perfmaps.dropped;
	ret->perfmap_bad_lines = s->perfmaps.bad_lines;
	bytes += s->perfmaps.bytes;
	if (s->dbgd) {
		struct dbgd_stats ds;

		dbgd_get_stats(s->dbgd, &ds);
		ret->debuginfod = true;
		ret->debuginfod_fetched = ds.fetched;
		ret->debuginfod_missed = ds.missed;
		ret->debuginfod_failed = ds.failed;
		ret->debuginfod_evicted = ds.evicted;
		ret->debuginfod_cache_bytes = ds.cache_bytes;
		ret->debuginfod_pending = ds.pending;
	}
	ret->mem_bytes = bytes;
	ret->objects_broken = os.broken;
}
