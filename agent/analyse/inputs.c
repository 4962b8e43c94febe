/* inputs.c: reads profile files with a size bound, picks the agent's window files
 * by service and time (names first, then each profile's own time), and merges them. */
#include "analyse/inputs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "aggregate.h"
#include "analyse/timespec.h"
#include "clock.h"
#include "log.h"
#include "escape.h"

/* Dir mode names the first few unreadable files, then only counts them. */
#define MAX_SKIP_WARNINGS 5

static void set_err(struct input_set *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_err(struct input_set *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
}

/* Reads a regular file of at most PPROF_MAX_BYTES. O_NONBLOCK keeps a FIFO from
 * blocking the open; nofollow refuses symbolic links (directory mode). */
static int read_file(const char *path, bool nofollow, uint8_t **ret_buf, size_t *ret_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (nofollow ? O_NOFOLLOW : 0));
	uint8_t *buf = NULL;
	struct stat st;
	size_t off = 0;
	int r = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (S_ISDIR(st.st_mode) || !S_ISREG(st.st_mode)) {
		r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		goto out;
	}
	if ((uint64_t)st.st_size > PPROF_MAX_BYTES) {
		r = -EFBIG;
		goto out;
	}
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	while (off < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + off, (size_t)st.st_size - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO; /* shrank while we read */
			goto out;
		}
		off += (size_t)n;
	}
	*ret_buf = buf;
	*ret_len = off;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return r;
}

static const char *read_error(int r)
{
	switch (r) {
	case -EISDIR:
		return "it is a directory";
	case -EINVAL:
		return "it is not a regular file";
	case -EFBIG:
		return "it is larger than 256 MiB";
	case -ELOOP:
		return "it is a symbolic link";
	default:
		return strerror(-r);
	}
}

/* Keeps only the series labels that f has too, with the same value. */
static int intersect_labels(struct input_set *s, const struct pprof_msg *m, bool first)
{
	const char *l;
	size_t out = 0;

	if (first) {
		size_t n = 0;

		while (pprof_msg_series_label_at(m, n))
			n++;
		s->labels = calloc(n ? n : 1, sizeof(*s->labels));
		if (!s->labels)
			return -ENOMEM;
		for (size_t i = 0; (l = pprof_msg_series_label_at(m, i)); i++) {
			s->labels[i] = strdup(l);
			if (!s->labels[i])
				return -ENOMEM;
			s->nlabels++;
		}
		return 0;
	}
	for (size_t i = 0; i < s->nlabels; i++) {
		bool keep = false;

		for (size_t j = 0; (l = pprof_msg_series_label_at(m, j)) && !keep; j++)
			keep = strcmp(l, s->labels[i]) == 0;
		if (keep)
			s->labels[out++] = s->labels[i];
		else
			free(s->labels[i]);
	}
	s->nlabels = out;
	return 0;
}

/* Splits --label filters into "this file is not of that series" (false) and
 * the ones left for the samples. */
static bool file_selected(const struct pprof_msg *m, const struct input_opts *o, struct pprof_filter *ret_sample,
			  size_t *ret_n)
{
	*ret_n = 0;
	for (size_t i = 0; i < o->nfilters; i++) {
		const char *v = pprof_msg_series_label(m, o->filters[i].key);

		if (v && strcmp(v, o->filters[i].value) != 0)
			return false;
		if (!v)
			ret_sample[(*ret_n)++] = o->filters[i];
	}
	return true;
}

/* Merges one decoded file. Returns 1 when it was merged, 0 when the time range
 * or a series label left it out, or a negative errno with s->err set. */
static int merge_msg(struct input_set *s, const struct pprof_msg *m, const char *path, const struct input_opts *o)
{
	struct pprof_filter *sf = NULL;
	struct pprof_info info;
	uint64_t got = 0;
	size_t nsf;
	int r;

	pprof_msg_info(m, &info);
	if (o->dir && (info.time_nanos < o->from_ns || info.time_nanos >= o->to_ns))
		return 0;
	s->in_range++;
	sf = calloc(o->nfilters + 1, sizeof(*sf));
	if (!sf)
		return -ENOMEM;
	if (!file_selected(m, o, sf, &nsf)) {
		free(sf);
		return 0;
	}
	if (s->nfiles && strcmp(info.sample_types, s->types) != 0) {
		char a[256], b[256];

		set_err(s, "'%s' and '%s' have different sample types (%s vs %s): give profiles of one kind",
			s->first, path, printable(s->types, a, sizeof(a)), printable(info.sample_types, b, sizeof(b)));
		free(sf);
		return -EBADMSG;
	}
	if (s->nfiles && o->same_period && info.period != s->period) {
		set_err(s, "'%s' and '%s' were sampled at different periods (%" PRId64 " vs %" PRId64
			   " %s): merge them separately%s", s->first, path, s->period, info.period,
			info.period_type[0] ? info.period_type : "units", o->dir ? " (narrow --from/--to)" : "");
		free(sf);
		return -EBADMSG;
	}
	if (info.samples > (UINT64_C(1) << 60) - s->samples) {
		set_err(s, "'%s': the sample counts of the inputs add up to more than 2^60", path);
		free(sf);
		return -EOVERFLOW;
	}
	r = pprof_msg_merge(m, s->prof, sf, nsf, s->nfiles == 0, &got);
	free(sf);
	if (r < 0) {
		set_err(s, "cannot merge '%s': %s", path, strerror(-r));
		return r;
	}
	if (!s->nfiles) {
		snprintf(s->types, sizeof(s->types), "%s", info.sample_types);
		snprintf(s->value_type, sizeof(s->value_type), "%s", info.value_type);
		s->period = info.period;
		s->first = strdup(path);
		if (!s->first)
			return -ENOMEM;
		profile_set_period(s->prof, info.period);
	}
	r = intersect_labels(s, m, s->nfiles == 0);
	if (r < 0)
		return r;
	if (info.time_nanos > 0) {
		int64_t end = info.time_nanos + info.duration_nanos;

		if (!s->start_ns || info.time_nanos < s->start_ns)
			s->start_ns = info.time_nanos;
		if (end > s->end_ns)
			s->end_ns = end;
	}
	s->samples += got;
	s->nfiles++;
	return 1;
}

static int load_one(struct input_set *s, const char *path, const struct input_opts *o)
{
	struct pprof_msg *m = NULL;
	const char *why;
	uint8_t *buf = NULL;
	size_t len = 0;
	int r;

	r = read_file(path, o->dir != NULL, &buf, &len);
	if (r < 0) {
		set_err(s, "cannot read '%s': %s", path, read_error(r));
		return r == -ENOMEM ? r : -EIO;
	}
	r = pprof_decode(buf, len, &m, &why);
	free(buf);
	if (r < 0) {
		set_err(s, "'%s' is not a profile prowl can read: %s", path, why);
		return r == -ENOMEM ? r : -EBADMSG;
	}
	r = pprof_msg_select(m, o->sample_type, &why);
	if (r < 0) {
		set_err(s, "'%s': %s", path, why);
		pprof_msg_free(m);
		return -EBADMSG;
	}
	r = merge_msg(s, m, path, o);
	pprof_msg_free(m);
	return r;
}

static int ensure_profile(struct input_set *s)
{
	if (!s->prof)
		s->prof = profile_new();
	if (!s->prof) {
		set_err(s, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static void finish_time(struct input_set *s)
{
	if (s->start_ns)
		profile_set_time(s->prof, s->start_ns, s->end_ns - s->start_ns);
}

int inputs_load_files(struct input_set *s, char *const *paths, size_t n, const struct input_opts *o)
{
	int r = ensure_profile(s);

	for (size_t i = 0; i < n && r >= 0; i++)
		r = load_one(s, paths[i], o);
	if (r < 0)
		return r;
	finish_time(s);
	return 0;
}

/* Directory mode: the files' paths, sorted by name (their start time). */
struct path_list {
	char **v;
	size_t n, cap;
};

static int path_add(struct path_list *l, const char *dir, const char *name)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		char **v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	if (asprintf(&l->v[l->n], "%s/%s", dir, name) < 0)
		return -ENOMEM;
	l->n++;
	return 0;
}

static bool is_profile_name(const char *name)
{
	size_t n = strlen(name);

	return name[0] != '.' && n > 6 && strcmp(name + n - 6, ".pb.gz") == 0;
}

/* Adds DIR's *.pb.gz and, when deep, those of its sub-directories (services). */
static int scan_dir(struct path_list *l, const char *dir, bool deep)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	int r = 0;

	if (!dp)
		return -errno;
	while ((de = readdir(dp)) && r == 0) {
		char sub[4096];
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		if (is_profile_name(de->d_name)) {
			r = path_add(l, dir, de->d_name);
			continue;
		}
		if (!deep || snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name) >= (int)sizeof(sub))
			continue;
		if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
			r = scan_dir(l, sub, false);
			if (r == -EACCES || r == -ENOENT)
				r = 0;
		}
	}
	closedir(dp);
	return r;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

static int cmp_base(const void *a, const void *b)
{
	int c = strcmp(base_name(*(char *const *)a), base_name(*(char *const *)b));

	return c ? c : strcmp(*(char *const *)a, *(char *const *)b);
}

/* The window start the agent put in a file name, "20240501T100000.123Z-...": -1
 * when the name is not of that form. */
static int64_t name_time(const char *path)
{
	const char *b = base_name(path);
	struct tm tm = {};
	int ms;
	char z;

	if (sscanf(b, "%4d%2d%2dT%2d%2d%2d.%3d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
		   &tm.tm_sec, &ms, &z) != 8 || z != 'Z')
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm) * NSEC_PER_SEC + ms * NSEC_PER_MSEC;
}

static void no_files_error(struct input_set *s, const struct input_opts *o, const char *where, size_t nfiles)
{
	char from[64] = "the beginning", to[64] = "now";

	if (o->from_ns != INT64_MIN)
		time_format_local(o->from_ns, 0, from, sizeof(from));
	if (o->to_ns != INT64_MAX)
		time_format_local(o->to_ns, 0, to, sizeof(to));
	if (!nfiles)
		set_err(s, "no profiles in %s: point --dir at the agent's profile directory "
			   "(exporters.dir.path, by default /var/lib/prowl/profiles)", where);
	else if (!s->in_range)
		set_err(s, "none of the %zu profiles in %s starts between %s and %s: widen --from/--to",
			nfiles, where, from, to);
	else if (!s->nfiles)
		set_err(s, "none of the %zu profiles in %s from %s to %s is of a series with the given --label",
			s->in_range, where, from, to);
	else
		set_err(s, "no samples in the %zu profiles of %s from %s to %s match --label", s->nfiles, where, from, to);
}

int inputs_load_dir(struct input_set *s, const struct input_opts *o)
{
	struct path_list l = {};
	char where[4200];
	int r = ensure_profile(s);

	if (r < 0)
		return r;
	if (o->service && (strchr(o->service, '/') || strcmp(o->service, "..") == 0 || !*o->service)) {
		set_err(s, "invalid service name '%s'", o->service);
		return -EINVAL;
	}
	if (o->service)
		snprintf(where, sizeof(where), "%s/%s", o->dir, o->service);
	else
		snprintf(where, sizeof(where), "%s", o->dir);
	r = scan_dir(&l, where, !o->service);
	if (r < 0) {
		set_err(s, "cannot read directory '%s': %s%s", where, strerror(-r),
			o->service && r == -ENOENT ? ": no profiles of that service (its directory name is the service)" : "");
		goto out;
	}
	if (l.n > 1)
		qsort(l.v, l.n, sizeof(*l.v), cmp_base);
	for (size_t i = 0; i < l.n; i++) {
		int64_t t = name_time(l.v[i]);

		/* Names carry the start to the millisecond: a quick first cut. */
		if (t >= 0 && ((o->from_ns > INT64_MIN + NSEC_PER_SEC && t < o->from_ns - NSEC_PER_SEC) ||
			       (o->to_ns < INT64_MAX - NSEC_PER_SEC && t >= o->to_ns + NSEC_PER_SEC)))
			continue;
		r = load_one(s, l.v[i], o);
		if (r == -EIO || (r == -EBADMSG && strstr(s->err, "is not a profile"))) {
			/* One damaged window must not hide three hours of others. */
			if (s->nskipped++ < MAX_SKIP_WARNINGS)
				log_warn("skipping %s", s->err);
			r = 0;
		}
		if (r < 0)
			goto out;
	}
	if (s->nskipped > MAX_SKIP_WARNINGS)
		log_warn("skipped %zu unreadable files in all", s->nskipped);
	r = 0;
	if (!s->nfiles || !s->samples) {
		no_files_error(s, o, where, l.n);
		r = -ENOENT;
		goto out;
	}
	finish_time(s);
out:
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i]);
	free(l.v);
	return r;
}

void input_set_free(struct input_set *s)
{
	profile_free(s->prof);
	free(s->first);
	for (size_t i = 0; i < s->nlabels; i++)
		free(s->labels[i]);
	free(s->labels);
	*s = (struct input_set){};
}
