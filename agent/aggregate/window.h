/* window.h: the aggregate stage's output, one export window: its series (labels and
 * aggregated profile) and its time range, as the encoders and exporters take it. */
#ifndef PROWL_WINDOW_H
#define PROWL_WINDOW_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "label_names.h"

struct profile;

/* A series label (Prometheus style name=value). */
struct series_label {
	const char *name;
	const char *value;
};

/* One series of one window: the series' labels (service_name, host_name, static
 * labels, namespace/pod/container/node or container_id, relabeled) and its
 * aggregated profile. Sample labels (pid, process_name, tid, thread_name) live
 * inside the profile's label sets. resource holds OTLP resource attributes that
 * are not series labels (k8s.pod.uid, container.id), already under their
 * semantic-convention names. */
struct export_series {
	const struct series_label *labels;
	size_t nlabels;
	const struct profile *prof;
	const struct series_label *resource;
	size_t nresource;
};

/* Each profile of a series carries its labels as pprof comments "series_label
 * NAME=VALUE", so that files on disk say which series they are (prowl report --label). */
#define PROWL_SERIES_LABEL_COMMENT "series_label "

/* The value of s's series label called name, or NULL if it has none. */
static inline const char *export_series_label(const struct export_series *s, const char *name)
{
	for (size_t i = 0; i < s->nlabels; i++)
		if (s->labels[i].name && strcmp(s->labels[i].name, name) == 0)
			return s->labels[i].value;
	return NULL;
}

/* A container's id as the OTLP resource attribute discovery sets for a pod's
 * container, whose "container" label names it (elsewhere: LABEL_CONTAINER_ID). */
#define RESOURCE_CONTAINER_ID "container.id"

/* The id of the one container series s belongs to: its container_id label, else its
 * resource's container.id; NULL when it has neither (it may span containers). */
static inline const char *export_series_container_id(const struct export_series *s)
{
	const char *v = export_series_label(s, LABEL_CONTAINER_ID);

	for (size_t i = 0; !v && i < s->nresource; i++)
		if (s->resource[i].name && strcmp(s->resource[i].name, RESOURCE_CONTAINER_ID) == 0)
			v = s->resource[i].value;
	return v;
}

/* Everything gathered in one export window. */
struct export_batch {
	const struct export_series *series;
	size_t nseries;
	int64_t start_unix_ns, end_unix_ns; /* wall-clock window */
	int64_t period_ns;                  /* 1e9 / frequency */
};

#endif
