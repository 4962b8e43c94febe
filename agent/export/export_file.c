/* export_file.c: atomic file output: an unnamed O_TMPFILE file in the target's
 * directory, written, fsynced and linked under its name, so a killed writer leaves nothing. */
#include "export_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TMP_MARK       ".prowl-tmp."
#define STALE_AFTER_S  10 /* an unlocked named temporary this old is a dead writer's */

struct export_file {
	int dirfd;
	char *name;   /* in dirfd */
	char *tmp;    /* named temporary (fallback scheme), or NULL with O_TMPFILE */
	int fd;
	mode_t mode;
	unsigned int flags;
};

static bool no_tmpfile; /* test hook */

void export_file_test_no_tmpfile(bool on) { no_tmpfile = on; }

/* name + ".prowl-tmp." + 6 random letters, created exclusively and locked, so that
 * stale_cleanup() can tell a live writer's file from a dead one's. */
static int open_named_tmp(struct export_file *f)
{
	static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	size_t n = strlen(f->name) + sizeof(TMP_MARK) + 6;

	f->tmp = malloc(n);
	if (!f->tmp)
		return -ENOMEM;
	for (int tries = 0; tries < 100; tries++) {
		unsigned char rnd[6];
		char *p;

		if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
			for (size_t i = 0; i < sizeof(rnd); i++)
				rnd[i] = (unsigned char)(rand() ^ (int)clock());
		p = f->tmp + snprintf(f->tmp, n, "%s" TMP_MARK, f->name);
		for (size_t i = 0; i < sizeof(rnd); i++)
			*p++ = letters[rnd[i] % (sizeof(letters) - 1)];
		*p = 0;
		f->fd = openat(f->dirfd, f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (f->fd >= 0) {
			flock(f->fd, LOCK_EX | LOCK_NB);
			return 0;
		}
		if (errno != EEXIST)
			break;
	}
	free(f->tmp);
	f->tmp = NULL;
	return -errno;
}

/* Removes named temporaries of `name` left by writers that died: regular files of
 * ours, nobody holding their lock, not created a moment ago. */
static void stale_cleanup(int dirfd, const char *name)
{
	size_t plen = strlen(name) + strlen(TMP_MARK);
	time_t now = time(NULL);
	struct dirent *de;
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;

	if (!dp) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(dp))) {
		struct stat st;
		int tfd;

		if (strncmp(de->d_name, name, strlen(name)) != 0 || strncmp(de->d_name + strlen(name), TMP_MARK,
									      strlen(TMP_MARK)) != 0 ||
		    strlen(de->d_name) != plen + 6)
			continue;
		tfd = openat(dirfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (tfd < 0)
			continue;
		if (fstat(tfd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
		    now - st.st_mtime >= STALE_AFTER_S && flock(tfd, LOCK_EX | LOCK_NB) == 0)
			unlinkat(dirfd, de->d_name, 0);
		close(tfd);
	}
	closedir(dp);
}

int export_file_begin_at(int dirfd, const char *name, mode_t mode, unsigned int flags, struct export_file **ret)
{
	struct export_file *f;
	struct stat st;
	int r;

	if (!name || !*name || strchr(name, '/'))
		return -EINVAL;
	if (fstatat(dirfd, name, &st, 0) == 0 && S_ISDIR(st.st_mode))
		return -EISDIR;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->fd = -1;
	f->mode = mode;
	f->flags = flags;
	f->dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	f->name = strdup(name);
	if (f->dirfd < 0 || !f->name) {
		r = f->dirfd < 0 ? -errno : -ENOMEM;
		goto fail;
	}
	if (!no_tmpfile)
		f->fd = openat(f->dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	if (f->fd < 0) {
		/* EOPNOTSUPP (the file system has no O_TMPFILE), EISDIR/EINVAL (old
		 * kernels): a named temporary, and the stale ones of dead writers go. */
		if (!no_tmpfile && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
			r = -errno;
			goto fail;
		}
		stale_cleanup(f->dirfd, name);
		r = open_named_tmp(f);
		if (r < 0)
			goto fail;
	}
	*ret = f;
	return 0;
fail:
	export_file_abort(f);
	return r;
}

int export_file_begin(const char *path, struct export_file **ret)
{
	char *copy, *slash;
	int dirfd, r;

	if (!path || !*path)
		return -EINVAL;
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	slash = strrchr(copy, '/');
	if (slash && !slash[1]) {
		free(copy);
		return -EISDIR;
	}
	if (slash)
		*slash = 0;
	dirfd = open(slash ? (*copy ? copy : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		r = -errno;
		free(copy);
		return r;
	}
	r = export_file_begin_at(dirfd, slash ? slash + 1 : copy, 0644, 0, ret);
	close(dirfd);
	free(copy);
	return r;
}

/* Gives the unnamed file f->name. Without /proc, AT_EMPTY_PATH (which needs
 * CAP_DAC_READ_SEARCH) does the same. */
static int link_tmpfile(struct export_file *f, const char *name)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f->fd);
	if (linkat(AT_FDCWD, proc, f->dirfd, name, AT_SYMLINK_FOLLOW) == 0)
		return 0;
	if (errno != ENOENT)
		return -errno;
	return linkat(f->fd, "", f->dirfd, name, AT_EMPTY_PATH) == 0 ? 0 : -errno;
}

/* An existing target is replaced atomically: link under a temporary name, rename. */
static int link_replacing(struct export_file *f)
{
	int r = link_tmpfile(f, f->name);

	if (r != -EEXIST || (f->flags & EXPORT_FILE_NOREPLACE))
		return r;
	for (int tries = 0; tries < 100; tries++) {
		char tmp[4200];

		snprintf(tmp, sizeof(tmp), "%s" TMP_MARK "%06x", f->name, (unsigned)(rand() & 0xffffff));
		r = link_tmpfile(f, tmp);
		if (r == -EEXIST)
			continue;
		if (r < 0)
			return r;
		if (renameat(f->dirfd, tmp, f->dirfd, f->name) < 0) {
			r = -errno;
			unlinkat(f->dirfd, tmp, 0);
		}
		return r;
	}
	return -EEXIST;
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
		len -= (size_t)n;
	}
	if (fchmod(f->fd, f->mode) < 0 || fsync(f->fd) < 0) {
		r = -errno;
		goto out;
	}
	if (!f->tmp)
		r = link_replacing(f);
	else if (!(f->flags & EXPORT_FILE_NOREPLACE))
		r = renameat(f->dirfd, f->tmp, f->dirfd, f->name) < 0 ? -errno : 0;
	else if (linkat(f->dirfd, f->tmp, f->dirfd, f->name, 0) < 0)
		r = -errno;
	else
		unlinkat(f->dirfd, f->tmp, 0);
	if (r < 0)
		goto out;
	free(f->tmp); /* renamed or unlinked already: nothing to remove */
	f->tmp = NULL;
	fsync(f->dirfd);
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
		unlinkat(f->dirfd, f->tmp, 0);
	if (f->dirfd >= 0)
		close(f->dirfd);
	free(f->tmp);
	free(f->name);
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

int export_file_write_at(int dirfd, const char *name, mode_t mode, unsigned int flags, const void *buf, size_t len)
{
	struct export_file *f;
	int r = export_file_begin_at(dirfd, name, mode, flags, &f);

	if (r < 0)
		return r;
	return export_file_commit(f, buf, len);
}
