/* rules.h: recording rules, the analyse stage: counts each window's aggregated
 * profiles into Prometheus counters of CPU seconds (the rules and the built-in total). */
#ifndef PROWL_RULES_H
#define PROWL_RULES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "window.h"
#include "rules_config.h"

struct rules;

struct rules_opts {
	/* The series labels, in the order the built-in counter shows them. */
	const char *const *series_labels;
	size_t nseries_labels;
	uint32_t max_series;   /* limits.recording_series: label sets per metric (0: 1000) */
	/* Thread CPU time a window may spend evaluating function names not in the cache
	 * (0: 100 ms); names left over are evaluated in later windows. */
	uint64_t eval_budget_ns;
};

struct rules_stats {
	uint32_t rules, metrics, series;
	uint64_t windows;          /* batches counted */
	uint64_t overflow_samples; /* over all metrics */
	uint64_t eval_ns;          /* thread CPU time spent in rules_count() */
	uint64_t refused;          /* new label sets the cap refused, once per window each */
	uint64_t freed;            /* label sets freed to make room (no samples for a window) */
	uint64_t deferred_samples; /* samples left out of function rules: budget used up */
	uint64_t names_evaluated, names_deferred, fcache_evictions, fcache_refused;
	uint32_t fcache_names;
	size_t mem_bytes;          /* counters, function cache and scratch arrays (not the compiled regexes) */
};

/* Compiles c's rules (checked by rules_config_check) and the built-in counter.
 * Returns 0, -EINVAL (a regex glibc will not compile; logged) or -ENOMEM. */
int rules_new(const struct recording_rules_config *c, const struct rules_opts *o, struct rules **ret);
void rules_free(struct rules *r); /* accepts NULL */

/* Moves the counters of every metric whose rules are unchanged from old into r
 * (a reload keeps counting them); the others start at zero. Cannot fail; old may be NULL. */
void rules_adopt(struct rules *r, struct rules *old);

/* Counts one window: every series of b once per rule. Function names not in the
 * cache are evaluated within the budget; the samples that need a name left over are
 * counted as deferred, not into the rule. When the cap refused a label set, the
 * label sets that got nothing in this window are freed afterwards. Returns 0 or
 * -ENOMEM (the window is then counted in part). */
int rules_count(struct rules *r, const struct export_batch *b);

/* Writes every counter with HELP and TYPE lines, then the rules' own metrics
 * (series, overflow, evaluation cost, memory), as Prometheus text. */
void rules_render(const struct rules *r, FILE *f);

void rules_get_stats(const struct rules *r, struct rules_stats *ret);

/* The value of metric's counter with exactly these label values (in the metric's
 * label order, "" for an absent label); -1 when there is none. For tests. */
double rules_value(const struct rules *r, const char *metric, const char *const *values, size_t n);

#endif
