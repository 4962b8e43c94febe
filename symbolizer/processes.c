/* processes.c: the resolve stage's per-process tables: each process's executable
 * mappings from /proc/PID/maps, its main executable and perf map, LRU-capped. */
#include "symbolizer.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "clock.h"
#include "symbolizer_priv.h"

#define REREAD_INTERVAL_NS (200ull * 1000 * 1000)
/* An address outside every mapping re-reads the maps only when the process's
 * executable memory changed size (exec_vm), or at the latest this long after
 * the last read (a mapping replaced by one of the same size). */
#define REREAD_MAX_AGE_NS (30ull * 1000 * 1000 * 1000)
/* A gone pid is only worth remembering while it rate-limits retries. */
#define GONE_TTL_NS (10 * REREAD_INTERVAL_NS)

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
	uint64_t checked_ns; /* last look at exec_vm for an address outside the maps */
	uint64_t exec_vm;  /* VmExe + VmLib (KiB) when the maps were read */
	struct module *main_mod;
	struct perfmap *pm;     /* its JIT symbols; NULL while it has no perf map */
	uint64_t pm_checked_ns; /* last look for the perf map */
	bool main_done;
	bool gone;
};


static void maps_free(struct pmap *maps, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (maps[i].own_path)
			free((char *)maps[i].path);
	free(maps);
}

/* The size of pid's executable mappings (VmExe + VmLib of /proc/PID/status,
 * the kernel's exec_vm), in KiB; UINT64_MAX when it cannot be read. One
 * short read: far cheaper than the maps, whose reading it saves. */
static uint64_t exec_vm_kib(const struct symbolizer *s, uint32_t pid)
{
	char path[PATH_MAX], buf[4096];
	uint64_t sum = 0;
	const char *v;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%" PRIu32 "/status", s->proc_root, pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return UINT64_MAX;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return UINT64_MAX;
	buf[n] = 0;
	if ((v = strstr(buf, "\nVmExe:")))
		sum += strtoull(v + 7, NULL, 10);
	if ((v = strstr(buf, "\nVmLib:")))
		sum += strtoull(v + 7, NULL, 10);
	return sum;
}

static int read_maps(struct symbolizer *s, uint32_t pid, struct pmap **ret_maps, size_t *ret_n)
{
	struct procmaps pm = { 0 };
	struct pmap *maps = NULL;
	char path[PATH_MAX];
	int r;

	snprintf(path, sizeof(path), "%s/%" PRIu32 "/maps", s->proc_root, pid);
	s->st.maps_reads++;
	r = procmaps_read_exec(path, &pm);
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

	p->read_ns = p->checked_ns = clock_mono_ns();
	/* Before the maps: a mapping made in between shows in the next look. */
	p->exec_vm = exec_vm_kib(s, p->pid);
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

/* Whether an address outside p's maps calls for reading them again: at most
 * once per interval, and only when its executable memory changed (a frame
 * pointer walk through code without frame pointers gives such addresses in
 * every sample: the maps of a busy process were read 5 times a second). */
static bool maps_changed(struct symbolizer *s, struct proc *p)
{
	uint64_t now = clock_mono_ns();

	if (now - p->checked_ns < REREAD_INTERVAL_NS)
		return false;
	p->checked_ns = now;
	return now - p->read_ns >= REREAD_MAX_AGE_NS || p->exec_vm == UINT64_MAX ||
	       exec_vm_kib(s, p->pid) != p->exec_vm;
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
	if (!m && maps_changed(s, p)) {
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
	if (!name && (now - p->pm_checked_ns >= PERFMAP_INTERVAL_NS || perfmap_more(p->pm))) {
		/* A map that appeared late, grew since it was read, or was not read to its
		 * end by the last refresh (16 MiB each: the next at once). */
		p->pm_checked_ns = now;
		r = perfmap_refresh(&p->pm, s->proc_root, p->pid, &s->perfmaps, now, 0);
		if (r < 0)
			return r;
		name = perfmap_lookup(p->pm, a->addr);
	}
	if (!name)
		return 0;
	intern_clear(s->scratch);
	r = sym_intern_cstr(s->scratch, name, &ret->function);
	if (r == 0)
		r = sym_demangle_frame(s, ret);
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

void sym_procs_free(struct symbolizer *s)
{
	struct lru_link *t;

	while ((t = lru_tail(&s->live)))
		proc_drop(s, lru_entry(t, struct proc, link));
	while ((t = lru_tail(&s->gone)))
		proc_drop(s, lru_entry(t, struct proc, link));
	u64map_free(&s->procs);
}
