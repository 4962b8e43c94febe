/* sample_priv.h: the sampler's state, shared by the files of the sample stage
 * (sample.c: BPF programs, perf events, ring buffers; sample_stats.c: counters and costs;
 * maps_io.c: the map entries user space writes and reads; offcpu.c: the off-CPU programs). */
#ifndef PROWL_SAMPLE_PRIV_H
#define PROWL_SAMPLE_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "kfeatures.h"
#include "maps_io.h"
#include "prowl.skel.h"
#include "sample.h"

struct sampler {
	uint64_t ringbuf_bytes;
	struct sampler_opts opts;
	struct prowl_bpf *skel;
	struct ring_buffer *rb;    /* samples */
	/* The unwinder runs in its own thread, so a new process's mappings are
	 * loaded within a millisecond or so even while the main thread is busy
	 * symbolizing (a new binary's first samples can take long). */
	struct ring_buffer *urb;   /* unwinder events (dwarf mode) */
	pthread_t uthread;
	bool uthread_running;
	int ustop_fd;              /* eventfd: stop the unwinder thread */
	pthread_mutex_t ulock;     /* the unwinder */
	int ncpus;                 /* possible CPUs */
	int *pfd;                  /* per CPU perf event fd or -1 */
	struct bpf_link **links;   /* per CPU */
	bool started;
	uint64_t next_hotplug_ns;
	int cb_err;
	/* DWARF unwinding */
	struct unwinder *unw;
	struct maps_io io;         /* the unwinder's and the runtimes' access to the maps (maps_io.c) */
	bool timing_log;
	int stats_fd;              /* BPF_ENABLE_STATS while timing, or -1 */
	enum kf_unwinder unwinder;
	struct bpf_program *prog;  /* the loaded perf_event program */
	bool tp_btf;               /* tracepoints attach as tp_btf, else raw_tp */
	uint64_t poll_until;       /* sampler_poll() stops reading at this time */
	unsigned int handled;
	bool over_budget;
	/* Off-CPU (offcpu.c): the loaded programs, and their links (sys_exit, sched_switch). */
	struct bpf_program *offcpu_switch, *offcpu_sysexit;
	struct bpf_link *offcpu_links[2];
	uint32_t self_pid;         /* prowl's own process, loaded by the unwinder last */
	bool self_pending;
};

/* Fills s->io: the calls maps_io.h describes, over s's maps (maps_io.c). */
void sampler_maps_io_init(struct sampler *s);
/* Logs what -v and PROWL_BPF_TIMING=1 ask for when the sampler closes. */
void sampler_log_stats(const struct sampler *s);

/* Off-CPU (offcpu.c). Before load: which of its programs load, and the threshold;
 * after load: the bounded unwinder's chains; then attach (nothing without
 * opts.offcpu) and detach (a no-op when not attached). 0 or -errno, logged. */
int offcpu_setup(struct sampler *s);
int offcpu_loaded(struct sampler *s);
int offcpu_start(struct sampler *s);
void offcpu_stop(struct sampler *s);

#endif
