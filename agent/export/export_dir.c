/* export_dir.c: writes each series of a window, its labels on every sample, to
 * <dir>/<service>/<time>-<hash>.pb.gz atomically, and prunes past the age or size limit. */
#include "export_dir.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "encode.h"
#include "export_file.h"
#include "intern.h"
#include "label_names.h"
#include "log.h"
#include "mkdir_p.h"

struct dir_file {
	char *path;
	int64_t mtime_ns;
	uint64_t size;
};

struct exporter_dir {
	struct exporter base;
	struct export_dir_opts o;
	char *root;
	int rootfd;             /* root, open: service directories are made and opened in it */
	struct dir_file *files; /* every file we know of, any order */
	size_t nfiles, cap;
	uint64_t total_bytes;
	struct export_stats st;
	uint64_t pruned;
};

static int track(struct exporter_dir *d, const char *path, int64_t mtime_ns, uint64_t size)
{
	if (d->nfiles == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 256;
		struct dir_file *f = realloc(d->files, cap * sizeof(*f));

		if (!f)
			return -ENOMEM;
		d->files = f;
		d->cap = cap;
	}
	d->files[d->nfiles].path = strdup(path);
	if (!d->files[d->nfiles].path)
		return -ENOMEM;
	d->files[d->nfiles].mtime_ns = mtime_ns;
	d->files[d->nfiles].size = size;
	d->nfiles++;
	d->total_bytes += size;
	return 0;
}

/* Learns what earlier runs left, so retention covers them too (two levels deep). */
static void scan(struct exporter_dir *d, const char *dir, int depth)
{
	DIR *dp = opendir(dir);
	struct dirent *de;

	if (!dp)
		return;
	while ((de = readdir(dp))) {
		char path[4096];
		struct stat st;
		size_t n = strlen(de->d_name);

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode) && depth == 0)
			scan(d, path, 1);
		else if (S_ISREG(st.st_mode) && n > 6 && strcmp(de->d_name + n - 6, ".pb.gz") == 0)
			track(d, path, timespec_ns(&st.st_mtim), st.st_size);
		else if (S_ISREG(st.st_mode) && strstr(de->d_name, ".prowl-tmp."))
			unlink(path); /* a temporary file of a run that crashed */
	}
	closedir(dp);
}

static int cmp_age(const void *a, const void *b)
{
	const struct dir_file *x = a, *y = b;

	return x->mtime_ns < y->mtime_ns ? -1 : x->mtime_ns > y->mtime_ns;
}

static void prune(struct exporter_dir *d, int64_t now_ns)
{
	size_t i = 0;

	if (d->nfiles > 1)
		qsort(d->files, d->nfiles, sizeof(*d->files), cmp_age);
	for (; i < d->nfiles; i++) {
		struct dir_file *f = &d->files[i];
		bool too_old = d->o.max_age_ns && now_ns - f->mtime_ns > (int64_t)d->o.max_age_ns;
		bool too_big = d->o.max_bytes && d->total_bytes > d->o.max_bytes;

		if (!too_old && !too_big)
			break;
		if (unlink(f->path) < 0 && errno != ENOENT)
			log_warn("dir: cannot remove old profile %s: %s", f->path, strerror(errno));
		d->total_bytes -= f->size;
		d->pruned++;
		free(f->path);
	}
	if (i && d->nfiles > i)
		memmove(d->files, d->files + i, (d->nfiles - i) * sizeof(*d->files));
	d->nfiles -= i;
}

/* The directory of one service, made 0700 under the root if missing, opened without
 * following a symbolic link, and refused unless it is a directory of prowl's own user
 * that nobody else may write: nothing put in the way makes the agent write elsewhere. */
static int open_service_dir(struct exporter_dir *d, const char *svc, int *ret_fd)
{
	struct stat st;
	int fd;

	if (mkdirat(d->rootfd, svc, 0700) < 0 && errno != EEXIST)
		return -errno;
	fd = openat(d->rootfd, svc, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP || errno == ENOTDIR ? -ENOTDIR : -errno;
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
		close(fd);
		return -EPERM;
	}
	if ((st.st_mode & 07777) != 0700)
		fchmod(fd, 0700);
	*ret_fd = fd;
	return 0;
}

/* A file-name-safe version of a label value. */
static void safe_name(char *dst, size_t n, const char *s)
{
	size_t i = 0;

	for (; *s && i + 1 < n; s++, i++) {
		bool ok = isalnum((unsigned char)*s) || *s == '-' || *s == '_' || (*s == '.' && i > 0);

		dst[i] = ok ? *s : '_';
	}
	dst[i] = 0;
	if (!i)
		snprintf(dst, n, "unknown");
}

static int dir_submit(struct exporter *e, const struct export_batch *b)
{
	struct exporter_dir *d = (struct exporter_dir *)e;
	time_t t = b->start_unix_ns / NSEC_PER_SEC;
	char stamp[48], svc[128], dir[4096], name[96], path[4400];
	struct tm tm;
	int ret = 0, dfd;

	gmtime_r(&t, &tm);
	/* Milliseconds too: a window ended by SIGHUP may start in the same second as the
	 * one before it, and must not overwrite its file. */
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
	snprintf(stamp + strlen(stamp), sizeof(stamp) - strlen(stamp), ".%03dZ",
		 (int)(b->start_unix_ns % NSEC_PER_SEC / NSEC_PER_MSEC));
	for (size_t i = 0; i < b->nseries; i++) {
		const struct export_series *s = &b->series[i];
		uint64_t h = 0;
		uint8_t *buf;
		size_t len;
		int r;

		for (size_t k = 0; k < s->nlabels; k++) {
			h = h * 31 + hash_bytes(s->labels[k].name, strlen(s->labels[k].name));
			h = h * 31 + hash_bytes(s->labels[k].value, strlen(s->labels[k].value));
		}
		safe_name(svc, sizeof(svc), export_series_label(s, LABEL_SERVICE_NAME) ?: "unknown");
		snprintf(dir, sizeof(dir), "%s/%s", d->root, svc);
		snprintf(name, sizeof(name), "%s-%08" PRIx32 ".pb.gz", stamp, (uint32_t)h);
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		dfd = -1;
		r = open_service_dir(d, svc, &dfd);
		if (r == 0)
			r = encode_pprof_labeled(s->prof, s->labels, s->nlabels, &buf, &len);
		if (r == 0) {
			r = export_file_write_at(dfd, name, 0600, 0, buf, len);
			free(buf);
		}
		if (dfd >= 0)
			close(dfd);
		if (r < 0) {
			d->st.failed++;
			ret = log_error_errno(r, "dir: cannot write %s", path);
			continue;
		}
		track(d, path, clock_wall_ns(), len);
		d->st.sent++;
		d->st.bytes_sent += len;
	}
	prune(d, clock_wall_ns());
	return ret;
}

static int dir_flush(struct exporter *e, uint32_t deadline_ms)
{
	(void)e;
	(void)deadline_ms;
	return 0; /* writes are synchronous */
}

static void dir_get_stats(struct exporter *e, struct export_stats *ret)
{
	struct exporter_dir *d = (struct exporter_dir *)e;

	*ret = d->st; /* writes are synchronous: nothing is ever queued */
	ret->kept_files = d->nfiles;
	ret->kept_bytes = d->total_bytes;
	ret->removed = d->pruned;
}

static void dir_free(struct exporter *e)
{
	struct exporter_dir *d = (struct exporter_dir *)e;

	if (!d)
		return;
	for (size_t i = 0; i < d->nfiles; i++)
		free(d->files[i].path);
	free(d->files);
	if (d->rootfd >= 0)
		close(d->rootfd);
	free(d->root);
	free(d->base.name);
	free(d);
}

static const struct exporter_ops dir_ops = {
	.kind = "dir",
	.submit = dir_submit,
	.flush = dir_flush,
	.get_stats = dir_get_stats,
	.free = dir_free,
};

int exporter_dir_new(const struct export_dir_opts *o, struct exporter **ret)
{
	struct exporter_dir *d = calloc(1, sizeof(*d));
	int r;

	if (!d)
		return -ENOMEM;
	d->rootfd = -1;
	d->base.ops = &dir_ops;
	d->o = *o;
	d->root = strdup(o->path);
	d->base.name = strdup("dir");
	if (!d->root || !d->base.name) {
		dir_free(&d->base);
		return -ENOMEM;
	}
	d->o.path = d->root;
	r = mkdir_p(d->root, 0700);
	if (r == 0 && access(d->root, W_OK) < 0)
		r = -errno;
	if (r == 0) {
		d->rootfd = open(d->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (d->rootfd < 0)
			r = -errno;
	}
	if (r < 0) {
		log_error("dir: cannot use profile directory %s: %s: set exporters.dir.path or state_dir to a writable directory",
			  d->root, strerror(-r));
		dir_free(&d->base);
		return r;
	}
	scan(d, d->root, 0);
	prune(d, clock_wall_ns());
	*ret = &d->base;
	return 0;
}
