/* series_priv.h: the series table's state and the calls between its two files: series.c
 * (processes to series, samples in) and series_window.c (the end of a window: freeing idle
 * series, re-homing processes); private to agent/labels/. */
#ifndef PROWL_SERIES_PRIV_H
#define PROWL_SERIES_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgroup.h"
#include "discover.h"
#include "intern.h"
#include "series.h"
#include "u64map.h"

struct series {
	struct series_label *labels; /* owned strings */
	size_t nlabels;
	struct series_label *resource;
	size_t nresource;
	struct profile *prof;
	struct ingest *ingest;
	uint32_t idle;   /* consecutive windows without samples */
	bool active;     /* samples in this window */
	bool dead;       /* freed slot */
};

/* One sampled process as the series table knows it: its series, how it was labelled,
 * and the samples it holds while its pod is not known yet. */
struct series_proc {
	uint32_t series; /* index into t->series */
	char pcomm[PROWL_COMM_LEN];
	uint64_t last_window;
	uint64_t cgroup_id;
	uint64_t pod_version;   /* of the pod metadata its labels came from */
	uint64_t drop_time_ns;  /* dropped: when BPF was told (samples after it mean exec or exit) */
	char cid[CONTAINER_ID_LEN + 1];
	char pod_uid[POD_UID_LEN + 1];
	bool in_pod, dropped, bpf_dropped;
	bool overflow;          /* filed under "other" because of max_series */
	/* Samples held until the window ends, waiting for the pod's metadata. */
	uint8_t *pend;
	size_t pend_len, pend_cap;
	bool pending;
};

struct series_table {
	struct series_table_opts o;
	char *hostname;
	struct symbolizer *sym;
	struct series *series;
	size_t nseries, cap;
	struct intern *keys;     /* label-set key -> 1-based id; id-1 indexes key_series */
	uint32_t *key_series;    /* key id -> series index + 1 (0 = freed) */
	size_t key_series_cap;
	struct u64map procs;     /* pid -> struct series_proc * */
	struct u64map cids;      /* hash(container id) -> processes using it */
	struct cgroup_cache *cgroups;
	struct discover_opts d;
	uint64_t kube_gen;       /* of the pods the processes were last checked against */
	size_t pend_bytes;
	uint32_t npending;
	struct export_series *batch;
	uint64_t window;
	uint64_t room_window;    /* the window make_room() last ran in, + 1 */
	uint32_t noverflow;      /* processes filed under "other" because of max_series */
	struct series_stats st;
	struct prowl_sample scratch;
};

/* Frees one series' labels, profile and ingest state; the slot is then dead. */
void series_free_slot(struct series *s);
/* max_series is reached: frees, once per window, the series no process files into and
 * without samples in this window. */
void series_make_room(struct series_table *t);
uint64_t series_cid_key(const char *cid);
/* Discovers and relabels the process of sample s into p: its series, or dropped. final:
 * no more waiting for its pod's metadata. Returns 0 or a negative errno. */
int series_assign(struct series_table *t, struct series_proc *p, const struct prowl_sample *s, bool final);
/* Forgets pid's state p (filing what it held first) and frees p. */
void series_forget_proc(struct series_table *t, uint32_t pid, struct series_proc *p);

#endif
