/* sample_stats.c: the sample stage's figures: BPF counters, the per-sample cost
 * histogram and the kernel's run statistics, and the unwinder's state, logged at close. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "log.h"
#include "sample_priv.h"

/* All counters in one system call (the agent reads them every second for /metrics:
 * one lookup per counter was about 40 calls); one lookup each where the kernel has no
 * batch lookup for arrays (before 5.6). */
void sampler_get_counters(const struct sampler *s, struct sampler_counters *ret)
{
	int ncpu = s->ncpus, fd = bpf_map__fd(s->skel->maps.counters);
	__u32 keys[PROWL_CNT__MAX], count = PROWL_CNT__MAX, out = 0;
	__u64 *vals = calloc((size_t)ncpu * PROWL_CNT__MAX, sizeof(__u64));
	LIBBPF_OPTS(bpf_map_batch_opts, opts);

	memset(ret, 0, sizeof(*ret));
	if (!vals)
		return;
	if (bpf_map_lookup_batch(fd, NULL, &out, keys, vals, &count, &opts) == 0 || (errno == ENOENT && count)) {
		for (__u32 i = 0; i < count; i++)
			for (int c = 0; c < ncpu && keys[i] < PROWL_CNT__MAX; c++)
				ret->v[keys[i]] += vals[(size_t)i * ncpu + c];
		free(vals);
		return;
	}
	for (__u32 k = 0; k < PROWL_CNT__MAX; k++) {
		if (bpf_map__lookup_elem(s->skel->maps.counters, &k, sizeof(k), vals, sizeof(__u64) * ncpu, 0))
			continue;
		for (int c = 0; c < ncpu; c++)
			ret->v[k] += vals[c];
	}
	free(vals);
}

int sampler_unwind_stats(const struct sampler *s, struct unwind_stats *ret)
{
	if (!s->unw)
		return -ENOENT;
	pthread_mutex_lock((pthread_mutex_t *)&s->ulock);
	unwinder_get_stats(s->unw, ret);
	pthread_mutex_unlock((pthread_mutex_t *)&s->ulock);
	return 0;
}

void sampler_set_timing(struct sampler *s, bool on)
{
	s->skel->bss->time_samples = on;
}

int sampler_cost_hist(const struct sampler *s, uint64_t ret[PROWL_COST_BUCKETS])
{
	__u64 *vals = calloc(s->ncpus, sizeof(__u64));

	if (!vals)
		return -ENOMEM;
	for (__u32 k = 0; k < PROWL_COST_BUCKETS; k++) {
		ret[k] = 0;
		if (bpf_map__lookup_elem(s->skel->maps.cost_hist, &k, sizeof(k), vals, sizeof(__u64) * s->ncpus, 0))
			continue;
		for (int c = 0; c < s->ncpus; c++)
			ret[k] += vals[c];
	}
	free(vals);
	return 0;
}

/* Percentile of the cost histogram, in ns (upper bound of its bucket). */
static double hist_pct(const uint64_t *h, uint64_t total, double pct)
{
	uint64_t want = (uint64_t)(total * pct + 0.5), acc = 0;

	for (int i = 0; i < PROWL_COST_BUCKETS; i++) {
		acc += h[i];
		if (acc >= want && acc)
			return (i + 1) * (double)PROWL_COST_BUCKET_NS;
	}
	return PROWL_COST_BUCKETS * (double)PROWL_COST_BUCKET_NS;
}

static void log_timing(const struct sampler *s)
{
	uint64_t h[PROWL_COST_BUCKETS], total = 0;

	if (sampler_cost_hist(s, h) < 0)
		return;
	for (int i = 0; i < PROWL_COST_BUCKETS; i++)
		total += h[i];
	if (!total)
		return;
	log_info("BPF cost per sample (%s unwinding, %" PRIu64 " runs): p50 <= %.2f us, p90 <= %.2f us, p99 <= %.2f us",
		 kf_unwinder_name(s->unwinder), total, hist_pct(h, total, 0.5) / 1000,
		 hist_pct(h, total, 0.9) / 1000, hist_pct(h, total, 0.99) / 1000);
}

/* The kernel's own figure, which includes no timing code of prowl's. */
static void log_prog_stats(const struct sampler *s)
{
	uint64_t cnt = 0, ns = 0;
	struct sampler_counters c;

	if (s->stats_fd < 0 || sampler_prog_stats(s, &cnt, &ns) < 0 || !cnt)
		return;
	sampler_get_counters(s, &c);
	log_info("BPF program %s (%s unwinding): %" PRIu64 " runs, %" PRIu64 " of them samples, %.0f ns per run "
		 "(kernel run_time_ns / run_cnt)", bpf_program__name(s->prog), kf_unwinder_name(s->unwinder), cnt,
		 (uint64_t)c.v[PROWL_CNT_SAMPLES], (double)ns / cnt);
}

const char *sampler_unwinder(const struct sampler *s)
{
	return kf_unwinder_name(s->unwinder);
}

static void log_unwind_stats(const struct sampler *s)
{
	struct unwind_stats st;
	struct sampler_counters c;
	char buf[512];
	size_t off = 0;

	if (!s->unw || log_get_level() < LOG_LVL_DEBUG)
		return;
	sampler_unwind_stats(s, &st);
	sampler_get_counters(s, &c);
	log_debug("unwinder: %" PRIu32 " tables (%" PRIu64 " of %" PRIu64 " rows, %" PRIu64 " KiB), %" PRIu32
		  " processes, %" PRIu64 " of %" PRIu64 " mappings, %" PRIu64 " tables built in %.1f ms, %" PRIu64
		  " evicted, %" PRIu64 " maps reads, %" PRIu64 " events, capacity hits rows/maps/procs %" PRIu64 "/%" PRIu64
		  "/%" PRIu64,
		  st.tables, st.rows_used, st.rows_capacity, st.rows_used * 8 / 1024, st.procs, st.maps_used,
		  st.maps_capacity, st.tables_built, st.table_build_ns / 1e6, st.tables_evicted, st.maps_reads, st.events,
		  st.rows_full, st.maps_full, st.procs_full);
	for (unsigned int r = PROWL_UR_NONE + 1; r < PROWL_UR__MAX; r++)
		off += snprintf(buf + off, sizeof(buf) - off, "%s%s %" PRIu64, off ? ", " : "",
				prowl_ureason_text(r)->log_name, (uint64_t)c.v[PROWL_CNT_UNWIND_TRUNC_OF(r)]);
	log_debug("unwinder: truncated stacks: %s; frame-pointer frames %" PRIu64 ", requests %" PRIu64 " (%" PRIu64
		  " lost)", buf, (uint64_t)c.v[PROWL_CNT_UNWIND_FP_FRAMES], (uint64_t)c.v[PROWL_CNT_UNWIND_REQ],
		  (uint64_t)c.v[PROWL_CNT_UNWIND_REQ_LOST]);
}

int sampler_prog_stats(const struct sampler *s, uint64_t *ret_run_cnt, uint64_t *ret_run_time_ns)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	int r;

	r = bpf_obj_get_info_by_fd(pin_prog_fd(s, s->prog), &info, &len);
	if (r)
		return -errno;
	*ret_run_cnt = info.run_cnt;
	*ret_run_time_ns = info.run_time_ns;
	return 0;
}

void sampler_log_stats(const struct sampler *s)
{
	if (s->timing_log) {
		log_timing(s);
		log_prog_stats(s);
	}
	log_unwind_stats(s);
}
