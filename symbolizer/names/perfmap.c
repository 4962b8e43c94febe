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

#include "log.h"
#include "escape.h"

#define DEF_MAX_BYTES (32ull << 20)
#define MAX_NAME      1024
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
	char *names;
	size_t names_len, names_cap;
	uint64_t bytes;          /* charged to the budget */
	uint64_t dev, ino, off;  /* the file read, and how far (to the end of its last whole line) */
	uint64_t checked_ns;
	uint64_t bad_lines;
	bool sorted, warned;
	bool skipping;           /* inside a line longer than a chunk, up to its '\n' */
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
	pm->n = pm->cap = pm->names_len = pm->names_cap = 0;
	pm->off = 0;
	pm->skipping = false;
	charge(pm, b);
}

static int new_map(struct perfmap **ret, struct perfmap_budget *b)
{
	struct perfmap *pm = calloc(1, sizeof(*pm));

	if (!pm)
		return -ENOMEM;
	pm->sorted = true;
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
	char name[3 * MAX_NAME + 1];
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
	if (len > MAX_NAME)
		len = MAX_NAME;
	/* Names go into profiles and terminals: valid UTF-8 (a JS name may be any
	 * Unicode), no control characters. */
	len = utf8_text(p, len, name);
	name[len++] = 0;
	r = reserve(pm, b, len);
	if (r < 0)
		return r;
	if (pm->n && start < pm->v[pm->n - 1].start)
		pm->sorted = false;
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

long perfmap_parse(struct perfmap **pmp, const char *buf, size_t len, struct perfmap_budget *b)
{
	const char *p = buf, *end = buf + len, *nl;
	struct perfmap *pm;
	int r;

	if (!*pmp && (r = new_map(pmp, b)) < 0)
		return r;
	pm = *pmp;
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
	if (!pm->sorted && pm->n > 1) {
		qsort(pm->v, pm->n, sizeof(*pm->v), cmp_sym);
		pm->sorted = true;
	}
	return (long)(p - buf);
}

/* pid's pid in its own namespace (the last NSpid field) and its effective uid. */
static int read_status(const char *proc_root, uint32_t pid, uint32_t *ret_nspid, uint32_t *ret_uid)
{
	char path[64 + 4096], line[512];
	bool uid_found = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%" PRIu32 "/status", proc_root, pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	*ret_nspid = pid;
	while (fgets(line, sizeof(line), f)) {
		unsigned long v[2];

		if (strncmp(line, "NSpid:", 6) == 0) {
			char *s = line + 6, *tok, *save = NULL;

			for (tok = strtok_r(s, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
				*ret_nspid = (uint32_t)strtoul(tok, NULL, 10);
		} else if (sscanf(line, "Uid: %lu %lu", &v[0], &v[1]) == 2) {
			*ret_uid = (uint32_t)v[1];
			uid_found = true;
		}
	}
	fclose(f);
	return uid_found ? 0 : -EIO;
}

/* Opens /tmp/perf-NSPID.map inside pid's root: symbolic links resolve inside
 * that root (an absolute link in a container leads nowhere outside it). Only a
 * regular file owned by the process's user (or root) is opened for reading: the
 * path is first opened O_PATH, which has no effect on what it names, so a link
 * to a device (a watchdog, a tape) is never opened for real. */
static int open_map(const char *proc_root, uint32_t pid, uint32_t nspid, uint32_t uid, struct stat *st)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	char path[64 + 4096];
	int root, fd, rfd;

	snprintf(path, sizeof(path), "%s/%" PRIu32 "/root", proc_root, pid);
	root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	snprintf(path, sizeof(path), "tmp/perf-%" PRIu32 ".map", nspid);
	fd = (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
	close(root);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode) || (st->st_uid != uid && st->st_uid != 0)) {
		close(fd);
		return -EPERM;
	}
	/* The same inode, now for reading (a magic link of our own descriptor). */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rfd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	close(fd);
	if (rfd < 0)
		return -errno;
	return rfd;
}

int perfmap_refresh(struct perfmap **pmp, const char *proc_root, uint32_t pid, struct perfmap_budget *b,
		    uint64_t now_ns, uint64_t interval_ns)
{
	struct perfmap *pm = *pmp;
	uint32_t nspid, uid = 0;
	struct stat st;
	char *buf = NULL;
	uint64_t off;
	int fd, r = 0;

	if (pm && now_ns - pm->checked_ns < interval_ns)
		return 0;
	if (pm)
		pm->checked_ns = now_ns;
	if (read_status(proc_root, pid, &nspid, &uid) < 0)
		return 0;
	/* Only the process's own user (or root) may name its code. */
	fd = open_map(proc_root, pid, nspid, uid, &st);
	if (fd < 0)
		return 0;
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
	/* Appended lines only; a line still being written is read next time. */
	off = pm->off;
	while (off - pm->off < MAX_READ) {
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
		used = perfmap_parse(pmp, buf, (size_t)n, b);
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
		if (b->warned_full && b->dropped)
			break; /* over the budget: nothing more fits */
	}
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
