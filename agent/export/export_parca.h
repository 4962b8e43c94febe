/* export_parca.h: the Parca exporter; sends each window's series as base64 pprof
 * in one JSON WriteRaw call (POST /api/profiles/writeraw) through Parca's gateway. */
#ifndef PROWL_EXPORT_PARCA_H
#define PROWL_EXPORT_PARCA_H

#include "export.h"

/* t is copied. Returns -errno. */
int exporter_parca_new(const struct http_target *t, struct exporter **ret);

#endif
