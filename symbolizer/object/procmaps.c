/* procmaps.c: /proc/PID/maps line parser ("start-end perms offset maj:min inode
 * path"), tolerant of spaces in paths and of the " (deleted)" suffix. */
#include "procmaps.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *parse_hex(const char *p, uint64_t *ret)
{
	uint64_t v = 0;
	const char *s = p;

	for (;; p++) {
		unsigned d;

		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else if (*p >= 'A' && *p <= 'F')
			d = (unsigned)(*p - 'A' + 10);
		else
			break;
		if (p - s >= 16)
			return NULL; /* overflow */
		v = v << 4 | d;
	}
	if (p == s)
		return NULL;
	*ret = v;
	return p;
}

static const char *parse_dec(const char *p, uint64_t *ret)
{
	uint64_t v = 0;
	const char *s = p;

	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return NULL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p == s)
		return NULL;
	*ret = v;
	return p;
}

static const char *skip_blank(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

int procmaps_parse_line(const char *line, struct pm_entry *ret)
{
	static const char deleted[] = " (deleted)";
	const char *p = line, *path;
	uint64_t maj, min;
	size_t len;

	memset(ret, 0, sizeof(*ret));
	p = parse_hex(p, &ret->start);
	if (!p || *p++ != '-')
		return -EINVAL;
	p = parse_hex(p, &ret->end);
	if (!p || *p++ != ' ' || ret->end <= ret->start)
		return -EINVAL;
	for (int i = 0; i < 4; i++, p++) {
		if (!*p || *p == ' ')
			return -EINVAL;
		ret->perms[i] = *p;
	}
	if (*p++ != ' ')
		return -EINVAL;
	p = parse_hex(p, &ret->offset);
	if (!p || *p++ != ' ')
		return -EINVAL;
	p = parse_hex(p, &maj);
	if (!p || *p++ != ':')
		return -EINVAL;
	p = parse_hex(p, &min);
	if (!p || *p++ != ' ' || maj > UINT32_MAX || min > UINT32_MAX)
		return -EINVAL;
	ret->dev_major = (uint32_t)maj;
	ret->dev_minor = (uint32_t)min;
	p = parse_dec(p, &ret->inode);
	if (!p || (*p && *p != ' ' && *p != '\t' && *p != '\n'))
		return -EINVAL;

	path = skip_blank(p);
	len = strcspn(path, "\n");
	if (len == 0) {
		ret->kind = PM_ANON;
		return 0;
	}
	if (len >= sizeof(deleted) - 1 &&
	    memcmp(path + len - (sizeof(deleted) - 1), deleted, sizeof(deleted) - 1) == 0) {
		ret->deleted = true;
		len -= sizeof(deleted) - 1;
	}
	if (path[0] == '[' && path[len - 1] == ']')
		ret->kind = len == 6 && memcmp(path, "[vdso]", 6) == 0 ? PM_VDSO : PM_SPECIAL;
	else
		ret->kind = PM_FILE;
	ret->path = strndup(path, len);
	if (!ret->path)
		return -ENOMEM;
	return 0;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct pm_entry *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int push(struct procmaps *m, const struct pm_entry *e)
{
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 32;
		struct pm_entry *v = realloc(m->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		m->v = v;
		m->cap = cap;
	}
	m->v[m->n++] = *e;
	return 0;
}

int procmaps_parse(FILE *f, unsigned flags, struct procmaps *ret, size_t *ret_bad)
{
	char *line = NULL;
	size_t linecap = 0, bad = 0, out;
	bool sorted = true;
	int r = 0;

	*ret = (struct procmaps){ 0 };
	for (;;) {
		struct pm_entry e;
		ssize_t len;

		errno = 0;
		len = getline(&line, &linecap, f);
		if (len < 0) {
			if (errno == ENOMEM)
				r = -ENOMEM;
			else if (ferror(f))
				r = errno ? -errno : -EIO;
			break;
		}
		if (len <= 1 && (len == 0 || line[0] == '\n'))
			continue;
		r = procmaps_parse_line(line, &e);
		if (r == -EINVAL) {
			bad++;
			r = 0;
			continue;
		}
		if (r < 0)
			break;
		if ((flags & PROCMAPS_EXEC_ONLY) && e.perms[2] != 'x') {
			free(e.path);
			continue;
		}
		if (ret->n && e.start < ret->v[ret->n - 1].start)
			sorted = false;
		r = push(ret, &e);
		if (r < 0) {
			free(e.path);
			break;
		}
	}
	free(line);
	if (r < 0) {
		procmaps_free(ret);
		return r;
	}
	if (!sorted)
		qsort(ret->v, ret->n, sizeof(*ret->v), cmp_entry);
	/* Drop entries overlapping their predecessor; real maps never overlap, so
	 * this only protects the binary search from malformed input. */
	out = 0;
	for (size_t i = 0; i < ret->n; i++) {
		if (out && ret->v[i].start < ret->v[out - 1].end) {
			free(ret->v[i].path);
			bad++;
			continue;
		}
		ret->v[out++] = ret->v[i];
	}
	ret->n = out;
	if (ret_bad)
		*ret_bad = bad;
	return 0;
}

int procmaps_parse_buf(const char *buf, size_t len, unsigned flags, struct procmaps *ret, size_t *ret_bad)
{
	FILE *f;
	int r;

	*ret = (struct procmaps){ 0 };
	if (len == 0) {
		if (ret_bad)
			*ret_bad = 0;
		return 0;
	}
	f = fmemopen((void *)buf, len, "r");
	if (!f)
		return -errno;
	r = procmaps_parse(f, flags, ret, ret_bad);
	fclose(f);
	return r;
}

const struct pm_entry *procmaps_find(const struct procmaps *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	/* Find the first entry with start > addr; its predecessor may contain addr. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || addr >= m->v[lo - 1].end)
		return NULL;
	return &m->v[lo - 1];
}

void procmaps_free(struct procmaps *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	*m = (struct procmaps){ 0 };
}
