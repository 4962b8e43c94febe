/* export_otlp.h: the OTLP exporter; sends each window as one gzip'ed OTLP/HTTP
 * profiles request (POST /v1development/profiles) through its own sender. */
#ifndef PROWL_EXPORT_OTLP_H
#define PROWL_EXPORT_OTLP_H

#include "export.h"

#define OTLP_PROFILES_PATH "/v1development/profiles"

/* t->url is the collector's base URL (e.g. http://127.0.0.1:4318); t is copied.
 * Returns 0 or a negative errno. */
int exporter_otlp_new(const struct http_target *t, struct exporter **ret);

#endif
