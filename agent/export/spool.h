/* spool.h: profiles the HTTP exporters could not deliver before the agent stopped,
 * kept in <state_dir>/spool and sent first after the next start, under a size and age cap. */
#ifndef PROWL_SPOOL_H
#define PROWL_SPOOL_H

#include <stddef.h>
#include <stdint.h>

struct sender_request;
struct spool;

struct spool_opts {
	const char *state_dir;  /* the spool is its "spool" subdirectory (0700) */
	uint64_t max_bytes;     /* all spool files together */
	uint64_t max_age_ns;    /* profiles queued longer ago than this are dropped */
};

#define SPOOL_MAX_KINDS 4

struct spool_stats {
	uint64_t files, bytes;                     /* in the spool now */
	uint64_t dropped_age, dropped_size;        /* profiles the caps dropped */
	uint64_t damaged;                          /* profiles lost to damaged files */
	uint64_t write_lost;                       /* profiles lost to write errors */
	struct {
		char kind[16];
		uint64_t written, loaded;          /* profiles */
	} kinds[SPOOL_MAX_KINDS];
	unsigned int nkinds;
};

/* Opens (creating) the spool directory: owned by us, 0700, not a symlink. Drops
 * files past the age cap and, oldest first, past the size cap. Logs one line and
 * returns -errno when the directory cannot be used. */
int spool_open(const struct spool_opts *o, struct spool **ret);

/* The spooled profiles of exporter kind `kind` ("otlp"), oldest first, in a
 * malloc'ed array. Each request's file goes once every request read from it is
 * finished (sender_request_free); a damaged file is skipped with a warning. */
int spool_take(struct spool *sp, const char *kind, struct sender_request ***ret, size_t *n);

/* Writes reqs (undelivered profiles of kind, oldest first) to one new spool file,
 * keeping the spool under its caps (the oldest go first; logged and counted), and
 * frees them. Requests read from the spool earlier are written again, and their old
 * files removed once the new one is safely on disk. Returns how many were kept. */
int spool_put(struct spool *sp, const char *kind, struct sender_request **reqs, size_t n);

void spool_get_stats(struct spool *sp, struct spool_stats *ret);
/* Accepts NULL. Every request taken from sp must be freed first. */
void spool_free(struct spool *sp);

#endif
