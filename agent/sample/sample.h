/* sample.h: the sample stage in user space. Loads the BPF sampler, opens one
 * perf event per online CPU and hands each ring-buffer sample to a callback. */
#ifndef PROWL_SAMPLE_H
#define PROWL_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include "prowl.h"
#include "unwinder.h"

struct sampler;

typedef int (*sampler_cb)(void *ctx, const struct prowl_sample *s, size_t size);

struct sampler_opts {
	unsigned int freq;     /* Hz, 1..1000 */
	bool idle;             /* keep idle (pid 0) samples */
	bool include_self;     /* keep prowl's own samples (dropped in BPF by default) */
	bool follow_children;  /* processes forked by filtered ones are followed */
	bool filter_pids;      /* sample only pids added with sampler_add_pid() */
	bool drop_pids;        /* sampler_drop_pid() may exclude processes (exec/exit clear them) */
	bool verbose;          /* pass libbpf's messages (and verifier log) through */
	/* Keep the loaded programs and maps pinned in bpffs (PROWL_PIN_ROOT) for the next
	 * run, and take a set an earlier run left there: a restart skips the verifier. */
	bool pin;
	/* User stacks: DWARF CFI unwinding in BPF (x86_64, arm64) when set, else frame
	 * pointers (bpf_get_stack). Capacity limits of the unwinder's maps; 0 picks
	 * the default in parentheses. */
	bool unwind_dwarf;
	uint32_t unwind_max_rows;  /* unwind table rows, 8 bytes each (2097152 = 16 MiB) */
	uint32_t unwind_max_maps;  /* executable mappings of all processes (65536) */
	uint32_t unwind_max_procs; /* processes (16384) */
	struct unwind_limit_names unwind_names; /* the settings that raise them, for warnings */
	bool python_off;       /* --python=off: no CPython frames (they need unwind_dwarf) */
	bool java_off;         /* --java=off: no Java frames (they need unwind_dwarf) */
	bool node_off;         /* --node=off: no JavaScript frames of node (they need unwind_dwarf) */
	/* Off-CPU time (bpf/offcpu.bpf.h): waits kept with p = min(1, d / T), T =
	 * offcpu_threshold_ns (0: PROWL_OFFCPU_T_DEFAULT); no_oncpu: no perf events
	 * (--off-cpu alone). */
	bool offcpu;
	bool no_oncpu;
	uint64_t offcpu_threshold_ns;
	sampler_cb cb;
	void *cb_ctx;
};

struct sampler_counters {
	uint64_t v[PROWL_CNT__MAX];
};

/* Checks the host: root/capabilities, and the kernel's BPF features for the
 * unwinding mode (kfeatures.h). Returns 0 or a negative errno after logging one
 * line that names what is missing and the kernel release that brings it. */
int sampler_preflight(bool unwind_dwarf);
/* Opens and loads the BPF object. Logs one line on failure. */
int sampler_open(const struct sampler_opts *opts, struct sampler **ret);
int sampler_add_pid(struct sampler *s, uint32_t pid);
/* DWARF mode: loads the unwind tables of every running process now (but prowl's
 * own), so that their first samples are complete. Returns how many, or -errno. */
int sampler_preload_all(struct sampler *s);
/* Stops (drop) or resumes sampling process pid in BPF; needs opts.drop_pids.
 * An exec or the exit of pid resumes it by itself. Returns 0 or a negative errno. */
int sampler_drop_pid(struct sampler *s, uint32_t pid, bool drop);
/* Opens perf events on online CPUs and attaches the program. */
int sampler_start(struct sampler *s);
/* Waits up to timeout_ms for samples and consumes them; also picks up CPUs that
 * came online. Returns the number of samples consumed or a negative errno. */
int sampler_poll(struct sampler *s, int timeout_ms);
/* Consumes whatever is left in the ring buffer without waiting; for at most
 * budget_ns (0: until it is empty), so that a reader slower than the samples
 * arrive still comes back. Returns the samples consumed or a negative errno. */
int sampler_drain(struct sampler *s, uint64_t budget_ns);
/* Stops sampling (closes perf events) but keeps the ring buffer readable. */
void sampler_stop(struct sampler *s);
void sampler_get_counters(const struct sampler *s, struct sampler_counters *ret);
unsigned int sampler_ncpus_active(const struct sampler *s);
/* Changes the frequency (reopens the perf events) or the idle filter at run time. */
int sampler_set_freq(struct sampler *s, unsigned int freq);
void sampler_set_idle(struct sampler *s, bool idle);
void sampler_set_include_self(struct sampler *s, bool include_self);
/* The DWARF unwinder's statistics (tables, rows, capacity hits). Returns
 * -ENOENT when the sampler unwinds with frame pointers. */
int sampler_unwind_stats(const struct sampler *s, struct unwind_stats *ret);
/* Per-run cost of the BPF program, timed inside it with bpf_ktime_get_ns:
 * on/off at run time, and the histogram (PROWL_COST_BUCKETS buckets of
 * PROWL_COST_BUCKET_NS, summed over CPUs). PROWL_BPF_TIMING=1 in the
 * environment turns it on at open and logs p50/p90/p99 at sampler_free. */
void sampler_set_timing(struct sampler *s, bool on);
int sampler_cost_hist(const struct sampler *s, uint64_t ret[PROWL_COST_BUCKETS]);
/* The kernel's run statistics of the sampling program: runs and total run time
 * (kept while PROWL_BPF_TIMING=1 turned them on, or kernel.bpf_stats_enabled=1),
 * which sampler_free logs as a per-sample cost with PROWL_BPF_TIMING=1. */
int sampler_prog_stats(const struct sampler *s, uint64_t *ret_run_cnt, uint64_t *ret_run_time_ns);
/* The sampler's maps as maps_io.h calls, through which the resolve stage reads
 * py_procs to decode Python frames; NULL without DWARF unwinding (then there is
 * no Python walk either), and its py_proc_* are NULL with --python=off. */
struct maps_io;
const struct maps_io *sampler_maps_io(const struct sampler *s);
/* The user-stack unwinder the loaded program carries, e.g. "dwarf (bpf_loop)". */
const char *sampler_unwinder(const struct sampler *s);
void sampler_free(struct sampler *s); /* accepts NULL */

#endif
