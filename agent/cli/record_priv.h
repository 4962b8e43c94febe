/* record_priv.h: what record.c and record_args.c share: the options of one
 * `prowl record` run and the parser that fills them. */
#ifndef PROWL_RECORD_PRIV_H
#define PROWL_RECORD_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "demangle.h"
#include "profile_data.h"

enum { FMT_PPROF, FMT_FOLDED, FMT_HTML };
#define RECORD_MAX_OUTPUTS 4

struct record_opts {
	uint32_t *pids;
	size_t npids;
	bool all;
	unsigned int freq;
	uint64_t duration_ns; /* 0 = until the targets exit or a signal */
	const char *outputs[RECORD_MAX_OUTPUTS];
	int formats[RECORD_MAX_OUTPUTS];
	size_t noutputs;
	int format;
	bool format_set;
	bool idle;
	bool include_self;
	bool per_thread;
	bool verbose;
	bool quiet;
	bool unwind_fp;   /* --unwind=fp */
	bool python_off;  /* --python=off */
	bool python_set;  /* --python was given */
	bool python_fp;   /* left at its default, off because of --unwind=fp */
	bool java_off;    /* --java=off (or --unwind=fp) */
	bool java_set;    /* --java was given */
	bool node_off;    /* --node=off (or --unwind=fp) */
	bool node_set;    /* --node was given */
	enum sym_demangle demangle; /* --demangle */
	uint64_t debuginfod_timeout_ns; /* --debuginfod-timeout */
	uint32_t unwind_max_rows, unwind_max_maps, unwind_max_procs; /* 0: defaults */
	enum prof_values values;     /* --off-cpu, --wall */
	uint64_t offcpu_threshold_ns; /* --off-cpu-threshold */
	char **cmd; /* argv after "--" */
};

/* Fills o from argv. Returns 0; -1 after --help (exit 0); or 2 after one usage
 * error line. */
int record_parse_args(int argc, char **argv, struct record_opts *o);

#endif
