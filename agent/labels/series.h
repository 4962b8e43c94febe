/* series.h: series identity for the agent. Files every sample under the label set
 * discovery and relabeling gave its process, and keeps one profile per series per window. */
#ifndef PROWL_SERIES_H
#define PROWL_SERIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include "window.h"
#include "prowl.h"

struct symbolizer;
struct series_table;
struct kube;
struct relabel;

struct series_table_opts {
	const char *hostname;
	const struct series_label *static_labels;
	size_t nstatic;
	uint32_t max_series;     /* past it, new label sets share the series "other" */
	uint32_t max_processes;  /* per-process cache cap */
	uint32_t idle_windows;   /* free a series after this many empty windows (default 6) */
	bool per_thread;
	const char *python_hint; /* ingest_opts.python_hint */
	int64_t period_ns;
	bool off_cpu;            /* off-CPU samples too: profiles carry cpu and off_cpu values */
	const char *proc_root;   /* "/proc" unless tests point it elsewhere */
	struct kube *kube;       /* Kubernetes metadata, or NULL */
	const struct relabel *relabel; /* relabel_configs, or NULL */
	/* Called when relabeling drops a process (drop = true) and when it is
	 * forgotten or kept again (false), so that BPF stops or resumes its
	 * samples. May be NULL; a failure only means its samples are dropped here. */
	int (*drop_pid)(void *ctx, uint32_t pid, bool drop);
	void *drop_ctx;
	/* Samples of processes waiting for their pod's metadata, held until the
	 * window ends (default 8 MiB); past it they are filed without. */
	size_t pending_max_bytes;
};

struct series_stats {
	uint32_t series, processes;
	uint64_t series_overflow;   /* samples filed under "other" because of max_series */
	uint64_t series_refused;    /* processes max_series sent to "other" (first sight or relabel) */
	uint64_t processes_evicted; /* per-process entries dropped by max_processes */
	uint64_t processes_exited;  /* per-process state freed because the process ended */
	uint64_t ingest_errors;
	uint32_t stacks;            /* distinct stacks in the current window */
	size_t profile_bytes;
	uint64_t discoveries;       /* processes discovered and relabeled (first sight and changes) */
	uint64_t discovery_ns;      /* time they took */
	uint32_t dropped_processes; /* processes relabeling excludes now */
	uint64_t dropped_samples;   /* their samples that still reached user space */
	uint64_t pod_unlabelled;    /* processes in a pod exported before the pod was known */
	uint64_t pending_overflow;  /* samples not held for their pod's metadata (pending_max_bytes) */
	size_t label_bytes;         /* labels, process and cgroup caches */
};

int series_table_new(struct symbolizer *sym, const struct series_table_opts *o, struct series_table **ret);
void series_table_free(struct series_table *t); /* accepts NULL */
int series_table_ingest(struct series_table *t, const struct prowl_sample *s);
/* The series that got samples in this window, with each profile's time set;
 * samples held for pod metadata are filed first. Valid until series_table_end_window(). */
int series_table_batch(struct series_table *t, int64_t start_unix_ns, int64_t end_unix_ns,
		       const struct export_series **ret, size_t *ret_n);
/* Resets every profile for the next window, frees series idle for too long,
 * forgets processes that have exited and relabels processes whose pod changed. */
void series_table_end_window(struct series_table *t);
void series_table_get_stats(const struct series_table *t, struct series_stats *ret);

#endif
