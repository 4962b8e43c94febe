/* sample.c: loads the BPF sampler (or takes the set pin.c kept), attaches its tracepoints,
 * starts the perf events (cpus.c) and reads the ring buffers. */
#include "sample.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "array_size.h"
#include "clock.h"
#include "libbpf_log.h"
#include "log.h"
#include "sample_priv.h"

#define HOTPLUG_CHECK_NS (1000ull * 1000 * 1000)
#define POLL_BUDGET_NS   (200ull * 1000 * 1000) /* longest sampler_poll() spends reading */
#define POLL_CHECK_EVERY 64u                    /* samples between two looks at the clock */
#define UNWIND_IDLE_MS   1000                   /* the unwinder thread's longest sleep without events */
#define DEF_UNWIND_ROWS  (2u << 20)
#define DEF_UNWIND_MAPS  65536u
#define DEF_UNWIND_PROCS 16384u
/* The inode of the initial PID namespace (the kernel's PROC_PID_INIT_INO). */
#define PID_NS_INIT_INO  0xEFFFFFFCu


static bool cap_effective(unsigned int cap)
{
	char line[256];
	bool ret = false;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;

		if (sscanf(line, "CapEff: %llx", &v) == 1) {
			ret = (v >> cap) & 1;
			break;
		}
	}
	fclose(f);
	return ret;
}

int sampler_preflight(bool unwind_dwarf)
{
	/* The least-privilege set (docs/agent.md); CAP_SYS_ADMIN stands in for the first
	 * two, as on kernels before 5.8. Numbers from linux/capability.h. */
	static const struct {
		int cap;
		bool admin_covers;
		const char *name, *why;
	} need[] = {
		{ 39, true, "CAP_BPF", "to load the BPF program" },
		{ 38, true, "CAP_PERFMON", "to open perf events and read kernel memory from BPF" },
		{ 19, false, "CAP_SYS_PTRACE", "to read other processes' maps and memory" },
		{ 34, false, "CAP_SYSLOG", "to read kernel symbol addresses" },
		{ 2, false, "CAP_DAC_READ_SEARCH", "to read other users' programs and libraries" },
	};
	bool admin = cap_effective(21 /* CAP_SYS_ADMIN */);
	const struct kfeatures *kf;
	enum kf_unwinder unw;
	char missing[160] = "", why[320] = "";
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(need); i++) {
		if ((admin && need[i].admin_covers) || cap_effective(need[i].cap))
			continue;
		snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s", missing[0] ? ", " : "",
			 need[i].name);
		snprintf(why + strlen(why), sizeof(why) - strlen(why), "%s%s", why[0] ? "; " : "", need[i].why);
	}
	if (missing[0]) {
		log_error("missing capabilities: %s (%s): run as root, or grant CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE, "
			  "CAP_SYSLOG and CAP_DAC_READ_SEARCH (see docs/agent.md)", missing, why);
		return -EPERM;
	}
	kf = kfeatures_get();
	kfeatures_log(kf);
	r = kfeatures_check_base(kf);
	if (r < 0)
		return r;
	return kfeatures_pick_unwinder(kf, unwind_dwarf, &unw);
}

static void *unwind_thread(void *arg)
{
	struct sampler *s = arg;
	int epfd = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN };

	if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, ring_buffer__epoll_fd(s->urb), &ev) < 0 ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, s->ustop_fd, &ev) < 0) {
		log_error_errno(-errno, "the unwinder thread cannot wait for events; DWARF unwinding stops loading processes");
		if (epfd >= 0)
			close(epfd);
		return NULL;
	}
	for (;;) {
		uint64_t stop = 0;

		/* Events wake it (BPF submits them with the adaptive wakeup); the
		 * timeout is for the liveness sweep, every few seconds. */
		if (epoll_wait(epfd, &ev, 1, UNWIND_IDLE_MS) < 0 && errno != EINTR)
			break;
		if (read(s->ustop_fd, &stop, sizeof(stop)) == sizeof(stop) && stop)
			break;
		pthread_mutex_lock(&s->ulock);
		ring_buffer__consume(s->urb);
		unwinder_work(s->unw);
		if (s->self_pending) {
			struct prowl_unwind_event self = { .type = PROWL_UEV_UNKNOWN_PID, .pid = s->self_pid };

			/* Whoever asked meanwhile goes first, then prowl itself. */
			s->self_pending = false;
			ring_buffer__consume(s->urb);
			unwinder_work(s->unw);
			unwinder_event(s->unw, &self);
			unwinder_work(s->unw);
		}
		pthread_mutex_unlock(&s->ulock);
	}
	close(epfd);
	return NULL;
}

static int handle_event(void *ctx, void *data, size_t size)
{
	const struct prowl_sample *e = data;
	struct sampler *s = ctx;
	int r;

	if (s->discard)
		return 0;
	/* A sample without Python frames ends where pystack would begin. */
	if (size < PROWL_SAMPLE_NOPY_SIZE || (e->pystack_len && size < sizeof(*e)))
		return 0;
	r = s->opts.cb(s->opts.cb_ctx, data, size);
	if (r < 0) {
		s->cb_err = r;
		return r; /* stops this ring_buffer__poll() round */
	}
	/* The sample is consumed either way; stopping here hands control back. */
	if ((++s->handled & (POLL_CHECK_EVERY - 1)) == 0 && clock_mono_ns() >= s->poll_until) {
		s->over_budget = true;
		return -EAGAIN;
	}
	return 0;
}

static int handle_unwind_event(void *ctx, void *data, size_t size)
{
	struct sampler *s = ctx;
	const struct prowl_unwind_event *ev = data;

	if (!s->unw || s->discard || size < sizeof(*ev))
		return 0;
	/* prowl's own process maps some 50 objects: the processes it profiles
	 * are loaded before it, so their first samples are complete sooner. */
	if (ev->type == PROWL_UEV_UNKNOWN_PID && ev->pid == s->self_pid) {
		s->self_pending = true;
		return 0;
	}
	unwinder_event(s->unw, ev);
	return 0;
}

/* Before load: which programs load, and the sizes of the unwinder's maps (tiny
 * when unused). */
static int setup_programs(struct sampler *s)
{
	const struct kfeatures *kf = kfeatures_get();
	struct prowl_bpf *k = s->skel;
	uint32_t rows = s->opts.unwind_max_rows ? s->opts.unwind_max_rows : DEF_UNWIND_ROWS;
	uint32_t maps = s->opts.unwind_max_maps ? s->opts.unwind_max_maps : DEF_UNWIND_MAPS;
	uint32_t procs = s->opts.unwind_max_procs ? s->opts.unwind_max_procs : DEF_UNWIND_PROCS;
	/* exec/exit: the unwinder's tables, and pid_drop is cleared there too. */
	bool want_exec = s->opts.unwind_dwarf || s->opts.drop_pids;
	bool want_tp = want_exec || s->opts.follow_children;
	struct bpf_program *const samplers[] = {
		[KF_UNW_FP] = k->progs.prowl_sample_fp,
		[KF_UNW_DWARF_LOOP] = k->progs.prowl_sample_dwarf,
		[KF_UNW_DWARF_BOUNDED] = k->progs.prowl_sample_dwarf_bounded,
	};
	int r;

	r = kfeatures_pick_unwinder(kf, s->opts.unwind_dwarf, &s->unwinder);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ARRAY_SIZE(samplers); i++)
		bpf_program__set_autoload(samplers[i], i == s->unwinder);
	s->prog = samplers[s->unwinder];
	bpf_program__set_autoload(k->progs.prowl_unwind_step, s->unwinder == KF_UNW_DWARF_BOUNDED);
	if (want_tp && !kf->has[KF_TP_BTF] && !kf->has[KF_RAW_TP]) {
		log_error("%s needs %s (Linux %s+), which this kernel (%s) lacks",
			  s->opts.unwind_dwarf ? "DWARF unwinding (--unwind=dwarf)" : "following children",
			  kfeature_name(KF_RAW_TP), kfeature_since(KF_RAW_TP), kf->release);
		return -EOPNOTSUPP;
	}
	s->tp_btf = kf->has[KF_TP_BTF];
	bpf_program__set_autoload(k->progs.prowl_fork, s->opts.follow_children && s->tp_btf);
	bpf_program__set_autoload(k->progs.prowl_fork_raw, s->opts.follow_children && !s->tp_btf);
	bpf_program__set_autoload(k->progs.prowl_exec, want_exec && s->tp_btf);
	bpf_program__set_autoload(k->progs.prowl_exec_raw, want_exec && !s->tp_btf);
	bpf_program__set_autoload(k->progs.prowl_exit, want_exec && s->tp_btf);
	bpf_program__set_autoload(k->progs.prowl_exit_raw, want_exec && !s->tp_btf);
	log_debug("BPF programs: %s sampler (%s)%s", kf_unwinder_name(s->unwinder), bpf_program__name(s->prog),
		  want_tp ? (s->tp_btf ? ", tp_btf tracepoints" : ", raw tracepoints") : "");
	r = offcpu_setup(s);
	if (r < 0)
		return r;
	if (!s->opts.unwind_dwarf)
		return 0;
	s->opts.unwind_max_rows = rows;
	s->opts.unwind_max_maps = maps;
	s->opts.unwind_max_procs = procs;
	if (bpf_map__set_max_entries(k->maps.unwind_rows, rows) || bpf_map__set_max_entries(k->maps.unwind_maps, maps) ||
	    bpf_map__set_max_entries(k->maps.unwind_procs, procs))
		return log_error_errno(-EINVAL, "cannot size the unwinder's maps");
	return 0;
}

/* Attaches a tracepoint program, the tp_btf or the raw_tp build, into s->tp_fd[which]. */
static int attach_tp(struct sampler *s, int which, struct bpf_program *btf, struct bpf_program *raw, const char *name)
{
	int fd = pin_prog_fd(s, s->tp_btf ? btf : raw);

	if (fd >= 0)
		fd = bpf_raw_tracepoint_open(s->tp_btf ? NULL : name, fd);
	if (fd < 0)
		return log_error_errno(fd, "cannot attach to the %s tracepoint", name);
	s->tp_fd[which] = fd;
	return 0;
}

/* Drops what an earlier run left in a reused set's ring buffer. */
static void discard_stale(struct sampler *s, struct ring_buffer *rb, const char *what)
{
	int n;

	if (!s->pin.reused)
		return;
	s->discard = true;
	n = ring_buffer__consume(rb);
	s->discard = false;
	if (n > 0)
		log_debug("dropped %d %s an earlier run left in the pinned ring buffer", n, what);
}

/* After load: map the arrays and start the user-space half. */
static int start_unwind(struct sampler *s)
{
	struct unwinder_opts uo = { .names = s->opts.unwind_names, .python_off = s->opts.python_off,
				  .java_off = s->opts.java_off, .node_off = s->opts.node_off };
	int r;

	sampler_maps_io_init(s);
	r = unwinder_new(&uo, &s->io, &s->unw);
	if (r < 0)
		return log_error_errno(r, "cannot set up the unwinder");
	r = attach_tp(s, SAMPLER_TP_EXEC, s->skel->progs.prowl_exec, s->skel->progs.prowl_exec_raw, "sched_process_exec");
	if (r < 0)
		return r;
	r = attach_tp(s, SAMPLER_TP_EXIT, s->skel->progs.prowl_exit, s->skel->progs.prowl_exit_raw, "sched_process_exit");
	if (r < 0)
		return r;
	s->urb = ring_buffer__new(bpf_map__fd(s->skel->maps.unwind_events), handle_unwind_event, s, NULL);
	if (!s->urb)
		return log_error_errno(-errno, "cannot set up the unwinder's ring buffer");
	discard_stale(s, s->urb, "unwinder events");
	s->ustop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->ustop_fd < 0)
		return log_error_errno(-errno, "cannot create an eventfd");
	r = -pthread_create(&s->uthread, NULL, unwind_thread, s);
	if (r < 0)
		return log_error_errno(r, "cannot start the unwinder thread");
	s->uthread_running = true;
	return 0;
}

/* The skeleton's copy of the BPF object (about 2 MB of prowl's read-only data)
 * is not read once the programs are loaded: its pages leave the resident set.
 * They are clean file pages, read again from the binary if ever touched. */
static void release_object_pages(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t sz = 0;
	uintptr_t p = (uintptr_t)prowl_bpf__elf_bytes(&sz), a, e;

	if (pg <= 0)
		return;
	a = (p + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
	e = (p + sz) & ~((uintptr_t)pg - 1);
	if (e > a && madvise((void *)a, e - a, MADV_DONTNEED) < 0)
		log_debug("cannot release the BPF object's pages: %s", strerror(errno));
}

/* The ring buffer holds about one second of samples from every CPU at the
 * configured frequency (at least 100 Hz, so a reload can raise it), which is ten
 * times what accumulates between two polls. It is mapped into prowl, so its size
 * is resident memory: 1 MiB on a small host instead of a fixed 16 MiB. */
static int size_ringbuf(struct sampler *s)
{
	uint64_t want = (uint64_t)s->ncpus * (s->opts.freq > 100 ? s->opts.freq : 100) * sizeof(struct prowl_sample);
	uint64_t size = 1u << 20;

	/* Off-CPU samples come in bursts (many threads waking at once): 8 MiB at least. */
	if (s->opts.offcpu && want < (8u << 20))
		want = 8u << 20;

	while (size < want && size < (256u << 20))
		size <<= 1;
	s->ringbuf_bytes = size;
	s->skel->rodata->ringbuf_wakeup_bytes = size / PROWL_RINGBUF_WAKE_DIV;
	if (bpf_map__set_max_entries(s->skel->maps.events, size))
		return log_error_errno(-errno, "cannot size the BPF ring buffer to %" PRIu64 " bytes", size);
	return 0;
}

/* Logs the verifier's work on each program (-v): 0 where the kernel does not count it. */
static void log_verified(const struct sampler *s)
{
	struct bpf_program *prog;

	if (log_get_level() < LOG_LVL_DEBUG)
		return;
	bpf_object__for_each_program(prog, s->skel->obj) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = pin_prog_fd(s, prog);

		/* verified_insns: 5.16+; older kernels leave it 0. */
		if (fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.verified_insns)
			log_debug("BPF program %s: the verifier processed %u instructions%s", bpf_program__name(prog),
				  info.verified_insns, s->pin.reused ? " (in the run that pinned it)" : "");
	}
}

static int sampler_open_once(const struct sampler_opts *opts, bool no_reuse, struct sampler **ret)
{
	struct sampler *s;
	int r;

	libbpf_log_setup();

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ustop_fd = -1;
	s->stats_fd = -1;
	s->pin.root = -1;
	s->pin.no_reuse = no_reuse;
	for (size_t i = 0; i < ARRAY_SIZE(s->tp_fd); i++)
		s->tp_fd[i] = -1;
	s->self_pid = (uint32_t)getpid();
	pthread_mutex_init(&s->ulock, NULL);
	s->opts = *opts;
	s->ncpus = libbpf_num_possible_cpus();
	if (s->ncpus <= 0) {
		r = log_error_errno(s->ncpus ? s->ncpus : -EINVAL, "cannot count possible CPUs");
		goto fail;
	}
	s->pfd = malloc(sizeof(*s->pfd) * s->ncpus);
	s->lfd = malloc(sizeof(*s->lfd) * s->ncpus);
	if (!s->pfd || !s->lfd) {
		r = -ENOMEM;
		goto fail;
	}
	for (int i = 0; i < s->ncpus; i++)
		s->pfd[i] = s->lfd[i] = -1;

	s->skel = prowl_bpf__open();
	if (!s->skel) {
		r = log_error_errno(-errno, "cannot open the BPF object");
		goto fail;
	}
	s->skel->rodata->filter_mode = opts->filter_pids ? PROWL_FILTER_PIDS : PROWL_FILTER_ALL;
	r = size_ringbuf(s);
	if (r < 0)
		goto fail;
	s->skel->bss->keep_idle = opts->idle;
	s->skel->data->python_on = opts->unwind_dwarf && !opts->python_off;
	s->skel->data->java_on = opts->unwind_dwarf && !opts->java_off;
	s->skel->data->v8_on = opts->unwind_dwarf && !opts->node_off;
	sampler_set_include_self(s, opts->include_self);
	s->skel->rodata->follow_children = opts->follow_children;
	r = setup_programs(s);
	if (r < 0)
		goto fail;
	s->timing_log = getenv("PROWL_BPF_TIMING") && strcmp(getenv("PROWL_BPF_TIMING"), "1") == 0;
	s->skel->bss->time_samples = s->timing_log;
	r = pin_before_load(s);
	if (r < 0)
		goto fail;

	r = prowl_bpf__load(s->skel);
	if (r && s->pin.reused) {
		log_warn_errno(r, "the BPF programs pinned in " PROWL_PIN_ROOT "/%s cannot be used; loading them anew",
			       s->pin.key);
		r = -ESTALE;
		goto fail;
	}
	if (r) {
		char why[LIBBPF_LOG_WHY_MAX];

		libbpf_log_verifier_reason(why, sizeof(why));
		log_error("cannot load the BPF program %s (%s unwinding) into this kernel (%s): %s%s%s%s",
			  bpf_program__name(s->prog), kf_unwinder_name(s->unwinder), kfeatures_get()->release,
			  strerror(-r), why[0] ? "; the verifier says: " : "", why,
			  opts->verbose ? "" : " (run with -v for the verifier's whole log)");
		goto fail;
	}
	pin_after_load(s);
	if (s->unwinder == KF_UNW_DWARF_BOUNDED) {
		__u32 slot = 0;
		int fd = pin_prog_fd(s, s->skel->progs.prowl_unwind_step);

		if (bpf_map__update_elem(s->skel->maps.unwind_chain, &slot, sizeof(slot), &fd, sizeof(fd), BPF_ANY)) {
			r = log_error_errno(-errno, "cannot chain the bounded unwinder's programs");
			goto fail;
		}
	}
	release_object_pages();
	r = offcpu_loaded(s);
	if (r < 0)
		goto fail;
	log_verified(s);
	/* The kernel's own count of runs and run time (run_time_ns, run_cnt). */
	if (s->timing_log && kfeatures_get()->has[KF_STATS])
		s->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (opts->drop_pids && !opts->unwind_dwarf) {
		r = attach_tp(s, SAMPLER_TP_EXEC, s->skel->progs.prowl_exec, s->skel->progs.prowl_exec_raw,
			      "sched_process_exec");
		if (r >= 0)
			r = attach_tp(s, SAMPLER_TP_EXIT, s->skel->progs.prowl_exit, s->skel->progs.prowl_exit_raw,
				      "sched_process_exit");
		if (r < 0)
			goto fail;
	}
	if (opts->follow_children) {
		r = attach_tp(s, SAMPLER_TP_FORK, s->skel->progs.prowl_fork, s->skel->progs.prowl_fork_raw,
			      "sched_process_fork");
		if (r < 0)
			goto fail;
	}
	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), handle_event, s, NULL);
	if (!s->rb) {
		r = log_error_errno(-errno, "cannot set up the BPF ring buffer");
		goto fail;
	}
	discard_stale(s, s->rb, "samples");
	if (s->opts.unwind_dwarf) {
		r = start_unwind(s);
		if (r < 0)
			goto fail;
	}
	*ret = s;
	return 0;
fail:
	sampler_free(s);
	return r;
}

int sampler_open(const struct sampler_opts *opts, struct sampler **ret)
{
	int r = sampler_open_once(opts, false, ret);

	/* A pinned set that could not be used is gone: this load replaces it. */
	return r == -ESTALE ? sampler_open_once(opts, true, ret) : r;
}

int sampler_drop_pid(struct sampler *s, uint32_t pid, bool drop)
{
	__u8 one = 1;
	int r;

	if (drop) {
		s->skel->bss->drop_on = true; /* the programs look pid_drop up from now on */
		r = bpf_map__update_elem(s->skel->maps.pid_drop, &pid, sizeof(pid), &one, sizeof(one), BPF_ANY);
	} else {
		r = bpf_map__delete_elem(s->skel->maps.pid_drop, &pid, sizeof(pid), 0);
	}
	return r && !(errno == ENOENT && !drop) ? -errno : 0;
}

int sampler_add_pid(struct sampler *s, uint32_t pid)
{
	__u8 one = 1;

	if (bpf_map__update_elem(s->skel->maps.pid_filter, &pid, sizeof(pid), &one, sizeof(one), BPF_ANY))
		return -errno;
	/* Its tables are loaded now, so the first samples are complete already. */
	if (s->unw) {
		pthread_mutex_lock(&s->ulock);
		unwinder_add_pid(s->unw, pid);
		pthread_mutex_unlock(&s->ulock);
	}
	return 0;
}

int sampler_preload_all(struct sampler *s)
{
	uint64_t t0 = clock_mono_ns();
	struct dirent *de;
	DIR *d;
	int n = 0;

	if (!s->unw)
		return 0;
	d = opendir("/proc");
	if (!d)
		return -errno;
	pthread_mutex_lock(&s->ulock);
	while ((de = readdir(d))) {
		char *end;
		unsigned long pid = strtoul(de->d_name, &end, 10);

		/* prowl itself is loaded last, when it is first sampled. */
		if (*end || !pid || pid > UINT32_MAX || pid == s->self_pid)
			continue;
		if (unwinder_add_pid(s->unw, (uint32_t)pid) == 0)
			n++;
	}
	pthread_mutex_unlock(&s->ulock);
	closedir(d);
	log_debug("unwind: %d processes loaded before sampling, in %.1f ms", n, (clock_mono_ns() - t0) / 1e6);
	return n;
}

int sampler_start(struct sampler *s)
{
	int r = s->opts.no_oncpu ? 1 : sampler_sync_cpus(s, true);

	if (r < 0)
		return r;
	if (r == 0)
		return log_error_errno(-ENODEV, "no online CPU could be sampled");
	r = offcpu_start(s);
	if (r < 0) {
		sampler_stop(s);
		return r;
	}
	s->started = true;
	s->next_hotplug_ns = clock_mono_ns() + HOTPLUG_CHECK_NS;
	return 0;
}

int sampler_poll(struct sampler *s, int timeout_ms)
{
	int n;

	s->cb_err = 0;
	s->over_budget = false;
	/* A reader slower than the samples arrive (a slow symbolizer, an emulated
	 * CPU) would never leave libbpf's loop: its caller's deadlines must run. */
	s->poll_until = clock_mono_ns() + POLL_BUDGET_NS;
	n = ring_buffer__poll(s->rb, timeout_ms);
	if (s->cb_err)
		return s->cb_err;
	if (n < 0 && n != -EINTR && !s->over_budget)
		return n;
	/* BPF wakes this reader only when the ring fills up (a wakeup per sample
	 * costs microseconds in the sampled task): take what arrived meanwhile. */
	if (n >= 0 && !s->over_budget) {
		int m = ring_buffer__consume(s->rb);

		if (s->cb_err)
			return s->cb_err;
		if (m > 0)
			n += m;
	}
	if (s->started && !s->opts.no_oncpu && clock_mono_ns() >= s->next_hotplug_ns) {
		sampler_sync_cpus(s, false);
		s->next_hotplug_ns = clock_mono_ns() + HOTPLUG_CHECK_NS;
	}
	return n < 0 ? 0 : n;
}

int sampler_drain(struct sampler *s, uint64_t budget_ns)
{
	int n;

	s->cb_err = 0;
	s->over_budget = false;
	s->poll_until = budget_ns ? clock_mono_ns() + budget_ns : UINT64_MAX;
	n = ring_buffer__consume(s->rb);
	if (s->cb_err)
		return s->cb_err;
	return s->over_budget ? 0 : n; /* over budget: the rest waits for the next read */
}

void sampler_stop(struct sampler *s)
{
	offcpu_stop(s);
	for (int cpu = 0; cpu < s->ncpus; cpu++)
		sampler_close_cpu(s, cpu);
	s->started = false;
}

int sampler_set_freq(struct sampler *s, unsigned int freq)
{
	if (freq == s->opts.freq)
		return 0;
	s->opts.freq = freq;
	if (!s->started || s->opts.no_oncpu)
		return 0;
	/* Reopen each CPU's event; the ring buffer and its samples stay. */
	for (int cpu = 0; cpu < s->ncpus; cpu++)
		sampler_close_cpu(s, cpu);
	return sampler_sync_cpus(s, true) < 0 ? -EIO : 0;
}

void sampler_set_idle(struct sampler *s, bool idle)
{
	s->opts.idle = idle;
	s->skel->bss->keep_idle = idle;
}

/* prowl's tgid as BPF sees it, which is getpid() in the initial PID namespace
 * (the host's, and a hostPID pod's). In another one prowl cannot name it: 0. */
static uint32_t own_tgid(void)
{
	struct stat st;

	if (stat("/proc/self/ns/pid", &st) < 0 || st.st_ino != PID_NS_INIT_INO) {
		log_debug("not in the initial PID namespace: prowl's own samples are kept");
		return 0;
	}
	return (uint32_t)getpid();
}

void sampler_set_include_self(struct sampler *s, bool include_self)
{
	s->opts.include_self = include_self;
	s->skel->bss->self_tgid = include_self ? 0 : own_tgid();
}

unsigned int sampler_ncpus_active(const struct sampler *s)
{
	unsigned int n = 0;

	for (int cpu = 0; cpu < s->ncpus; cpu++)
		n += s->pfd[cpu] >= 0;
	return n;
}

void sampler_free(struct sampler *s)
{
	if (!s)
		return;
	if (s->uthread_running) {
		uint64_t one = 1;

		if (write(s->ustop_fd, &one, sizeof(one)) == sizeof(one))
			pthread_join(s->uthread, NULL);
		else
			pthread_cancel(s->uthread);
		s->uthread_running = false;
	}
	if (s->pfd && s->lfd)
		sampler_stop(s);
	if (s->skel)
		sampler_log_stats(s);
	if (s->stats_fd >= 0)
		close(s->stats_fd);
	ring_buffer__free(s->rb);
	ring_buffer__free(s->urb);
	if (s->ustop_fd >= 0)
		close(s->ustop_fd);
	pthread_mutex_destroy(&s->ulock);
	unwinder_free(s->unw);
	for (size_t i = 0; i < ARRAY_SIZE(s->tp_fd); i++)
		if (s->tp_fd[i] >= 0)
			close(s->tp_fd[i]);
	prowl_bpf__destroy(s->skel);
	pin_release(s);
	free(s->pfd);
	free(s->lfd);
	free(s);
}
