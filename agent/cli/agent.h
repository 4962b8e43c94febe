/* agent.h: `prowl agent`, continuous whole-host profiling exported every
 * interval to the configured backends; state shared with its /metrics renderer. */
#ifndef PROWL_AGENT_H
#define PROWL_AGENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#include "export.h"
#include "labels/kube.h"
#include "sample.h"
#include "labels/series.h"
#include "spool.h"
#include "symbolizer.h"

#define AGENT_MAX_EXPORTERS 4

/* A copy of every figure /metrics shows, refreshed by the main loop and read by
 * the HTTP thread under `lock`. */
struct agent_snapshot {
	pthread_mutex_t lock;
	struct sampler_counters bpf;
	uint64_t samples;                 /* read from the ring buffer */
	uint64_t windows, windows_cut;    /* exported; ended early by max_stacks_per_window */
	uint64_t reloads, reload_errors;
	struct series_stats series;
	struct symbolizer_stats sym;
	struct kube_stats kube;
	bool has_kube;                    /* the Kubernetes client runs */
	struct unwind_stats unwind;
	bool has_unwind;                  /* false with --unwind=fp */
	struct spool_stats spool;
	bool has_spool;                   /* false without HTTP exporters */
	struct export_stats exp[AGENT_MAX_EXPORTERS];
	char exp_name[AGENT_MAX_EXPORTERS][16];
	unsigned int nexp;
	uint64_t last_poll_mono_ns;
	uint32_t frequency;
	bool ready;
	char *rules_text;                 /* the recorded metrics, rendered after each window */
};

int agent_main(int argc, char **argv);

/* The /metrics body and the /healthz verdict (agent_metrics.c). */
void agent_metrics_render(void *snapshot, FILE *f);
bool agent_metrics_healthy(void *snapshot, FILE *f);

#endif
