/* encode_otlp.h: the OTLP profiles encoder; turns an export batch into one
 * ExportProfilesServiceRequest (profiles v1development wire layout, uncompressed). */
#ifndef PROWL_ENCODE_OTLP_H
#define PROWL_ENCODE_OTLP_H

#include <stddef.h>
#include <stdint.h>

struct export_batch;

/* One request for the whole batch: a single shared ProfilesDictionary and one
 * ResourceProfiles per (series, process) holding one CPU Profile (sample type
 * samples/count, period type cpu/nanoseconds). *ret_buf is malloc'ed for the
 * caller. Returns 0 or a negative errno. */
int encode_otlp(const struct export_batch *b, uint8_t **ret_buf, size_t *ret_len);

#endif
