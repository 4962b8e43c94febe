/* diskcache.c: the on-disk cache of content-derived products: one file per entry under a
 * 0700 directory, a checked header, writes by rename, least recently used out first. */
#include "diskcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>


#define DC_MAGIC "prowlc01"
#define DC_VERSION 1u
#define DC_SUFFIX ".pc"

struct dc_header {
	char magic[8];
	uint32_t version, pad;
	struct diskcache_key key;
	uint64_t len;
	uint32_t crc, pad2; /* zlib crc32 of the payload */
};

struct diskcache {
	pthread_mutex_t lock;
	int dirfd;
	uint64_t max_bytes;
	struct diskcache_stats st;
};

static bool owned_private(const struct stat *st, mode_t type)
{
	return (st->st_mode & S_IFMT) == type && st->st_uid == geteuid() && !(st->st_mode & 077);
}

/* The bytes of the entries in the directory (a scan: at open and eviction). */
struct dc_ent {
	char name[64];
	int64_t mtime_ns;
	uint64_t size;
};

static int scan(struct diskcache *c, struct dc_ent **ret, size_t *ret_n, uint64_t *ret_bytes)
{
	struct dc_ent *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t bytes = 0;
	struct dirent *de;
	int fd = dup(c->dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		struct stat st;

		if (l < sizeof(DC_SUFFIX) || l >= sizeof(v->name) || strcmp(de->d_name + l - 3, DC_SUFFIX) ||
		    fstatat(c->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		bytes += (uint64_t)st.st_size;
		if (!ret)
			continue;
		if (n == cap) {
			struct dc_ent *nv = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));

			if (!nv) {
				free(v);
				closedir(d);
				return -ENOMEM;
			}
			v = nv;
		}
		memcpy(v[n].name, de->d_name, l + 1);
		v[n].mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		v[n++].size = (uint64_t)st.st_size;
	}
	closedir(d);
	if (ret) {
		*ret = v;
		*ret_n = n;
	}
	*ret_bytes = bytes;
	return 0;
}

int diskcache_open(const char *dir, uint64_t max_bytes, struct diskcache **ret)
{
	struct diskcache *c;
	struct stat st;
	int fd, r;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP || errno == ENOTDIR ? -EPERM : -errno;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		close(fd);
		return -EPERM;
	}
	if ((st.st_mode & 077) && fchmod(fd, 0700) < 0) {
		close(fd);
		return -EPERM;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->dirfd = fd;
	c->max_bytes = max_bytes;
	r = scan(c, NULL, NULL, &c->st.bytes);
	if (r < 0) {
		diskcache_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

void diskcache_free(struct diskcache *c)
{
	if (!c)
		return;
	close(c->dirfd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* The entry's file name: a hash of the whole key (the header holds the key). */
static void entry_name(const struct diskcache_key *k, char *buf, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const unsigned char *p = (const unsigned char *)k;

	for (size_t i = 0; i < sizeof(*k); i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	snprintf(buf, len, "%u-%016" PRIx64 DC_SUFFIX, k->kind, h);
}

/* len bytes of fd from offset at. */
static int read_all(int fd, void *buf, size_t len, off_t at)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = pread(fd, (char *)buf + off, len - off, at + (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		off += (size_t)n;
	}
	return 0;
}

static void drop_entry(struct diskcache *c, const char *name, uint64_t size)
{
	if (unlinkat(c->dirfd, name, 0) == 0)
		c->st.bytes = c->st.bytes > size ? c->st.bytes - size : 0;
}

/* Removes k's entry, which failed a check, and counts it. */
static void entry_bad(struct diskcache *c, const struct diskcache_key *k)
{
	char name[64];
	struct stat st;

	entry_name(k, name, sizeof(name));
	c->st.corrupt++;
	drop_entry(c, name, fstatat(c->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? (uint64_t)st.st_size : 0);
}

/* Opens k's entry and checks what can be checked before its payload: owner,
 * mode, one link, the header (at the start, or a trailer at the end), its
 * length and the name its key hashes to. Under c's lock. 0 with *ret_fd and
 * *ret_h; -ENOENT: no entry of k (a miss); -EBADMSG: a bad entry, removed. */
static int entry_open(struct diskcache *c, const struct diskcache_key *k, bool trailer, int *ret_fd,
		      struct dc_header *ret_h)
{
	struct dc_header *h = ret_h;
	char name[64], hname[64];
	struct stat st;
	int fd;

	entry_name(k, name, sizeof(name));
	fd = openat(c->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		c->st.misses++;
		return -ENOENT;
	}
	if (fstat(fd, &st) < 0 || !owned_private(&st, S_IFREG) || st.st_nlink != 1 ||
	    (uint64_t)st.st_size < sizeof(*h) ||
	    pread(fd, h, sizeof(*h), trailer ? st.st_size - (off_t)sizeof(*h) : 0) != (ssize_t)sizeof(*h) ||
	    memcmp(h->magic, DC_MAGIC, sizeof(h->magic)) || h->version != DC_VERSION || h->len > c->max_bytes ||
	    (uint64_t)st.st_size != sizeof(*h) + h->len)
		goto bad;
	entry_name(&h->key, hname, sizeof(hname));
	if (strcmp(hname, name))
		goto bad; /* a key the file's name does not come from */
	if (memcmp(&h->key, k, sizeof(*k))) { /* another key with the same name hash */
		close(fd);
		c->st.misses++;
		return -ENOENT;
	}
	*ret_fd = fd;
	return 0;
bad:
	close(fd);
	entry_bad(c, k);
	return -EBADMSG;
}

int diskcache_get(struct diskcache *c, const struct diskcache_key *k, void **ret_data, size_t *ret_len)
{
	struct dc_header h;
	void *data;
	int fd, r;

	if (!c)
		return -ENOENT;
	pthread_mutex_lock(&c->lock);
	r = entry_open(c, k, false, &fd, &h);
	if (r < 0)
		goto out;
	data = malloc(h.len ? h.len : 1);
	if (!data) {
		close(fd);
		r = -ENOMEM;
		goto out;
	}
	if (read_all(fd, data, h.len, sizeof(h)) < 0 || (uint32_t)crc32(0, data, (uInt)h.len) != h.crc) {
		free(data);
		close(fd);
		entry_bad(c, k);
		r = -ENOENT;
		goto out;
	}
	futimens(fd, NULL); /* recently used */
	close(fd);
	c->st.hits++;
	*ret_data = data;
	*ret_len = h.len;
out:
	pthread_mutex_unlock(&c->lock);
	return r == -EBADMSG ? -ENOENT : r;
}

static void evict(struct diskcache *c);

/* crc32 of fd's first len bytes. */
static int crc_of(int fd, uint64_t len, uint32_t *ret)
{
	static __thread char buf[1 << 16];
	uLong crc = crc32(0, NULL, 0);

	for (uint64_t off = 0; off < len;) {
		size_t want = len - off < sizeof(buf) ? (size_t)(len - off) : sizeof(buf);
		ssize_t n = pread(fd, buf, want, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		crc = crc32(crc, (const Bytef *)buf, (uInt)n);
		off += (uint64_t)n;
	}
	*ret = (uint32_t)crc;
	return 0;
}

int diskcache_open_file(struct diskcache *c, const struct diskcache_key *k)
{
	struct dc_header h;
	uint32_t crc;
	int fd, r;

	if (!c)
		return -ENOENT;
	pthread_mutex_lock(&c->lock);
	/* A trailer: the file's bytes come first, as they are mapped. */
	r = entry_open(c, k, true, &fd, &h);
	if (r == 0 && (crc_of(fd, h.len, &crc) < 0 || crc != h.crc)) {
		close(fd);
		entry_bad(c, k);
		r = -ENOENT;
	}
	if (r == 0) {
		futimens(fd, NULL);
		c->st.hits++;
	}
	pthread_mutex_unlock(&c->lock);
	return r < 0 ? -ENOENT : fd;
}

int diskcache_keep_file(struct diskcache *c, const struct diskcache_key *k, int fd)
{
	struct dc_header h = { .version = DC_VERSION, .key = *k };
	char name[64], tmp[96], proc[64];
	struct stat st;
	uint64_t old = 0;
	int r = 0;

	if (!c)
		return -EINVAL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 0)
		return -EINVAL; /* only an unnamed file of prowl's own */
	if ((uint64_t)st.st_size + sizeof(h) > c->max_bytes)
		return -EFBIG;
	memcpy(h.magic, DC_MAGIC, sizeof(h.magic));
	h.len = (uint64_t)st.st_size;
	r = crc_of(fd, h.len, &h.crc);
	if (r < 0)
		return r;
	if (pwrite(fd, &h, sizeof(h), (off_t)h.len) != (ssize_t)sizeof(h))
		return errno ? -errno : -EIO;
	entry_name(k, name, sizeof(name));
	snprintf(tmp, sizeof(tmp), "tmp.%d.%s", (int)getpid(), name);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	pthread_mutex_lock(&c->lock);
	unlinkat(c->dirfd, tmp, 0);
	if (fchmod(fd, 0600) < 0 || linkat(AT_FDCWD, proc, c->dirfd, tmp, AT_SYMLINK_FOLLOW) < 0) {
		r = -errno;
		goto out;
	}
	if (fstatat(c->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		old = (uint64_t)st.st_size;
	if (renameat(c->dirfd, tmp, c->dirfd, name) < 0) {
		r = -errno;
		unlinkat(c->dirfd, tmp, 0);
		goto out;
	}
	c->st.stores++;
	c->st.bytes = c->st.bytes - (old < c->st.bytes ? old : c->st.bytes) + sizeof(h) + h.len;
	if (c->st.bytes > c->max_bytes)
		evict(c);
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int cmp_mtime(const void *a, const void *b)
{
	const struct dc_ent *x = a, *y = b;

	return x->mtime_ns < y->mtime_ns ? -1 : x->mtime_ns > y->mtime_ns;
}

/* Removes the least recently used entries until the cache is below 7/8 of its bound. */
static void evict(struct diskcache *c)
{
	struct dc_ent *v;
	size_t n;
	uint64_t bytes;

	if (scan(c, &v, &n, &bytes) < 0)
		return;
	c->st.bytes = bytes;
	qsort(v, n, sizeof(*v), cmp_mtime);
	for (size_t i = 0; i < n && c->st.bytes > c->max_bytes / 8 * 7; i++) {
		drop_entry(c, v[i].name, v[i].size);
		c->st.evicted++;
	}
	free(v);
}

int diskcache_put(struct diskcache *c, const struct diskcache_key *k, const void *data, size_t len)
{
	struct dc_header h = { .version = DC_VERSION, .key = *k, .len = len };
	char name[64], tmp[96];
	uint64_t old = 0;
	struct stat st;
	int fd, r = 0;

	if (!c)
		return -EINVAL;
	if (sizeof(h) + len > c->max_bytes)
		return -EFBIG;
	memcpy(h.magic, DC_MAGIC, sizeof(h.magic));
	h.crc = (uint32_t)crc32(0, data, (uInt)len);
	entry_name(k, name, sizeof(name));
	snprintf(tmp, sizeof(tmp), "tmp.%d.%s", (int)getpid(), name);
	pthread_mutex_lock(&c->lock);
	unlinkat(c->dirfd, tmp, 0);
	fd = openat(c->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	errno = 0;
	if (write(fd, &h, sizeof(h)) != (ssize_t)sizeof(h) || write(fd, data, len) != (ssize_t)len)
		r = errno ? -errno : -EIO;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && fstatat(c->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		old = (uint64_t)st.st_size;
	if (r == 0 && renameat(c->dirfd, tmp, c->dirfd, name) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(c->dirfd, tmp, 0);
		goto out;
	}
	c->st.stores++;
	c->st.bytes = c->st.bytes - (old < c->st.bytes ? old : c->st.bytes) + sizeof(h) + len;
	if (c->st.bytes > c->max_bytes)
		evict(c);
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

void diskcache_get_stats(struct diskcache *c, struct diskcache_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	*ret = c->st;
	pthread_mutex_unlock(&c->lock);
}
