/* export_file.c: atomic file output: mkstemp beside the target, write, fsync,
 * rename, fsync the directory. Partial files are never left under the final name. */
#include "export_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct export_file {
	char *path;
	char *tmp;
	int fd;
};

int export_file_begin(const char *path, struct export_file **ret)
{
	struct export_file *f;
	struct stat st;
	int r;

	if (!path || !*path)
		return -EINVAL;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return -EISDIR;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->fd = -1;
	f->path = strdup(path);
	if (!f->path || asprintf(&f->tmp, "%s.prowl-tmp.XXXXXX", path) < 0) {
		f->tmp = NULL;
		r = -ENOMEM;
		goto fail;
	}
	f->fd = mkostemp(f->tmp, O_CLOEXEC);
	if (f->fd < 0) {
		r = -errno;
		goto fail;
	}
	fchmod(f->fd, 0644);
	*ret = f;
	return 0;
fail:
	free(f->tmp);
	f->tmp = NULL;
	export_file_abort(f);
	return r;
}

static void fsync_dir_of(const char *path)
{
	char *copy = strdup(path);
	int fd;

	if (!copy)
		return;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(copy);
}

int export_file_commit(struct export_file *f, const void *buf, size_t len)
{
	const char *p = buf;
	int r = 0;

	while (len > 0) {
		ssize_t n = write(f->fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			goto out;
		}
		p += n;
		len -= n;
	}
	if (fsync(f->fd) < 0 || close(f->fd) < 0) {
		r = -errno;
		f->fd = -1;
		goto out;
	}
	f->fd = -1;
	if (rename(f->tmp, f->path) < 0) {
		r = -errno;
		goto out;
	}
	free(f->tmp);
	f->tmp = NULL;
	fsync_dir_of(f->path);
out:
	export_file_abort(f);
	return r;
}

void export_file_abort(struct export_file *f)
{
	if (!f)
		return;
	if (f->fd >= 0)
		close(f->fd);
	if (f->tmp)
		unlink(f->tmp);
	free(f->tmp);
	free(f->path);
	free(f);
}

int export_file_write(const char *path, const void *buf, size_t len)
{
	struct export_file *f;
	int r = export_file_begin(path, &f);

	if (r < 0)
		return r;
	return export_file_commit(f, buf, len);
}
