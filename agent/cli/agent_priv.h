/* agent_priv.h: the running agent's state, shared by its main loop (agent.c) and its
 * exporters' lifecycle across reloads and the stop (agent_exporters.c). */
#ifndef PROWL_AGENT_PRIV_H
#define PROWL_AGENT_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "agent.h"
#include "config.h"
#include "export.h"
#include "metrics.h"

struct agent {
	struct agent_config cfg;
	char *debuginfod_cache;   /* <state_dir>/debuginfod when debuginfod is on */
	struct objcache *objs;    /* the shared object cache, holding <state_dir>/cache; or NULL */
	struct sampler *sampler;
	struct symbolizer *sym;
	struct series_table *series;
	struct series_label *static_labels;
	struct kube *kube;
	struct relabel *relabel;
	struct rules *rules;
	struct exporter *exp[AGENT_MAX_EXPORTERS];
	unsigned int nexp;
	/* Exporters replaced by a reload, still delivering what they hold. */
	struct exporter *retiring[4 * AGENT_MAX_EXPORTERS];
	uint64_t retiring_deadline[4 * AGENT_MAX_EXPORTERS];
	unsigned int nretiring;
	struct metrics_server *metrics;
	struct reloader *reloader;
	struct spool *spool;  /* NULL: no HTTP exporter yet, or the directory is unusable */
	struct agent_snapshot snap;
	int64_t window_start_wall;
	uint64_t window_start_mono, window_end_mono;
	uint64_t samples;
	uint64_t windows, windows_cut;
	uint64_t reloads, reload_errors;
	uint64_t watchdog_usec, next_watchdog;
	uint64_t stop_mono;   /* when SIGTERM was seen: shutdown_timeout counts from here */
	bool reload_pending;  /* a load runs on the reloader's thread: poll more often */
	int argc;
	char **argv;
};

/* agent_exporters.c */
void agent_requeue_spooled(struct agent *a, struct exporter *e);
void agent_open_spool(struct agent *a, const struct agent_config *c);
bool agent_same_str(const char *x, const char *y);
void agent_stop_exporters(struct agent *a, uint64_t deadline);
void agent_retire(struct agent *a, struct exporter *e, bool stopping);
void agent_reap_retiring(struct agent *a, uint64_t now);
int agent_make_exporters(struct agent *a, const struct agent_config *c, const struct agent_config *old_cfg, struct exporter **keep, unsigned int nkeep);

#endif
