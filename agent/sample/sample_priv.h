/* sample_priv.h: the sampler's state, shared by the files of the sample stage
 * (sample.c: BPF programs, ring buffers; sample_stats.c: counters and costs;
 * maps_io.c: the map entries user space writes and reads; offcpu.c: the off-CPU programs;
 * cpus.c: the perf events; pin.c: programs and maps kept between runs). */
#ifndef PROWL_SAMPLE_PRIV_H
#define PROWL_SAMPLE_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "kfeatures.h"
#include "maps_io.h"
#include "prowl.skel.h"
#include "sample.h"

/* Programs and maps kept pinned between the agent's runs (pin.c): one set at most,
 * in a directory of PROWL_PIN_ROOT named by its key. */
#define PROWL_PIN_ROOT "/sys/fs/bpf/prowl"
#define PIN_KEY_LEN    32
#define PIN_IMAGES     4

struct pin_image {
	struct bpf_map *map;
	void *data;
	size_t size;
};

struct sampler_pin {
	int root;              /* PROWL_PIN_ROOT, locked while the sampler lives; -1: nothing kept */
	bool reused;           /* the maps and programs are the set's: nothing was verified */
	bool no_reuse;         /* a set that failed is replaced, not tried again */
	char key[PIN_KEY_LEN + 1];
	size_t nprogs, nmaps;
	int *prog_fd, *map_fd; /* in the object's order; the set's, when reused */
	struct pin_image images[PIN_IMAGES]; /* .bss and .data as user space set them */
	size_t nimages;
};

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
	int *lfd;                  /* per CPU BPF link fd, or -1 (none, or attached by ioctl) */
	int tp_fd[3];              /* the exec, exit and fork tracepoints' attachments, or -1 */
	struct sampler_pin pin;    /* programs and maps kept between runs (pin.c) */
	bool discard;              /* the ring buffers' readers drop what an earlier run left */
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

/* The tracepoints sample.c attaches, indexes of tp_fd. */
enum { SAMPLER_TP_EXEC, SAMPLER_TP_EXIT, SAMPLER_TP_FORK };

/* Fills s->io: the calls maps_io.h describes, over s's maps (maps_io.c). */
void sampler_maps_io_init(struct sampler *s);
/* Logs what -v and PROWL_BPF_TIMING=1 ask for when the sampler closes. */
void sampler_log_stats(const struct sampler *s);

/* Perf events (cpus.c): opened on online CPUs that have none, and closed on CPUs
 * gone offline; first: a CPU that cannot be opened is an error. Returns how many
 * were opened or -errno. */
int sampler_sync_cpus(struct sampler *s, bool first);
void sampler_close_cpu(struct sampler *s, int cpu);

/* pin.c. Before load: takes the set whose key matches the load as configured (no program
 * then loads), or clears the way for a new one. 0, or -ESTALE when a set was found
 * unusable after the object was changed: open the sampler again with pin.no_reuse. */
int pin_before_load(struct sampler *s);
/* After load: a reused set's state reset to a fresh load's; a new set pinned. */
void pin_after_load(struct sampler *s);
/* The fd of loaded program p (the set's when reused), or -errno. */
int pin_prog_fd(const struct sampler *s, const struct bpf_program *p);
void pin_release(struct sampler *s);

/* Off-CPU (offcpu.c). Before load: which of its programs load, and the threshold;
 * after load: the bounded unwinder's chains; then attach (nothing without
 * opts.offcpu) and detach (a no-op when not attached). 0 or -errno, logged. */
int offcpu_setup(struct sampler *s);
int offcpu_loaded(struct sampler *s);
int offcpu_start(struct sampler *s);
void offcpu_stop(struct sampler *s);

#endif
