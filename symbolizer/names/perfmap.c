/* perfmap.c: the perf map a JIT writes (/tmp/perf-PID.map, as the process sees it), read
 * incrementally as it grows, within a memory budget shared by all processes. */
#include "perfmap.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "escape.h"
#include "prowl_limits.h"
#include "log.h"
#include "trust.h"

#define DEF_MAX_BYTES (32ull << 20)
#define CHUNK         (64u << 10)
/* What one refresh reads at most: a map bigger than this (or one that grows
 * faster) is read on over the next refreshes, never in one long stall. */
#define MAX_READ      (16u << 20)
/* Entries that overlap an address are looked for this far back. */
#define OVERLAP_SCAN  32

struct pm_sym {
	uint64_t start;
	uint32_t size;
	uint32_t name; /* offset in names; later lines have larger offsets */
};

struct perfmap {
	struct pm_sym *v;
	size_t n, cap;
	size_t nsorted;          /* v[0..nsorted) is sorted; later entries wait for sort_tail() */
	bool tail_sorted;        /* v[nsorted..n) came in order */
	char *names;
	size_t names_len, names_cap;
	uint64_t bytes;          /* charged to the budget */
	uint64_t dev, ino, off;  /* the file read, and how far (to the end of its last whole line) */
	uint64_t checked_ns;
	uint64_t bad_lines;
	bool warned;
	bool skipping;           /* inside a line longer than a chunk, up to its '\n' */
	bool more;               /* the last refresh stopped at MAX_READ with more in the file */
};

static uint64_t pm_bytes(const struct perfmap *pm)
{
	return sizeof(*pm) + pm->cap * sizeof(*pm->v) + pm->names_cap;
}

static void charge(struct perfmap *pm, struct perfmap_budget *b)
{
	uint64_t now = pm_bytes(pm);

	b->bytes = b->bytes - pm->bytes + now;
	pm->bytes = now;
}

/* Drops every entry (the file was replaced or truncated). */
static void clear(struct perfmap *pm, struct perfmap_budget *b)
{
	b->symbols -= pm->n;
	free(pm->v);
	free(pm->names);
	pm->v = NULL;
	pm->names = NULL;
	pm->n = pm->nsorted = pm->cap = pm->names_len = pm->names_cap = 0;
	pm->tail_sorted = true;
	pm->off = 0;
	pm->skipping = false;
	charge(pm, b);
}

static int new_map(struct perfmap **ret, struct perfmap_budget *b)
{
	struct perfmap *pm = calloc(1, sizeof(*pm));

	if (!pm)
		return -ENOMEM;
	pm->tail_sorted = true;
	b->maps++;
	charge(pm, b);
	*ret = pm;
	return 0;
}

static bool parse_hex(const char **p, const char *end, uint64_t *ret)
{
	uint64_t v = 0;
	int digits = 0;

	if (end - *p > 2 && (*p)[0] == '0' && ((*p)[1] == 'x' || (*p)[1] == 'X'))
		*p += 2;
	for (; *p < end && digits <= 16; (*p)++, digits++) {
		char c = **p;
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

		if (d < 0)
			break;
		v = v << 4 | (uint64_t)d;
	}
	*ret = v;
	return digits > 0 && digits <= 16;
}

/* Grows what must hold one more entry and len name bytes, within the budget. */
static int reserve(struct perfmap *pm, struct perfmap_budget *b, size_t len)
{
	uint64_t max = b->max_bytes ? b->max_bytes : DEF_MAX_BYTES;
	size_t cap = pm->cap, ncap = pm->names_cap;
	uint64_t grow = 0;

	if (pm->n == cap)
		cap = cap ? 2 * cap : 256;
	while (pm->names_len + len > ncap)
		ncap = ncap ? 2 * ncap : 4096;
	grow = (cap - pm->cap) * sizeof(*pm->v) + (ncap - pm->names_cap);
	if (b->bytes + grow > max)
		return -ENOSPC;
	if (cap != pm->cap) {
		struct pm_sym *v = reallocarray(pm->v, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		pm->v = v;
		pm->cap = cap;
	}
	if (ncap != pm->names_cap) {
		char *v = realloc(pm->names, ncap);

		if (!v)
			return -ENOMEM;
		pm->names = v;
		pm->names_cap = ncap;
	}
	charge(pm, b);
	return 0;
}

/* One line without its '\n'. Returns 0, 1 when it is not an entry, -ENOSPC
 * when the budget is spent, -ENOMEM. */
static int parse_line(struct perfmap *pm, struct perfmap_budget *b, const char *p, const char *end)
{
	char name[3 * PROWL_NAME_MAX + 1];
	uint64_t start, size;
	size_t len;
	int r;

	if (end > p && end[-1] == '\r')
		end--;
	if (!parse_hex(&p, end, &start) || p >= end || *p != ' ')
		return 1;
	while (p < end && *p == ' ')
		p++;
	if (!parse_hex(&p, end, &size) || p >= end || *p != ' ')
		return 1;
	while (p < end && *p == ' ')
		p++;
	len = (size_t)(end - p);
	if (!len || size == 0 || size > UINT32_MAX || start + size < start || memchr(p, 0, len))
		return 1;
	len = utf8_cut(p, len, PROWL_NAME_MAX);
	/* Names go into profiles and terminals: valid UTF-8 (a JS name may be any
	 * Unicode), no control characters; an invalid byte grows to three. */
	len = utf8_text(p, len, name);
	len = utf8_cut(name, len, PROWL_NAME_MAX);
	name[len++] = 0;
	r = reserve(pm, b, len);
	if (r < 0)
		return r;
	if (pm->n > pm->nsorted && start < pm->v[pm->n - 1].start)
		pm->tail_sorted = false;
	pm->v[pm->n++] = (struct pm_sym){ .start = start, .size = (uint32_t)size, .name = (uint32_t)pm->names_len };
	memcpy(pm->names + pm->names_len, name, len);
	pm->names_len += len;
	b->symbols++;
	return 0;
}

static int cmp_sym(const void *a, const void *b)
{
	const struct pm_sym *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name;
}

/* Makes all of pm->v sorted again, in time linear in the entries plus the
 * sort of those added since the last call: the new entries are sorted among
 * themselves (when they did not come in order) and merged into the sorted ones
 * (when they do not all go after them). Every new entry was written after the
 * old ones (larger name offsets), so the order is the one a sort of the whole
 * array by (start, name) gives: the entry written last stays last. */
static void sort_tail(struct perfmap *pm)
{
	size_t ns = pm->nsorted, m = pm->n - ns;
	struct pm_sym *tail;

	if (!m)
		return;
	if (!pm->tail_sorted)
		qsort(pm->v + ns, m, sizeof(*pm->v), cmp_sym);
	if (ns && cmp_sym(&pm->v[ns - 1], &pm->v[ns]) > 0) {
		tail = malloc(m * sizeof(*tail));
		if (!tail) {
			qsort(pm->v, pm->n, sizeof(*pm->v), cmp_sym); /* no room for the merge */
		} else {
			size_t i = ns, j = m, k = pm->n;

			memcpy(tail, pm->v + ns, m * sizeof(*tail));
			/* From the back, the larger of the two runs' last entries. */
			while (j > 0) {
				if (i > 0 && cmp_sym(&pm->v[i - 1], &tail[j - 1]) > 0)
					pm->v[--k] = pm->v[--i];
				else
					pm->v[--k] = tail[--j];
			}
			free(tail);
		}
	}
	pm->nsorted = pm->n;
	pm->tail_sorted = true;
}

/* Appends the whole lines of buf to pm, unsorted; the bytes consumed or -ENOMEM. */
static long parse_text(struct perfmap *pm, const char *buf, size_t len, struct perfmap_budget *b)
{
	const char *p = buf, *end = buf + len, *nl;
	int r;

	while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
		r = parse_line(pm, b, p, nl);
		if (r == -ENOMEM)
			return r;
		if (r == -ENOSPC) {
			b->dropped++;
			if (!b->warned_full) {
				b->warned_full = true;
				log_warn("perf maps: the JIT symbols of all processes exceed the memory limit of %" PRIu64
					 " bytes; further JIT frames are [jit] (raise limits.perfmap_memory)",
					 (uint64_t)(b->max_bytes ? b->max_bytes : DEF_MAX_BYTES));
			}
		} else if (r == 1) {
			pm->bad_lines++;
			b->bad_lines++;
		}
		p = nl + 1;
	}
	return (long)(p - buf);
}

long perfmap_parse(struct perfmap **pmp, const char *buf, size_t len, struct perfmap_budget *b)
{
	long used;
	int r;

	if (!*pmp && (r = new_map(pmp, b)) < 0)
		return r;
	used = parse_text(*pmp, buf, len, b);
	sort_tail(*pmp);
	return used;
}

/* Opens /tmp/perf-NSPID.map as pid's mount namespace shows it, on behalf of
 * the process's user u (proc_open_own_file()): /tmp is looked up inside the
 * process's root (symbolic links resolve inside that root: an absolute link in
 * a container leads nowhere outside it), the map's own name is never followed. */
static int open_map(const char *proc_root, uint32_t pid, uint32_t nspid, const struct proc_user *u, struct stat *st)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	char path[64 + 4096];
	int root, dir, fd;

	snprintf(path, sizeof(path), "%s/%" PRIu32 "/root", proc_root, pid);
	root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	dir = (int)syscall(SYS_openat2, root, "tmp", &how, sizeof(how));
	close(root);
	if (dir < 0)
		return -errno;
	snprintf(path, sizeof(path), "perf-%" PRIu32 ".map", nspid);
	fd = proc_open_own_file(dir, path, u, st);
	close(dir);
	return fd;
}

/* One warning per process for a map that is there but not read. */
static void refused(struct perfmap_budget *b, uint32_t pid, uint32_t nspid, int err, const struct stat *st,
		    const struct proc_user *u)
{
	const char *why = proc_open_refusal(err);

	if (!why)
		return; /* no map (yet), or the process is gone */
	for (unsigned i = 0; i < PERFMAP_REFUSED_PIDS; i++)
		if (b->refused_pids[i] == pid)
			return;
	b->refused_pids[b->refused_next++ % PERFMAP_REFUSED_PIDS] = pid;
	if (err == -EPERM)
		log_warn("process %" PRIu32 ": its perf map /tmp/perf-%" PRIu32 ".map is not read: it is owned by uid "
			 "%" PRIu32 ", not the process's user (uid %" PRIu32 "); its JIT frames stay [jit]",
			 pid, nspid, (uint32_t)st->st_uid, u->euid);
	else
		log_warn("process %" PRIu32 ": its perf map /tmp/perf-%" PRIu32 ".map is not read: it %s; only a "
			 "regular file of the process's own user in its own /tmp is; its JIT frames stay [jit]",
			 pid, nspid, why);
}

int perfmap_refresh(struct perfmap **pmp, const char *proc_root, uint32_t pid, struct perfmap_budget *b,
		    uint64_t now_ns, uint64_t interval_ns)
{
	struct perfmap *pm = *pmp;
	struct proc_user u;
	uint32_t nspid;
	struct stat st = { 0 };
	char *buf = NULL;
	uint64_t off, dropped;
	int fd, r = 0;

	if (pm && now_ns - pm->checked_ns < interval_ns)
		return 0;
	if (pm)
		pm->checked_ns = now_ns;
	if (proc_user_read(proc_root, pid, &u, &nspid) < 0)
		return 0;
	/* Only the process's own user may name its code. */
	fd = open_map(proc_root, pid, nspid, &u, &st);
	if (fd < 0) {
		refused(b, pid, nspid, fd, &st, &u);
		return 0;
	}
	if (!pm) {
		r = new_map(pmp, b);
		if (r < 0)
			goto out;
		pm = *pmp;
		pm->checked_ns = now_ns;
	}
	if (pm->dev != (uint64_t)st.st_dev || pm->ino != (uint64_t)st.st_ino || (uint64_t)st.st_size < pm->off) {
		clear(pm, b);
		pm->dev = st.st_dev;
		pm->ino = st.st_ino;
	}
	buf = malloc(CHUNK);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	/* Appended lines only; a line still being written is read next time.
	 * A chunk whose entries did not all fit in the budget ends this refresh
	 * (the rest would only be dropped); the next one tries again, so once a
	 * map gives memory back the rest is read at once. */
	off = pm->off;
	dropped = b->dropped;
	while (off - pm->off < MAX_READ && b->dropped == dropped) {
		ssize_t n = pread(fd, buf, CHUNK, (off_t)off);
		const char *nl;
		long used;

		if (n <= 0)
			break;
		if (pm->skipping) {
			/* The rest of a line longer than a chunk. */
			nl = memchr(buf, '\n', (size_t)n);
			if (!nl) {
				off += (uint64_t)n;
				continue;
			}
			off += (uint64_t)(nl - buf) + 1;
			pm->skipping = false;
			pm->bad_lines++;
			b->bad_lines++;
			continue;
		}
		used = parse_text(pm, buf, (size_t)n, b);
		if (used < 0) {
			r = (int)used;
			break;
		}
		if (used == 0) {
			if ((size_t)n < CHUNK)
				break; /* a last line not written to its end yet */
			pm->skipping = true;
			continue;
		}
		off += (uint64_t)used;
	}
	sort_tail(pm);
	pm->more = off - pm->off >= MAX_READ && (uint64_t)st.st_size > off;
	pm->off = off;
	if (pm->bad_lines && !pm->warned) {
		pm->warned = true;
		log_warn("process %" PRIu32 ": %" PRIu64 " lines of its perf map /tmp/perf-%" PRIu32 ".map are not "
			 "'START SIZE NAME'; they are skipped", pid, pm->bad_lines, nspid);
	}
out:
	free(buf);
	close(fd);
	return r;
}

const char *perfmap_lookup(const struct perfmap *pm, uint64_t addr)
{
	size_t lo = 0, hi = pm ? pm->n : 0;
	const struct pm_sym *best = NULL;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (pm->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, k = 0; i > 0 && k < OVERLAP_SCAN; i--, k++) {
		const struct pm_sym *s = &pm->v[i - 1];

		if (addr - s->start < s->size && (!best || s->name > best->name))
			best = s;
	}
	return best ? pm->names + best->name : NULL;
}

uint64_t perfmap_checked_ns(const struct perfmap *pm)
{
	return pm ? pm->checked_ns : 0;
}

bool perfmap_more(const struct perfmap *pm)
{
	return pm && pm->more;
}

size_t perfmap_count(const struct perfmap *pm)
{
	return pm ? pm->n : 0;
}

void perfmap_free(struct perfmap *pm, struct perfmap_budget *b)
{
	if (!pm)
		return;
	clear(pm, b);
	b->bytes -= pm->bytes;
	b->maps--;
	free(pm);
}
