/* pprof_read.h: the read stage of report and diff: decodes an untrusted pprof
 * profile (gzip'ed or not), validates every index in it, and merges it into a profile. */
#ifndef PROWL_PPROF_READ_H
#define PROWL_PPROF_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct profile;
struct pprof_msg;

/* Inputs larger than this, compressed or not, are refused (-EFBIG). */
#define PPROF_MAX_BYTES (256u << 20)

/* A k=v selector. A sample matches when it has a label k whose string value is
 * v, or whose number is v. */
struct pprof_filter {
	const char *key, *value;
};

struct pprof_info {
	int64_t time_nanos, duration_nanos, period;
	const char *period_type; /* "cpu/nanoseconds", or "" */
	char sample_types[256];  /* "samples/count,cpu/nanoseconds" */
	uint64_t samples;        /* sum of the values read (samples/count, or pprof_msg_select's) */
	const char *value_type;  /* their type: "samples", or pprof_msg_select's */
};

/* Decodes and validates buf. On failure returns -EBADMSG (or -EFBIG, -ENOMEM)
 * and points *ret_why at a static phrase saying what is wrong. */
int pprof_decode(const void *buf, size_t len, struct pprof_msg **ret, const char **ret_why);
void pprof_msg_free(struct pprof_msg *m); /* accepts NULL */
void pprof_msg_info(const struct pprof_msg *m, struct pprof_info *ret);
/* Reads the values of sample type `type` (e.g. "off_cpu") from now on, in
 * place of samples/count; NULL picks off_cpu when it is the file's default type,
 * else keeps samples/count. On failure returns -EBADMSG and points *ret_why at
 * what is wrong. */
int pprof_msg_select(struct pprof_msg *m, const char *type, const char **ret_why);

/* Comments of the form "series_label NAME=VALUE", written by the agent's
 * directory exporter: the value of series label name, or NULL. */
const char *pprof_msg_series_label(const struct pprof_msg *m, const char *name);
/* The i-th series label as "NAME=VALUE"; NULL past the last. */
const char *pprof_msg_series_label_at(const struct pprof_msg *m, size_t i);

/* Adds the samples that match every filter to p (mapping[0] of this message
 * becomes p's main binary when main_mapping is set), and their sum to
 * *ret_samples. Returns 0 or -ENOMEM/-EOVERFLOW. */
int pprof_msg_merge(const struct pprof_msg *m, struct profile *p, const struct pprof_filter *f, size_t nf,
		    bool main_mapping, uint64_t *ret_samples);

#endif
