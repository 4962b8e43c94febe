/* metrics.h: the agent's HTTP endpoint for Prometheus: GET /metrics (text format)
 * and GET /healthz, served by libmicrohttpd on its own thread. */
#ifndef PROWL_METRICS_H
#define PROWL_METRICS_H

#include <stdbool.h>
#include <stdio.h>

struct metrics_server;

/* Writes the whole /metrics body to f. Called on the server's thread. */
typedef void (*metrics_render_fn)(void *ctx, FILE *f);
/* Returns true when healthy; may write a reason to f. */
typedef bool (*metrics_health_fn)(void *ctx, FILE *f);

/* address is parsed by netaddr_parse() (netaddr.h), as the configuration check does:
 * "HOST:PORT", "[V6]:PORT" or ":PORT" (every interface, IPv6 and IPv4). Logs one line
 * and returns -errno on failure. */
int metrics_server_start(const char *address, metrics_render_fn render, metrics_health_fn health, void *ctx,
			 struct metrics_server **ret);
void metrics_server_stop(struct metrics_server *m); /* accepts NULL */

/* Helpers for renderers: one metric with HELP and TYPE lines. */
void metrics_emit(FILE *f, const char *name, const char *type, const char *help, const char *labels, double v);

#endif
