/* ingest.h: joins the resolve and aggregate stages; turns one BPF sample into
 * labels and interned locations and adds it to a profile. Shared by record and agent. */
#ifndef PROWL_INGEST_H
#define PROWL_INGEST_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/types.h>
#include "prowl.h"

struct profile;
struct symbolizer;
struct ingest;

struct ingest_opts {
	bool per_thread;   /* add tid and thread_name labels */
	uint32_t main_pid; /* its executable becomes pprof mapping[0]; 0 = none */
	/* Logged (once per process) when a CPython interpreter frame first shows up:
	 * why its Python frames are missing (--unwind=fp). NULL: nothing to say. */
	const char *python_hint;
};

int ingest_new(struct symbolizer *sym, struct profile *prof, const struct ingest_opts *opts, struct ingest **ret);
void ingest_free(struct ingest *g); /* accepts NULL */
int ingest_sample(struct ingest *g, const struct prowl_sample *s);
/* Symbolizes again the locations of modules whose debug files arrived
 * (debuginfod) since they were added: record does it once at its end.
 * Returns the locations redone or a negative errno. */
int ingest_resymbolize(struct ingest *g);
/* Call after profile_reset(): forgets ids that pointed into the old profile. */
void ingest_profile_reset(struct ingest *g);

#endif
