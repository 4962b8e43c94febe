/* debuginfod.c: fetches separate debug files by build id with libdebuginfod on a thread of
 * its own, into a capped LRU cache in the state directory, remembering misses for a while. */
#include "debuginfod.h"

#include <dirent.h>
#include <elfutils/debuginfod.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libelf.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mkdir_p.h"

#define MAX_QUEUE    256   /* build ids waiting; more are asked for again later */
#define MAX_ARRIVED  256
#define MAX_MISSES   4096  /* remembered misses; the oldest goes first */
#define MAX_SCAN     65536 /* cache entries an eviction pass looks at */
#define DEF_MAX_BYTES (1ull << 30)
#define DEF_MISS_TTL (600ull * NSEC_PER_SEC)
#define DEF_TIMEOUT  (60ull * NSEC_PER_SEC)

typedef char hexid[OBJ_BUILD_ID_HEX];

struct miss {
	hexid id;
	uint64_t until;
};

struct dbgd {
	pthread_mutex_t lock;
	pthread_cond_t work, idle;
	pthread_t thread;
	bool started;
	bool ended;               /* the thread is past its last use of d but release() */
	unsigned refs;            /* the owner and the running thread */
	atomic_bool stop;
	char *dir;
	uint64_t max_bytes, miss_ttl, timeout;
	hexid queue[MAX_QUEUE];
	size_t nqueue;
	hexid busy;               /* "" when no fetch is under way */
	uint64_t busy_deadline;
	hexid arrived[MAX_ARRIVED];
	size_t narrived;
	struct miss *misses;      /* ring of MAX_MISSES */
	size_t nmisses, next_miss;
	bool warned_fail, warned_garbage;
	struct dbgd_stats st;
};

static bool enabled;

int dbgd_setup_env(const char *urls, const char *cache_dir, uint64_t fetch_timeout_ns, uint64_t max_bytes)
{
	char buf[32];

	enabled = false;
	if (!urls || !*urls)
		return 0;
	if (setenv(DEBUGINFOD_URLS_ENV_VAR, urls, 1) < 0 || setenv(DEBUGINFOD_CACHE_PATH_ENV_VAR, cache_dir, 1) < 0)
		return -errno;
	/* One transfer gives up after the fetch timeout and past the cache cap,
	 * and never prints progress on prowl's stderr. */
	snprintf(buf, sizeof(buf), "%" PRIu64, (uint64_t)((fetch_timeout_ns ? fetch_timeout_ns : DEF_TIMEOUT) / NSEC_PER_SEC + 1));
	setenv(DEBUGINFOD_MAXTIME_ENV_VAR, buf, 1);
	snprintf(buf, sizeof(buf), "%" PRIu64, (uint64_t)(max_bytes ? max_bytes : DEF_MAX_BYTES));
	setenv(DEBUGINFOD_MAXSIZE_ENV_VAR, buf, 1);
	unsetenv(DEBUGINFOD_PROGRESS_ENV_VAR);
	unsetenv(DEBUGINFOD_VERBOSE_ENV_VAR);
	enabled = true;
	return 0;
}

bool dbgd_enabled(void)
{
	return enabled;
}

/* ---- misses ---- */

static bool is_missing(struct dbgd *d, const char *id, uint64_t now)
{
	for (size_t i = 0; i < d->nmisses; i++)
		if (strcmp(d->misses[i].id, id) == 0)
			return now < d->misses[i].until;
	return false;
}

static void add_miss(struct dbgd *d, const char *id)
{
	uint64_t until = clock_mono_ns() + d->miss_ttl;

	for (size_t i = 0; i < d->nmisses; i++) {
		if (strcmp(d->misses[i].id, id) == 0) {
			d->misses[i].until = until;
			return;
		}
	}
	snprintf(d->misses[d->next_miss].id, sizeof(hexid), "%s", id);
	d->misses[d->next_miss].until = until;
	d->next_miss = (d->next_miss + 1) % MAX_MISSES;
	if (d->nmisses < MAX_MISSES)
		d->nmisses++;
}

/* ---- the cache ---- */

/* The debug file of id in the cache: a regular file of ours, not empty (an
 * empty one is libdebuginfod's record of a miss). */
static int open_cached(const struct dbgd *d, const char *id, char **ret_path)
{
	char path[4096];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/%s/debuginfo", d->dir, id);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_size == 0) {
		close(fd);
		return -ENOENT;
	}
	futimens(fd, NULL); /* its place in the LRU */
	if (ret_path && !(*ret_path = strdup(path))) {
		close(fd);
		return -ENOMEM;
	}
	return fd;
}

struct entry {
	char name[256];
	int64_t mtime;
	uint64_t size;
};

static int cmp_entry(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

static bool is_hex_id(const char *s)
{
	size_t n = strspn(s, "0123456789abcdef");

	return n >= 2 && n < OBJ_BUILD_ID_HEX && !s[n];
}

/* Removes the least recently used debug files while the cache is over its cap
 * (never keep, the one just fetched). */
static void evict(struct dbgd *d, const char *keep)
{
	DIR *dir = opendir(d->dir);
	struct entry *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	struct dirent *de;

	if (!dir)
		return;
	while ((de = readdir(dir)) && n < MAX_SCAN) {
		char path[4096];
		struct stat st;

		if (!is_hex_id(de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s/debuginfo", d->dir, de->d_name);
		if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			struct entry *nv = reallocarray(v, cap ? 2 * cap : 64, sizeof(*v));

			if (!nv)
				break;
			v = nv;
			cap = cap ? 2 * cap : 64;
		}
		snprintf(v[n].name, sizeof(v[n].name), "%s", de->d_name);
		v[n].mtime = timespec_ns(&st.st_mtim);
		v[n].size = (uint64_t)st.st_blocks * 512;
		total += v[n++].size;
	}
	closedir(dir);
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_entry);
	for (size_t i = 0; i < n && total > d->max_bytes; i++) {
		char path[4096];

		if (strcmp(v[i].name, keep) == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s/debuginfo", d->dir, v[i].name);
		if (unlink(path) == 0) {
			total -= v[i].size;
			d->st.evicted++;
			snprintf(path, sizeof(path), "%s/%s", d->dir, v[i].name);
			rmdir(path);
		}
	}
	free(v);
	d->st.cache_bytes = total;
}

/* ---- the fetching thread ---- */

static int progress(debuginfod_client *c, long a, long b)
{
	struct dbgd *d = debuginfod_get_user_data(c);

	(void)a;
	(void)b;
	return atomic_load(&d->stop) || clock_mono_ns() >= d->busy_deadline;
}

/* Whether fd holds an ELF file with build id hex. */
static bool is_debug_file_of(int fd, const char *hex)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	char got[OBJ_BUILD_ID_HEX] = "";
	const void *id = NULL;
	ssize_t len;

	if (!elf)
		return false;
	len = elf_kind(elf) == ELF_K_ELF ? dwelf_elf_gnu_build_id(elf, &id) : -1;
	if (len > 0 && len <= OBJ_BUILD_ID_MAX)
		build_id_to_hex(id, (size_t)len, got);
	elf_end(elf);
	return strcmp(got, hex) == 0;
}

static void release(struct dbgd *d);

static void fetch_one(struct dbgd *d, debuginfod_client *c, const char *id)
{
	char *path = NULL;
	int fd = debuginfod_find_debuginfo(c, (const unsigned char *)id, 0, &path);
	bool ok = false, garbage = false;

	if (fd >= 0) {
		ok = is_debug_file_of(fd, id);
		if (!ok && path) { /* garbage: never kept, never given to libdw */
			unlink(path);
			garbage = true;
		}
		close(fd);
	}
	free(path);
	pthread_mutex_lock(&d->lock);
	if (ok) {
		d->st.fetched++;
		if (d->narrived < MAX_ARRIVED)
			snprintf(d->arrived[d->narrived++], sizeof(hexid), "%s", id);
		evict(d, id);
	} else {
		add_miss(d, id);
		if (fd == -ENOENT) {
			d->st.missed++;
		} else {
			d->st.failed++;
			if (garbage && !d->warned_garbage) {
				d->warned_garbage = true;
				log_warn("debuginfod: the server sent something that is not the debug file of build id %s; "
					 "its frames stay addresses (further bad answers are not logged)", id);
			} else if (!garbage && !d->warned_fail && !atomic_load(&d->stop)) {
				d->warned_fail = true;
				log_warn("debuginfod: cannot fetch the debug file of build id %s from %s: %s; frames "
					 "stay addresses and misses are retried after %" PRIu64 " s (further failures "
					 "are not logged)", id, getenv(DEBUGINFOD_URLS_ENV_VAR),
					 fd == -ECANCELED || clock_mono_ns() >= d->busy_deadline ? "no answer in time"
												  : strerror(-fd),
					 d->miss_ttl / NSEC_PER_SEC);
			}
		}
	}
	d->busy[0] = 0;
	pthread_mutex_unlock(&d->lock);
}

static void *worker(void *arg)
{
	struct dbgd *d = arg;
	debuginfod_client *c = debuginfod_begin();
	/* libdebuginfod 0.188 dprintf()s to its verbose descriptor even when there
	 * is none (-1), and glibc then leaks a FILE buffer per call: 8 KiB per
	 * fetch. A descriptor of /dev/null makes those writes harmless. */
	int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (c) {
		debuginfod_set_user_data(c, d);
		debuginfod_set_progressfn(c, progress);
		if (null_fd >= 0)
			debuginfod_set_verbose_fd(c, null_fd);
	}
	pthread_mutex_lock(&d->lock);
	while (!atomic_load(&d->stop)) {
		hexid id;

		if (!d->nqueue) {
			pthread_cond_broadcast(&d->idle);
			pthread_cond_wait(&d->work, &d->lock);
			continue;
		}
		memcpy(id, d->queue[0], sizeof(id));
		memmove(d->queue, d->queue + 1, --d->nqueue * sizeof(hexid));
		memcpy(d->busy, id, sizeof(id));
		d->busy_deadline = clock_mono_ns() + d->timeout;
		pthread_mutex_unlock(&d->lock);
		if (c)
			fetch_one(d, c, id);
		pthread_mutex_lock(&d->lock);
		if (!c) {
			d->busy[0] = 0;
			add_miss(d, id);
		}
	}
	d->busy[0] = 0;
	pthread_mutex_unlock(&d->lock);
	if (c)
		debuginfod_end(c);
	if (null_fd >= 0)
		close(null_fd);
	pthread_mutex_lock(&d->lock);
	d->ended = true;
	pthread_cond_broadcast(&d->idle);
	pthread_mutex_unlock(&d->lock);
	release(d);
	return NULL;
}

/* ---- the owner's side ---- */

int dbgd_new(const struct dbgd_opts *opts, struct dbgd **ret)
{
	struct dbgd *d;
	struct stat st;
	int r;

	if (!enabled)
		return -ENOTCONN;
	r = mkdir_p(opts->cache_dir, 0700);
	if (r < 0)
		return log_error_errno(r, "debuginfod: cannot create the cache directory %s", opts->cache_dir);
	if (lstat(opts->cache_dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		log_error("debuginfod: the cache directory %s is not a directory of prowl's user: remove it or "
			  "choose another state directory", opts->cache_dir);
		return -EPERM;
	}
	chmod(opts->cache_dir, 0700);
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->misses = calloc(MAX_MISSES, sizeof(*d->misses));
	d->dir = strdup(opts->cache_dir);
	if (!d->misses || !d->dir) {
		free(d->misses);
		free(d->dir);
		free(d);
		return -ENOMEM;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->work, NULL);
	pthread_cond_init(&d->idle, NULL);
	d->refs = 1;
	d->max_bytes = opts->max_bytes ? opts->max_bytes : DEF_MAX_BYTES;
	d->miss_ttl = opts->miss_ttl_ns ? opts->miss_ttl_ns : DEF_MISS_TTL;
	d->timeout = opts->fetch_timeout_ns ? opts->fetch_timeout_ns : DEF_TIMEOUT;
	/* libdebuginfod's own record of misses lasts as long as prowl's. */
	/* libdebuginfod's settings files in its cache: its record of misses lasts as
	 * long as prowl's; its own cleaning is left to prowl's LRU (once a week at
	 * most, and after 30 days unused). */
	{
		static const char *const names[] = { "cache_miss_s", "cache_clean_interval_s", "max_unused_age_s" };
		const uint64_t values[] = { d->miss_ttl / NSEC_PER_SEC, 7 * 86400, 30 * 86400 };

		for (size_t i = 0; i < 3; i++) {
			char path[4096];
			FILE *f;

			snprintf(path, sizeof(path), "%s/%s", d->dir, names[i]);
			f = fopen(path, "we");
			if (f) {
				fprintf(f, "%" PRIu64 "\n", values[i]);
				fclose(f);
			}
		}
	}
	*ret = d;
	return 0;
}

static void release(struct dbgd *d)
{
	bool last;

	pthread_mutex_lock(&d->lock);
	last = --d->refs == 0;
	pthread_mutex_unlock(&d->lock);
	if (!last)
		return;
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->work);
	pthread_cond_destroy(&d->idle);
	free(d->misses);
	free(d->dir);
	free(d);
}

void dbgd_free(struct dbgd *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	atomic_store(&d->stop, true);
	pthread_cond_broadcast(&d->work);
	pthread_mutex_unlock(&d->lock);
	/* The thread ends at once when idle, and within a second in the middle
	 * of a transfer (the progress callback): it is waited for that long, so
	 * that it ends its libdebuginfod client before the process exits; past
	 * that it is left behind, so that a silent server cannot hold up a stop. */
	if (d->started) {
		struct timespec ts;
		bool done;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 2;
		pthread_mutex_lock(&d->lock);
		while (!(done = d->ended) && pthread_cond_timedwait(&d->idle, &d->lock, &ts) == 0)
			;
		done = d->ended;
		pthread_mutex_unlock(&d->lock);
		if (done)
			pthread_join(d->thread, NULL);
		else
			pthread_detach(d->thread);
	}
	release(d);
}

static bool queued(const struct dbgd *d, const char *id)
{
	if (strcmp(d->busy, id) == 0)
		return true;
	for (size_t i = 0; i < d->nqueue; i++)
		if (strcmp(d->queue[i], id) == 0)
			return true;
	return false;
}

int dbgd_open(struct dbgd *d, const char *hex, char **ret_path)
{
	uint64_t now = clock_mono_ns();
	int fd, r = -EAGAIN;

	if (!is_hex_id(hex))
		return -ENOENT;
	fd = open_cached(d, hex, ret_path);
	if (fd >= 0 || fd == -ENOMEM)
		return fd;
	pthread_mutex_lock(&d->lock);
	if (is_missing(d, hex, now) || atomic_load(&d->stop)) {
		r = -ENOENT;
	} else if (!queued(d, hex)) {
		if (d->nqueue == MAX_QUEUE) {
			r = -ENOENT; /* asked for again when the module is opened again */
		} else {
			snprintf(d->queue[d->nqueue++], sizeof(hexid), "%s", hex);
			if (!d->started) {
				d->refs++;
				if (pthread_create(&d->thread, NULL, worker, d) == 0) {
					d->started = true;
				} else {
					d->refs--;
					d->nqueue--;
					r = -ENOENT;
				}
			}
			pthread_cond_signal(&d->work);
		}
	}
	pthread_mutex_unlock(&d->lock);
	return r;
}

size_t dbgd_take_arrived(struct dbgd *d, hexid *ret, size_t max)
{
	size_t n;

	pthread_mutex_lock(&d->lock);
	n = d->narrived < max ? d->narrived : max;
	memcpy(ret, d->arrived, n * sizeof(hexid));
	memmove(d->arrived, d->arrived + n, (d->narrived - n) * sizeof(hexid));
	d->narrived -= n;
	pthread_mutex_unlock(&d->lock);
	return n;
}

bool dbgd_wait_idle(struct dbgd *d, uint64_t deadline_ns)
{
	bool idle;

	pthread_mutex_lock(&d->lock);
	while (!(idle = !d->nqueue && !d->busy[0]) && d->started) {
		uint64_t now = clock_mono_ns();
		struct timespec ts;

		if (now >= deadline_ns)
			break;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)((deadline_ns - now) / NSEC_PER_SEC);
		ts.tv_nsec += (long)((deadline_ns - now) % NSEC_PER_SEC);
		if (ts.tv_nsec >= NSEC_PER_SEC) {
			ts.tv_sec++;
			ts.tv_nsec -= NSEC_PER_SEC;
		}
		pthread_cond_timedwait(&d->idle, &d->lock, &ts);
	}
	pthread_mutex_unlock(&d->lock);
	return idle;
}

void dbgd_get_stats(struct dbgd *d, struct dbgd_stats *ret)
{
	pthread_mutex_lock(&d->lock);
	*ret = d->st;
	ret->pending = (uint32_t)d->nqueue + (d->busy[0] != 0);
	pthread_mutex_unlock(&d->lock);
}
