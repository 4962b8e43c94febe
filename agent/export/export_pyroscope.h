/* export_pyroscope.h: the Grafana Pyroscope exporter; sends each window's series
 * as pprof through the legacy /ingest API or the Connect push API. */
#ifndef PROWL_EXPORT_PYROSCOPE_H
#define PROWL_EXPORT_PYROSCOPE_H

#include "export.h"

enum pyroscope_api {
	PYRO_API_INGEST, /* POST /ingest?name=...: one request per series (any Pyroscope) */
	PYRO_API_PUSH,   /* POST /push.v1.PusherService/Push: one request per window */
};

/* t is copied. Returns -errno. */
int exporter_pyroscope_new(const struct http_target *t, enum pyroscope_api api, struct exporter **ret);

#endif
