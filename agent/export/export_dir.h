/* export_dir.h: the local-directory exporter, the agent's embedded default: one
 * gzip'ed pprof file per window per series, with retention by age and total size. */
#ifndef PROWL_EXPORT_DIR_H
#define PROWL_EXPORT_DIR_H

#include <stdint.h>

#include "export.h"

struct export_dir_opts {
	const char *path;      /* created if missing (0755) */
	uint64_t max_age_ns;   /* 0 = keep forever */
	uint64_t max_bytes;    /* 0 = no size cap */
};

int exporter_dir_new(const struct export_dir_opts *o, struct exporter **ret);

#endif
