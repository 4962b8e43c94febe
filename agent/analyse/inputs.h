/* inputs.h: gathers the profiles report and diff read, from files named on the
 * command line or from the agent's directory over a time range, into one merged profile. */
#ifndef PROWL_INPUTS_H
#define PROWL_INPUTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyse/pprof_read.h"

struct input_opts {
	const struct pprof_filter *filters; /* --label: series labels of a file, else sample labels */
	size_t nfilters;
	bool same_period;    /* refuse files sampled at different periods (a merge) */
	/* --sample-type: the value read (cpu, off_cpu, samples); NULL: samples, or
	 * off_cpu for a file whose default type it is (prowl record --off-cpu). */
	const char *sample_type;
	/* Directory mode: DIR/<service>/<time>-<hash>.pb.gz as the agent writes them. */
	const char *dir;
	const char *service; /* NULL: every service */
	int64_t from_ns, to_ns; /* windows whose start is in [from, to) */
};

struct input_set {
	struct profile *prof;
	size_t nfiles;         /* merged */
	size_t nskipped;       /* unreadable files skipped in directory mode */
	size_t in_range;       /* files read whose window starts in [from, to) */
	uint64_t samples;
	int64_t start_ns, end_ns; /* 0 when no file said */
	int64_t period;
	char types[256];
	char value_type[64];   /* what samples counts: "samples", or --sample-type's (nanoseconds) */
	char *first;           /* path of the first file merged */
	char **labels;         /* series labels all files share, "NAME=VALUE" */
	size_t nlabels;
	char err[1024];        /* the one line to show when loading fails */
};

/* Both return 0, or a negative errno with s->err saying what is wrong. */
int inputs_load_files(struct input_set *s, char *const *paths, size_t n, const struct input_opts *o);
int inputs_load_dir(struct input_set *s, const struct input_opts *o);
void input_set_free(struct input_set *s);

#endif
