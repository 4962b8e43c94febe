/* trust.c: which files prowl believes: owned by root and writable by nobody else, and for
 * mapped files the one the host sees at that path; a trusted walk for debug file paths. */
#include "trust.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINKS 40 /* as the kernel's path walk */

static bool owner_ok(uint32_t uid)
{
	return uid == 0 || uid == (uint32_t)geteuid();
}

bool obj_owner_trusted(uint32_t uid, uint32_t mode)
{
	return owner_ok(uid) && !(mode & (S_IWGRP | S_IWOTH));
}

bool obj_trusted_ident(const struct obj_source *src, const struct obj_ident *id)
{
	char path[PATH_MAX * 2];
	struct stat st;

	if (!obj_owner_trusted(id->uid, id->mode))
		return false;
	if (!src->pid)
		return true;
	if (!src->path || src->path[0] != '/' ||
	    (size_t)snprintf(path, sizeof(path), "%s/1/root%s", src->proc_root, src->path) >= sizeof(path))
		return false;
	/* init's root directory is the host's; where prowl may not look at init
	 * (no ptrace access to it), its own root stands in. */
	if (stat(path, &st) < 0 && ((errno != EACCES && errno != EPERM) || stat(src->path, &st) < 0))
		return false;
	return (uint64_t)st.st_dev == id->dev && (uint64_t)st.st_ino == id->ino;
}

/* A directory whose entries only root (or prowl's user) can change: trusted by
 * owner, or sticky (then each entry must be trusted by owner, checked as it is
 * walked). */
static bool dir_trusted(const struct stat *st)
{
	return S_ISDIR(st->st_mode) && owner_ok(st->st_uid) &&
	       (!(st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_mode & S_ISVTX));
}

/* Moves to the next component of the path in buf at *pos: its start in
 * *ret (NUL-terminated in place); false at the end. */
static bool next_component(char *buf, size_t *pos, char **ret)
{
	char *p = buf + *pos, *end;

	while (*p == '/')
		p++;
	if (!*p)
		return false;
	end = strchrnul(p, '/');
	*pos = (size_t)(end - buf) + (*end ? 1 : 0);
	*end = 0;
	*ret = p;
	return true;
}

/* Puts link target t in front of what is left of buf after pos. */
static int splice_link(char *buf, size_t size, size_t *pos, const char *t)
{
	char rest[PATH_MAX];
	size_t lt = strlen(t);

	if ((size_t)snprintf(rest, sizeof(rest), "%s", buf + *pos) >= sizeof(rest) ||
	    lt + 1 + strlen(rest) + 1 > size)
		return -ENAMETOOLONG;
	memmove(buf, t, lt);
	buf[lt] = '/';
	strcpy(buf + lt + 1, rest);
	*pos = 0;
	return 0;
}

static int open_root(struct stat *st)
{
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0 || !dir_trusted(st)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

int obj_open_trusted(const char *path, struct obj_file *ret)
{
	char buf[PATH_MAX * 2], target[PATH_MAX], *comp = NULL;
	struct stat dst, st;
	bool found = false;
	size_t pos = 0;
	int dir, fd, links = 0, r;

	*ret = OBJ_FILE_NONE;
	if (!path || path[0] != '/')
		return -EINVAL;
	if ((size_t)snprintf(buf, sizeof(buf), "%s", path) >= sizeof(buf))
		return -ENAMETOOLONG;
	dir = open_root(&dst);
	if (dir < 0)
		return dir;
	while (next_component(buf, &pos, &comp)) {
		bool last = !buf[pos];

		if (!strcmp(comp, "."))
			continue;
		fd = openat(dir, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			r = -errno;
			goto out;
		}
		r = fstat(fd, &st) < 0 ? -errno : 0;
		/* In a directory others may write to (sticky), only entries of
		 * root's can be relied on to stay what they are. */
		if (r == 0 && (dst.st_mode & (S_IWGRP | S_IWOTH)) && !owner_ok(st.st_uid))
			r = -EPERM;
		if (r == 0 && S_ISLNK(st.st_mode)) {
			ssize_t n = readlinkat(fd, "", target, sizeof(target) - 1);

			close(fd);
			if (n < 0 || ++links > MAX_LINKS) {
				r = n < 0 ? -errno : -ELOOP;
				goto out;
			}
			target[n] = 0;
			r = splice_link(buf, sizeof(buf), &pos, target);
			if (r == 0 && target[0] == '/') {
				close(dir);
				dir = open_root(&dst);
				r = dir < 0 ? dir : 0;
			}
			if (r < 0)
				goto out;
			continue;
		}
		if (r == 0 && last) {
			close(fd);
			found = true;
			break;
		}
		if (r == 0 && !dir_trusted(&st))
			r = -EPERM;
		if (r < 0) {
			close(fd);
			goto out;
		}
		close(dir);
		dir = fd;
		dst = st;
	}
	if (!found || !S_ISREG(st.st_mode) || !obj_owner_trusted(st.st_uid, st.st_mode)) {
		r = -EPERM;
		goto out;
	}
	/* The file itself, checked to be the entry just examined. */
	fd = openat(dir, comp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	if (fstat(fd, &dst) < 0 || dst.st_dev != st.st_dev || dst.st_ino != st.st_ino ||
	    !obj_owner_trusted(dst.st_uid, dst.st_mode)) {
		close(fd);
		r = -EPERM;
		goto out;
	}
	*ret = (struct obj_file){
		.fd = fd,
		.ident = { .dev = dst.st_dev, .ino = dst.st_ino, .size = (uint64_t)dst.st_size,
			   .mtime_ns = (int64_t)dst.st_mtim.tv_sec * 1000000000 + dst.st_mtim.tv_nsec,
			   .uid = dst.st_uid, .mode = dst.st_mode, .trusted = true },
	};
	r = 0;
out:
	if (dir >= 0)
		close(dir);
	return r;
}
