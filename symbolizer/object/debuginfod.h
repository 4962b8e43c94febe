/* debuginfod.h: fetches separate debug files by build id with libdebuginfod on a thread of
 * its own, into a capped LRU cache in the state directory, remembering misses for a while. */
#ifndef PROWL_DEBUGINFOD_H
#define PROWL_DEBUGINFOD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "object.h"

struct dbgd_opts {
	const char *cache_dir;     /* created 0700; must be ours */
	uint64_t max_bytes;        /* cache size cap; 0: 1 GiB */
	uint64_t miss_ttl_ns;      /* how long a miss or failure is not asked again; 0: 10 min */
	uint64_t fetch_timeout_ns; /* one fetch at most; 0: 60 s */
};

struct dbgd_stats {
	uint64_t fetched, missed, failed; /* fetches that gave a debug file, a 404, an error or garbage */
	uint64_t cache_bytes;             /* files in the cache, as of the last eviction pass */
	uint64_t evicted;                 /* files removed for the size cap */
	uint32_t pending;                 /* queued or under way */
};

struct dbgd;

/* libdebuginfod reads its servers and cache from the environment, and every
 * thread of the process reads the environment: this sets it, so it must run
 * before the process starts threads. urls NULL or "": nothing is set and
 * dbgd_new() refuses. Returns 0 or -errno. */
int dbgd_setup_env(const char *urls, const char *cache_dir, uint64_t fetch_timeout_ns, uint64_t max_bytes);
/* Whether dbgd_setup_env() enabled fetching. */
bool dbgd_enabled(void);

/* -ENOTCONN when fetching is not set up; -EPERM when the cache directory is
 * not ours (one line says so). */
int dbgd_new(const struct dbgd_opts *opts, struct dbgd **ret);
/* Stops: a fetch under way is abandoned (its thread ends on its own within a
 * second). Accepts NULL. */
void dbgd_free(struct dbgd *d);

/* A descriptor of the cached debug file of build id hex (its use refreshes
 * its place in the LRU); -EAGAIN when it is being fetched now (queued if it
 * was not), -ENOENT when it is known to be missing. */
int dbgd_open(struct dbgd *d, const char *hex, char **ret_path);
/* Build ids whose debug file arrived since the last call (up to max). */
size_t dbgd_take_arrived(struct dbgd *d, char (*ret)[OBJ_BUILD_ID_HEX], size_t max);
/* Waits until nothing is queued or under way, or until deadline
 * (CLOCK_MONOTONIC ns). Returns whether it got idle. */
bool dbgd_wait_idle(struct dbgd *d, uint64_t deadline_ns);
void dbgd_get_stats(struct dbgd *d, struct dbgd_stats *ret);

#endif
