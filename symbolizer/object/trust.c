/* trust.c: which files prowl believes: owned by root and writable by nobody else, and for
 * mapped files the one the host sees at that path; a trusted walk for debug file paths;
 * the files a process's own user may have prowl read for it (perf maps). */
#include "trust.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"

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
 * walked); and one that anybody may search: a file found through it is read
 * for whichever process asks (debug files serve every process that maps the
 * object), so it must be one that every user could read (a debug link named
 * by a user's binary must not reach a file under root's 0700 directory). */
static bool dir_trusted(const struct stat *st)
{
	return S_ISDIR(st->st_mode) && owner_ok(st->st_uid) && (st->st_mode & S_IXOTH) &&
	       (!(st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_mode & S_ISVTX));
}

/* A file that every user may read, and only root (or prowl's user) change. */
static bool file_for_anyone(const struct stat *st)
{
	return S_ISREG(st->st_mode) && obj_owner_trusted(st->st_uid, st->st_mode) && (st->st_mode & S_IROTH);
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
	if (!found || !file_for_anyone(&st)) {
		r = -EPERM;
		goto out;
	}
	/* The file itself, checked to be the entry just examined. */
	fd = openat(dir, comp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	if (fstat(fd, &dst) < 0 || dst.st_dev != st.st_dev || dst.st_ino != st.st_ino || !file_for_anyone(&dst)) {
		close(fd);
		r = -EPERM;
		goto out;
	}
	*ret = (struct obj_file){
		.fd = fd,
		.ident = { .dev = dst.st_dev, .ino = dst.st_ino, .size = (uint64_t)dst.st_size,
			   .mtime_ns = timespec_ns(&dst.st_mtim),
			   .uid = dst.st_uid, .mode = dst.st_mode, .trusted = true },
	};
	r = 0;
out:
	if (dir >= 0)
		close(dir);
	return r;
}

/* ---- files opened on a process's behalf ---- */

int proc_user_read(const char *proc_root, uint32_t pid, struct proc_user *ret, uint32_t *ret_nspid)
{
	char path[64 + PATH_MAX], line[512];
	bool uid_found = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%" PRIu32 "/status", proc_root, pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (ret_nspid)
		*ret_nspid = pid;
	while (fgets(line, sizeof(line), f)) {
		unsigned long v[2];

		if (ret_nspid && strncmp(line, "NSpid:", 6) == 0) {
			char *tok, *save = NULL;

			for (tok = strtok_r(line + 6, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
				*ret_nspid = (uint32_t)strtoul(tok, NULL, 10);
		} else if (sscanf(line, "Uid: %lu %lu", &v[0], &v[1]) == 2) {
			ret->ruid = (uint32_t)v[0];
			ret->euid = (uint32_t)v[1];
			uid_found = true;
		}
	}
	fclose(f);
	return uid_found ? 0 : -EIO;
}

bool proc_user_owns(const struct proc_user *u, uint32_t uid)
{
	if (uid == 0)
		return u->ruid == 0 && u->euid == 0;
	return uid == u->ruid || uid == u->euid;
}

/* The mount id of what fd names: statx() (Linux 5.8), else /proc/self/fdinfo. */
static int mount_id(int fd, uint64_t *ret)
{
	struct statx stx;
	char path[64], line[128];
	FILE *f;
	int r = -ENOTSUP;

	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) == 0 &&
	    (stx.stx_mask & STATX_MNT_ID)) {
		*ret = stx.stx_mnt_id;
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;

		if (sscanf(line, "mnt_id: %llu", &v) == 1) {
			*ret = v;
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}

/* Whether the entry open at fd (O_PATH), with *st, may be read for user u
 * from the directory dirfd. */
static int own_file_check(int dirfd, int fd, const struct stat *st, const struct proc_user *u)
{
	struct stat dst;
	uint64_t dmnt, fmnt;
	int r;

	if (S_ISLNK(st->st_mode))
		return -ELOOP;
	if (fstat(dirfd, &dst) < 0)
		return -errno;
	if (st->st_dev != dst.st_dev)
		return -EXDEV;
	r = mount_id(dirfd, &dmnt);
	if (r == 0)
		r = mount_id(fd, &fmnt);
	if (r < 0)
		return r;
	if (dmnt != fmnt)
		return -EXDEV;
	if (!S_ISREG(st->st_mode))
		return -EINVAL;
	if (st->st_nlink != 1)
		return -EMLINK;
	if (!proc_user_owns(u, st->st_uid))
		return -EPERM;
	return 0;
}

int proc_open_own_file(int dirfd, const char *name, const struct proc_user *u, struct stat *st)
{
	/* RESOLVE_NO_XDEV refuses a mount over the name itself; the mount id
	 * comparison below says the same where the kernel lacks it. */
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	char path[64];
	struct stat rst;
	int fd, rfd, r;

	if (!name || !*name || strchr(name, '/'))
		return -EINVAL;
	fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
	if (fd < 0)
		return -errno;
	r = fstat(fd, st) < 0 ? -errno : own_file_check(dirfd, fd, st, u);
	if (r < 0) {
		close(fd);
		return r;
	}
	/* The same inode, now for reading (a magic link of our own descriptor). */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rfd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	r = rfd < 0 ? -errno : 0;
	close(fd);
	if (r == 0 && (fstat(rfd, &rst) < 0 || rst.st_dev != st->st_dev || rst.st_ino != st->st_ino))
		r = -ESTALE;
	if (r < 0) {
		if (rfd >= 0)
			close(rfd);
		return r;
	}
	*st = rst;
	return rfd;
}

const char *proc_open_refusal(int err)
{
	switch (err) {
	case -ELOOP:
		return "is a symbolic link";
	case -EXDEV:
		return "is another mount (a file mounted over it) or on another device than its directory";
	case -EINVAL:
		return "is not a regular file";
	case -EMLINK:
		return "has more than one link (a hard link can be another file's name)";
	case -EPERM:
		return "is not owned by the process's user";
	default:
		return NULL;
	}
}
