/* series.h: series identity for the agent. Files every sample under a label set
 * (service_name, host_name, static labels) and keeps one profile per series per window. */
#ifndef PROWL_SERIES_H
#define PROWL_SERIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include "export.h"
#include "prowl.h"

struct symbolizer;
struct series_table;

struct series_table_opts {
	const char *hostname;
	const struct series_label *static_labels;
	size_t nstatic;
	uint32_t max_series;     /* past it, new services share the series "other" */
	uint32_t max_processes;  /* per-process cache cap */
	uint32_t idle_windows;   /* free a series after this many empty windows (default 6) */
	bool per_thread;
	int64_t period_ns;
	const char *proc_root;   /* "/proc" unless tests point it elsewhere */
};

struct series_stats {
	uint32_t series, processes;
	uint64_t series_overflow;   /* samples filed under "other" because of max_series */
	uint64_t processes_evicted; /* per-process entries dropped by max_processes */
	uint64_t processes_exited;  /* per-process state freed because the process ended */
	uint64_t ingest_errors;
	uint32_t stacks;            /* distinct stacks in the current window */
	size_t profile_bytes;
};

int series_table_new(struct symbolizer *sym, const struct series_table_opts *o, struct series_table **ret);
void series_table_free(struct series_table *t); /* accepts NULL */
int series_table_ingest(struct series_table *t, const struct prowl_sample *s);
/* The series that got samples in this window, with each profile's time set.
 * Valid until series_table_end_window(). */
int series_table_batch(struct series_table *t, int64_t start_unix_ns, int64_t end_unix_ns,
		       const struct export_series **ret, size_t *ret_n);
/* Resets every profile for the next window, frees series idle for too long and
 * forgets processes that have exited. */
void series_table_end_window(struct series_table *t);
void series_table_get_stats(const struct series_table *t, struct series_stats *ret);

/* The systemd unit a cgroup path belongs to, without ".service": "nginx" for
 * "0::/system.slice/nginx.service". Returns 0 and fills buf, or -ENOENT. */
int service_from_cgroup(const char *cgroup_file_text, char *buf, size_t n);

#endif
