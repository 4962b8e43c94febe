/* export_parca.h: the Parca exporter; sends each window's series as pprof in one
 * gRPC-web WriteRaw call (parca.profilestore.v1alpha1.ProfileStoreService). */
#ifndef PROWL_EXPORT_PARCA_H
#define PROWL_EXPORT_PARCA_H

#include <stddef.h>

#include "export.h"
#include "sender.h"

/* t is copied. Returns -errno. */
int exporter_parca_new(const struct http_target *t, struct exporter **ret);
/* The outcome of a WriteRaw call answered with HTTP 2xx: its grpc-status, from the
 * headers (trailers-only answer) or the body's trailer frame; what says why when
 * it is not SENDER_REPLY_SENT. The exporter's sender runs it on each answer. */
enum sender_verdict parca_reply_verdict(const struct sender_reply *r, char *what, size_t whatlen);

#endif
