/* spool.c: the on-disk spool of undelivered profiles: one file per exporter and stop,
 * written atomically (0600, O_TMPFILE), every profile in it checked by length and CRC. */
#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "clock.h"
#include "export_file.h"
#include "log.h"
#include "mkdir_p.h"
#include "sender.h"

#define SPOOL_MAGIC   "prowlsp1"
#define SPOOL_VERSION 1u
#define MAX_META      (64u << 10) /* path, content type and encoding, headers */
#define MAX_KIND      15

/* A spool file: a header, then records, each a header, meta strings and the body. */
struct file_hdr {
	char magic[8];
	uint32_t version;
	uint32_t nrec;
};

struct rec_hdr {
	uint32_t meta_len; /* NUL-terminated strings: path, content type, encoding, headers... */
	uint32_t crc;      /* crc32 of meta_len, body_len, queued_ns, the meta and the body */
	uint64_t body_len;
	int64_t queued_ns;
};

struct sfile {
	char *name;             /* "<queued_ns>-<kind>-<pid>-<seq>.spool" */
	char kind[MAX_KIND + 1];
	int64_t queued_ns;      /* of its oldest profile */
	uint64_t bytes;
	uint32_t nrec;
	unsigned int pending;   /* requests read from it and not finished yet */
	bool taken;
};

struct spool {
	pthread_mutex_t lock;   /* the index and the counters: on_free runs on sender threads */
	int dirfd;
	char *path;
	uint64_t max_bytes, max_age_ns;
	struct sfile *files;    /* oldest first */
	size_t nfiles;
	unsigned int seq;
	struct spool_stats st;
};

/* on_free_ctx of a request read from the spool. */
struct ref {
	struct spool *sp;
	char name[];
};

static struct sfile *find_file(struct spool *sp, const char *name)
{
	for (size_t i = 0; i < sp->nfiles; i++)
		if (strcmp(sp->files[i].name, name) == 0)
			return &sp->files[i];
	return NULL;
}

/* Removes f from disk and the index. Called with the lock held. */
static void remove_file(struct spool *sp, struct sfile *f)
{
	size_t i = (size_t)(f - sp->files);

	if (unlinkat(sp->dirfd, f->name, 0) < 0 && errno != ENOENT)
		log_warn("spool: cannot remove %s/%s: %s", sp->path, f->name, strerror(errno));
	free(f->name);
	memmove(f, f + 1, (sp->nfiles - i - 1) * sizeof(*f));
	sp->nfiles--;
}

static uint64_t *kind_counter(struct spool *sp, const char *kind, bool written)
{
	unsigned int i;

	for (i = 0; i < sp->st.nkinds; i++)
		if (strcmp(sp->st.kinds[i].kind, kind) == 0)
			break;
	if (i == sp->st.nkinds) {
		if (i == SPOOL_MAX_KINDS)
			i--; /* cannot happen: there are three HTTP exporters */
		else
			sp->st.nkinds++;
		snprintf(sp->st.kinds[i].kind, sizeof(sp->st.kinds[i].kind), "%s", kind);
	}
	return written ? &sp->st.kinds[i].written : &sp->st.kinds[i].loaded;
}

/* "<20 digits>-<kind>-...spool": the time of the oldest profile and the kind. */
static bool parse_name(const char *name, int64_t *ret_ns, char *kind)
{
	size_t n = strlen(name), k;
	char *end;

	if (n < 28 || strcmp(name + n - 6, ".spool") != 0 || name[20] != '-')
		return false;
	errno = 0;
	*ret_ns = strtoll(name, &end, 10);
	if (errno || end != name + 20)
		return false;
	k = strspn(name + 21, "abcdefghijklmnopqrstuvwxyz");
	if (!k || k > MAX_KIND || name[21 + k] != '-')
		return false;
	memcpy(kind, name + 21, k);
	kind[k] = 0;
	return true;
}

static int cmp_files(const void *a, const void *b)
{
	const struct sfile *x = a, *y = b;

	if (x->queued_ns != y->queued_ns)
		return x->queued_ns < y->queued_ns ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Opens name in the spool: a regular file of ours, never through a symlink. */
static int open_file(struct spool *sp, const char *name, struct stat *st)
{
	int fd = openat(sp->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode) || st->st_uid != geteuid()) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

static void scan(struct spool *sp)
{
	int fd = openat(sp->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!dp) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(dp))) {
		struct sfile f = {};
		struct file_hdr h;
		struct stat st;
		struct sfile *nf;
		int ffd;

		if (!parse_name(de->d_name, &f.queued_ns, f.kind))
			continue;
		ffd = open_file(sp, de->d_name, &st);
		if (ffd < 0)
			continue;
		/* The count of profiles, for what a cap drops; 0 if the header is bad. */
		if (pread(ffd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && memcmp(h.magic, SPOOL_MAGIC, 8) == 0)
			f.nrec = h.nrec;
		close(ffd);
		f.bytes = (uint64_t)st.st_size;
		/* Written after its newest profile was queued: older than the age cap
		 * means every profile in it is. */
		if ((uint64_t)(clock_wall_ns() - timespec_ns(&st.st_mtim)) >
		    sp->max_age_ns) {
			if (unlinkat(sp->dirfd, de->d_name, 0) == 0)
				sp->st.dropped_age += f.nrec;
			continue;
		}
		f.name = strdup(de->d_name);
		nf = f.name ? realloc(sp->files, (sp->nfiles + 1) * sizeof(*nf)) : NULL;
		if (!nf) {
			free(f.name);
			break;
		}
		sp->files = nf;
		sp->files[sp->nfiles++] = f;
	}
	closedir(dp);
	if (sp->nfiles > 1)
		qsort(sp->files, sp->nfiles, sizeof(*sp->files), cmp_files);
}

int spool_open(const struct spool_opts *o, struct spool **ret)
{
	struct spool *sp;
	struct stat st;
	uint64_t total = 0, age = 0, size = 0;
	int r, sfd;

	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	sp->dirfd = -1;
	pthread_mutex_init(&sp->lock, NULL);
	sp->max_bytes = o->max_bytes;
	sp->max_age_ns = o->max_age_ns;
	if (asprintf(&sp->path, "%s/spool", o->state_dir) < 0) {
		sp->path = NULL;
		r = -ENOMEM;
		goto fail;
	}
	r = mkdir_p(o->state_dir, 0700);
	sfd = r < 0 ? -1 : open(o->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sfd < 0) {
		r = r < 0 ? r : -errno;
		goto fail;
	}
	if (mkdirat(sfd, "spool", 0700) < 0 && errno != EEXIST)
		r = -errno;
	sp->dirfd = r < 0 ? -1 : openat(sfd, "spool", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(sfd);
	if (sp->dirfd < 0) {
		r = r < 0 ? r : errno == ELOOP || errno == ENOTDIR ? -ENOTDIR : -errno;
		goto fail;
	}
	if (fstat(sp->dirfd, &st) < 0 || st.st_uid != geteuid()) {
		log_error("spool: %s belongs to uid %u, not to prowl: remove it; undelivered profiles are dropped "
			  "at stop until then", sp->path, (unsigned)st.st_uid);
		spool_free(sp);
		return -EPERM;
	}
	if ((st.st_mode & 07777) != 0700)
		fchmod(sp->dirfd, 0700);
	scan(sp);
	age = sp->st.dropped_age;
	for (size_t i = 0; i < sp->nfiles; i++)
		total += sp->files[i].bytes;
	/* A cap lowered since the files were written: the oldest go. */
	while (total > sp->max_bytes && sp->nfiles) {
		total -= sp->files[0].bytes;
		size += sp->files[0].nrec;
		remove_file(sp, &sp->files[0]);
	}
	sp->st.dropped_size += size;
	if (age || size)
		log_warn("spool: dropped %" PRIu64 " profiles older than spool.max_age and %" PRIu64
			 " past spool.max_size", age, size);
	*ret = sp;
	return 0;
fail:
	log_error("spool: cannot use %s: %s: make state_dir a writable directory; undelivered profiles are "
		  "dropped at stop until then", sp->path ? sp->path : o->state_dir, strerror(-r));
	spool_free(sp);
	return r;
}

static void on_request_free(struct sender_request *req)
{
	struct ref *ref = req->on_free_ctx;
	struct spool *sp = ref->sp;
	struct sfile *f;

	pthread_mutex_lock(&sp->lock);
	f = find_file(sp, ref->name);
	if (f && f->pending && --f->pending == 0)
		remove_file(sp, f);
	pthread_mutex_unlock(&sp->lock);
	free(ref);
	req->on_free = NULL;
	req->on_free_ctx = NULL;
}

static uint32_t rec_crc(const struct rec_hdr *h, const uint8_t *meta, const uint8_t *body)
{
	uLong c = crc32(0, (const Bytef *)&h->meta_len, sizeof(h->meta_len));

	c = crc32(c, (const Bytef *)&h->body_len, sizeof(h->body_len));
	c = crc32(c, (const Bytef *)&h->queued_ns, sizeof(h->queued_ns));
	c = crc32(c, meta, h->meta_len);
	/* crc32() takes a uInt length: feed the body in pieces. */
	for (uint64_t off = 0; off < h->body_len;) {
		uInt n = h->body_len - off > (1u << 30) ? (1u << 30) : (uInt)(h->body_len - off);

		c = crc32(c, body + off, n);
		off += n;
	}
	return (uint32_t)c;
}

/* Builds a request from one record's meta strings; takes body. */
static struct sender_request *make_request(const char *meta, size_t meta_len, uint8_t *body, uint64_t body_len,
					   int64_t queued_ns)
{
	struct sender_request *req = calloc(1, sizeof(*req));
	const char *p = meta, *end = meta + meta_len;
	size_t nh = 0;

	if (!req) {
		free(body);
		return NULL;
	}
	req->body = body;
	req->len = body_len;
	req->queued_unix_ns = queued_ns;
	req->path = strdup(p);
	p += strlen(p) + 1;
	req->content_type = p < end && *p ? strdup(p) : NULL;
	p += p < end ? strlen(p) + 1 : 0;
	req->content_encoding = p < end && *p ? strdup(p) : NULL;
	p += p < end ? strlen(p) + 1 : 0;
	for (const char *q = p; q < end; q += strlen(q) + 1)
		nh++;
	if (nh) {
		req->headers = calloc(nh + 1, sizeof(char *));
		for (size_t i = 0; req->headers && i < nh; i++, p += strlen(p) + 1)
			req->headers[i] = strdup(p);
	}
	if (!req->path || (nh && (!req->headers || !req->headers[nh - 1]))) {
		sender_request_free(req);
		return NULL;
	}
	return req;
}

static bool pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	for (size_t done = 0; done < len;) {
		ssize_t k = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;
		done += (size_t)k;
	}
	return true;
}

/* Appends to v (growing it) a request for the record at *off, which is checked
 * first; moves *off past it. Returns 0, 1 when the record is past the age cap, a
 * negative errno, or -EBADMSG with *why set when the file is damaged there. */
static int read_record(struct spool *sp, struct sfile *f, int fd, uint64_t size, uint64_t *off,
		       struct sender_request ***v, size_t *n, size_t *cap, const char **why)
{
	struct sender_request *req;
	struct rec_hdr h;
	struct ref *ref;
	char *meta = NULL;
	uint8_t *body = NULL;
	int r = -EBADMSG;

	if (size - *off < sizeof(h) || !pread_full(fd, &h, sizeof(h), *off)) {
		*why = "truncated";
		return r;
	}
	*off += sizeof(h);
	if (h.meta_len == 0 || h.meta_len > MAX_META || h.body_len > size - *off ||
	    h.meta_len > size - *off - h.body_len) {
		*why = "truncated or a bad length";
		return r;
	}
	meta = malloc(h.meta_len);
	body = malloc(h.body_len ? h.body_len : 1);
	if (!meta || !body) {
		r = -ENOMEM;
		goto out;
	}
	if (!pread_full(fd, meta, h.meta_len, *off) || !pread_full(fd, body, h.body_len, *off + h.meta_len) ||
	    rec_crc(&h, (uint8_t *)meta, body) != h.crc || meta[h.meta_len - 1] != 0 || meta[0] != '/') {
		*why = "checksum mismatch";
		goto out;
	}
	*off += h.meta_len + h.body_len;
	if (clock_wall_ns() - h.queued_ns > (int64_t)sp->max_age_ns) {
		r = 1;
		goto out;
	}
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct sender_request **nv = realloc(*v, nc * sizeof(*nv));

		if (!nv) {
			r = -ENOMEM;
			goto out;
		}
		*v = nv;
		*cap = nc;
	}
	req = make_request(meta, h.meta_len, body, h.body_len, h.queued_ns);
	body = NULL;
	ref = req ? malloc(sizeof(*ref) + strlen(f->name) + 1) : NULL;
	if (!ref) {
		sender_request_free(req);
		r = -ENOMEM;
		goto out;
	}
	ref->sp = sp;
	strcpy(ref->name, f->name);
	req->on_free = on_request_free;
	req->on_free_ctx = ref;
	(*v)[(*n)++] = req;
	f->pending++;
	r = 0;
out:
	free(meta);
	free(body);
	return r;
}

/* Reads f's profiles into v, one record at a time (a body is read once, into the
 * request that keeps it), stopping at the first damaged record. Called with the
 * lock held. */
static int read_file(struct spool *sp, struct sfile *f, struct sender_request ***v, size_t *n, size_t *cap)
{
	struct file_hdr fh;
	struct stat st;
	const char *why = NULL;
	uint32_t good = 0, old = 0;
	uint64_t off = sizeof(fh);
	int fd, r = 0;

	fd = open_file(sp, f->name, &st);
	if (fd < 0)
		why = "cannot open it";
	else if ((uint64_t)st.st_size > sp->max_bytes + MAX_META + sizeof(fh))
		why = "larger than spool.max_size";
	else if (!pread_full(fd, &fh, sizeof(fh), 0) || memcmp(fh.magic, SPOOL_MAGIC, 8) != 0 ||
		 fh.version != SPOOL_VERSION)
		why = "not a prowl spool file of this version";
	if (!why) {
		f->nrec = fh.nrec;
		while (off < (uint64_t)st.st_size) {
			r = read_record(sp, f, fd, (uint64_t)st.st_size, &off, v, n, cap, &why);
			if (r < 0)
				break;
			old += r;
			good++;
		}
		if (r != -ENOMEM)
			r = 0;
	}
	if (fd >= 0)
		close(fd);
	sp->st.dropped_age += old;
	if (old)
		log_warn("spool: dropped %" PRIu32 " %s profiles older than spool.max_age", old, f->kind);
	if (why) {
		uint32_t lost = f->nrec > good ? f->nrec - good : 0;

		sp->st.damaged += lost;
		log_warn("spool: skipping the rest of damaged file %s/%s (%s): %" PRIu32 " profiles read, %" PRIu32
			 " lost", sp->path, f->name, why, good, lost);
	}
	return r;
}

int spool_take(struct spool *sp, const char *kind, struct sender_request ***ret, size_t *ret_n)
{
	struct sender_request **v = NULL;
	size_t n = 0, cap = 0;
	int r = 0;

	*ret = NULL;
	*ret_n = 0;
	pthread_mutex_lock(&sp->lock);
	for (size_t i = 0; i < sp->nfiles && r == 0;) {
		struct sfile *f = &sp->files[i];

		if (f->taken || strcmp(f->kind, kind) != 0) {
			i++;
			continue;
		}
		f->taken = true;
		r = read_file(sp, f, &v, &n, &cap);
		if (f->pending == 0) {
			remove_file(sp, f); /* nothing usable left in it */
			continue;
		}
		i++;
	}
	if (n)
		*kind_counter(sp, kind, false) += n;
	pthread_mutex_unlock(&sp->lock);
	if (n)
		log_info("%s: sending %zu profiles from the spool first (the oldest queued %" PRId64 "s ago)", kind, n,
			 (clock_wall_ns() - v[0]->queued_unix_ns) / NSEC_PER_SEC);
	*ret = v;
	*ret_n = n;
	return r;
}

static size_t meta_size(const struct sender_request *r)
{
	size_t n = strlen(r->path) + 1 + strlen(r->content_type ?: "") + 1 + strlen(r->content_encoding ?: "") + 1;

	for (char **h = r->headers; h && *h; h++)
		n += strlen(*h) + 1;
	return n;
}

static size_t record_size(const struct sender_request *r)
{
	return sizeof(struct rec_hdr) + meta_size(r) + r->len;
}

/* Appends one record for r at p; returns the bytes written. */
static size_t put_record(uint8_t *p, const struct sender_request *r)
{
	struct rec_hdr h = { .meta_len = (uint32_t)meta_size(r), .body_len = r->len, .queued_ns = r->queued_unix_ns };
	uint8_t *meta = p + sizeof(h), *q = meta;

	q = (uint8_t *)stpcpy((char *)q, r->path) + 1;
	q = (uint8_t *)stpcpy((char *)q, r->content_type ?: "") + 1;
	q = (uint8_t *)stpcpy((char *)q, r->content_encoding ?: "") + 1;
	for (char **hd = r->headers; hd && *hd; hd++)
		q = (uint8_t *)stpcpy((char *)q, *hd) + 1;
	memcpy(q, r->body, r->len);
	h.crc = rec_crc(&h, meta, q);
	memcpy(p, &h, sizeof(h));
	return sizeof(h) + h.meta_len + r->len;
}

/* Writes reqs[first..n) to a new file; returns 0 or -errno. Called with the lock held. */
static int write_file(struct spool *sp, const char *kind, struct sender_request **reqs, size_t first, size_t n,
		      uint64_t bytes)
{
	struct file_hdr fh = { .magic = SPOOL_MAGIC, .version = SPOOL_VERSION, .nrec = (uint32_t)(n - first) };
	struct sfile f = { .queued_ns = reqs[first]->queued_unix_ns, .bytes = bytes, .nrec = fh.nrec };
	uint8_t *buf = malloc(bytes), *p;
	char name[96];
	int r = -EEXIST;

	if (!buf)
		return -ENOMEM;
	memcpy(buf, &fh, sizeof(fh));
	p = buf + sizeof(fh);
	for (size_t i = first; i < n; i++)
		p += put_record(p, reqs[i]);
	for (int tries = 0; tries < 1000 && r == -EEXIST; tries++) {
		snprintf(name, sizeof(name), "%020" PRId64 "-%s-%d-%u.spool", f.queued_ns, kind, (int)getpid(),
			 sp->seq++);
		r = export_file_write_at(sp->dirfd, name, 0600, EXPORT_FILE_NOREPLACE, buf, bytes);
	}
	free(buf);
	if (r < 0)
		return r;
	snprintf(f.kind, sizeof(f.kind), "%s", kind);
	f.name = strdup(name);
	if (f.name) {
		struct sfile *nf = realloc(sp->files, (sp->nfiles + 1) * sizeof(*nf));

		if (nf) {
			sp->files = nf;
			sp->files[sp->nfiles++] = f;
			qsort(sp->files, sp->nfiles, sizeof(*sp->files), cmp_files);
		} else {
			free(f.name);
		}
	}
	return 0;
}

/* Bytes of the files that stay after this put: all but those whose every pending
 * request is among reqs (written again, then removed). Called with the lock held. */
static uint64_t bytes_staying(struct spool *sp, struct sender_request **reqs, size_t n)
{
	uint64_t total = 0;

	for (size_t i = 0; i < sp->nfiles; i++) {
		unsigned int mine = 0;

		for (size_t k = 0; k < n; k++) {
			const struct ref *ref = reqs[k]->on_free == on_request_free ? reqs[k]->on_free_ctx : NULL;

			mine += ref && ref->sp == sp && strcmp(ref->name, sp->files[i].name) == 0;
		}
		if (!sp->files[i].pending || mine < sp->files[i].pending)
			total += sp->files[i].bytes;
	}
	return total;
}

int spool_put(struct spool *sp, const char *kind, struct sender_request **reqs, size_t n)
{
	int64_t now = clock_wall_ns();
	uint64_t staying, bytes = sizeof(struct file_hdr), in_bytes = 0, old = 0, over = 0;
	size_t first = 0, kept = 0;
	int r = 0;

	if (!n)
		return 0;
	pthread_mutex_lock(&sp->lock);
	staying = bytes_staying(sp, reqs, n);
	for (size_t i = 0; i < n; i++) {
		bytes += record_size(reqs[i]);
		in_bytes += reqs[i]->len;
	}
	/* Oldest first out: past the age cap, then while over the size cap. */
	while (first < n && (now - reqs[first]->queued_unix_ns > (int64_t)sp->max_age_ns ||
			     staying + bytes > sp->max_bytes)) {
		if (now - reqs[first]->queued_unix_ns > (int64_t)sp->max_age_ns)
			old++;
		else
			over++;
		bytes -= record_size(reqs[first++]);
	}
	if (first < n) {
		r = write_file(sp, kind, reqs, first, n, bytes);
		if (r == 0) {
			kept = n - first;
			*kind_counter(sp, kind, true) += kept;
		}
	}
	sp->st.dropped_age += old;
	sp->st.dropped_size += over;
	pthread_mutex_unlock(&sp->lock);
	if (old || over)
		log_warn("%s: spool: dropped the %" PRIu64 " oldest undelivered profiles: %" PRIu64
			 " older than spool.max_age, %" PRIu64 " past spool.max_size (%" PRIu64 " bytes)",
			 kind, old + over, old, over, sp->max_bytes);
	if (r < 0) {
		log_error("%s: cannot write %zu undelivered profiles to the spool %s: %s; they are lost", kind,
			  n - first, sp->path, strerror(-r));
		pthread_mutex_lock(&sp->lock);
		sp->st.write_lost += n - first;
		pthread_mutex_unlock(&sp->lock);
		/* Those read from the spool earlier keep their files. */
		for (size_t i = first; i < n; i++)
			if (reqs[i]->on_free == on_request_free) {
				free(reqs[i]->on_free_ctx);
				reqs[i]->on_free = NULL;
			}
	} else if (kept) {
		log_info("%s: %zu undelivered profiles (%" PRIu64 " bytes) kept in the spool for the next start", kind,
			 kept, in_bytes);
	}
	/* Now that the new file is on disk, the files they came from may go. */
	for (size_t i = 0; i < n; i++)
		sender_request_free(reqs[i]);
	return r < 0 ? r : (int)kept;
}

void spool_get_stats(struct spool *sp, struct spool_stats *ret)
{
	pthread_mutex_lock(&sp->lock);
	*ret = sp->st;
	ret->files = sp->nfiles;
	ret->bytes = 0;
	for (size_t i = 0; i < sp->nfiles; i++)
		ret->bytes += sp->files[i].bytes;
	pthread_mutex_unlock(&sp->lock);
}

void spool_free(struct spool *sp)
{
	if (!sp)
		return;
	for (size_t i = 0; i < sp->nfiles; i++)
		free(sp->files[i].name);
	free(sp->files);
	if (sp->dirfd >= 0)
		close(sp->dirfd);
	free(sp->path);
	pthread_mutex_destroy(&sp->lock);
	free(sp);
}
