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

/* address is "HOST:PORT", "[V6]:PORT" or ":PORT" (all addresses). Logs one line
 * and returns -errno on failure. Port 0 picks a free port (see metrics_server_port). */
int metrics_server_start(const char *address, metrics_render_fn render, metrics_health_fn health, void *ctx,
			 struct metrics_server **ret);
unsigned int metrics_server_port(const struct metrics_server *m);
void metrics_server_stop(struct metrics_server *m); /* accepts NULL */

/* Helpers for renderers: one metric with HELP and TYPE lines. */
void metrics_emit(FILE *f, const char *name, const char *type, const char *help, const char *labels, double v);

#endif
