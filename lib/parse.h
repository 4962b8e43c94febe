/* parse.h: strict parsers for command-line and configuration values
 * (durations, bounded integers, PID lists). They return -EINVAL on anything odd. */
#ifndef PROWL_PARSE_H
#define PROWL_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "10s", "500ms", "2m", "1h", "1h30m", or a plain number of seconds. > 0. */
int parse_duration_ns(const char *s, uint64_t *ret);
/* A decimal integer in [min, max]. -ERANGE when out of range. */
int parse_u64_range(const char *s, uint64_t min, uint64_t max, uint64_t *ret);
/* "1,2,3": appends to *pids (realloc'ed), updating *n. */
int parse_pid_list(const char *s, uint32_t **pids, size_t *n);
/* "64MiB", "1G", "512k", "1TiB", "100" (bytes): K, M, G and T (with B or iB) are
 * binary units. -ERANGE past 2^64 - 1 bytes, -EINVAL on anything else. */
int parse_size_bytes(const char *s, uint64_t *ret);
/* A Prometheus label name: [a-zA-Z_][a-zA-Z0-9_]*. */
bool valid_label_name(const char *s);
/* Whether s holds a control character (below 0x20, or DEL). */
bool has_control(const char *s);

#endif
