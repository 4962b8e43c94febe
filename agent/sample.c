/* sample.c: loads the BPF sampler, opens CPU-clock perf events in frequency mode
 * on every online CPU (re-checked for hotplug) and reads the ring buffer. */
#include "sample.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "log.h"
#include "prowl.skel.h"

#define HOTPLUG_CHECK_NS (1000ull * 1000 * 1000)
#define LIBBPF_LOG_KEEP 24

struct sampler {
	struct sampler_opts opts;
	struct prowl_bpf *skel;
	struct ring_buffer *rb;
	int ncpus;                 /* possible CPUs */
	int *pfd;                  /* per CPU perf event fd or -1 */
	struct bpf_link **links;   /* per CPU */
	bool started;
	uint64_t next_hotplug_ns;
	int cb_err;
};

/* libbpf's messages: kept in a small ring so a load failure can show the
 * verifier's last lines with -v; printed as they come when verbose. */
static char libbpf_log[LIBBPF_LOG_KEEP][256];
static unsigned int libbpf_log_n;
static bool libbpf_verbose;

static int libbpf_print(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	char msg[8192], *line, *save = NULL;

	if (lvl == LIBBPF_DEBUG && !libbpf_verbose)
		return 0;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* One message may hold a whole verifier log: keep it line by line. */
	for (line = strtok_r(msg, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "libbpf: ", 8) == 0)
			line += 8;
		if (libbpf_verbose)
			fprintf(stderr, "libbpf: %s\n", line);
		snprintf(libbpf_log[libbpf_log_n++ % LIBBPF_LOG_KEEP], sizeof(libbpf_log[0]), "%s", line);
	}
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

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

int sampler_preflight(void)
{
	enum { CAP_SYS_PTRACE_ = 19, CAP_SYS_ADMIN_ = 21, CAP_PERFMON_ = 38, CAP_BPF_ = 39 };
	bool admin = cap_effective(CAP_SYS_ADMIN_);
	char missing[128] = "";
	int r;

	if (!admin && !cap_effective(CAP_BPF_))
		strcat(missing, " CAP_BPF");
	if (!admin && !cap_effective(CAP_PERFMON_))
		strcat(missing, " CAP_PERFMON");
	if (!cap_effective(CAP_SYS_PTRACE_))
		strcat(missing, " CAP_SYS_PTRACE");
	if (missing[0]) {
		log_error("missing capabilities:%s (needed to load BPF, open perf events and read other processes' "
			  "maps): run as root, e.g. 'sudo prowl ...'", missing);
		return -EPERM;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		log_error("this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): prowl needs a kernel built "
			  "with CONFIG_DEBUG_INFO_BTF=y (Linux 5.8+)");
		return -EOPNOTSUPP;
	}
	r = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL);
	if (r == 0) {
		log_error("this kernel has no BPF ring buffer (BPF_MAP_TYPE_RINGBUF): prowl needs Linux 5.8 or newer");
		return -EOPNOTSUPP;
	}
	return 0;
}

static int handle_event(void *ctx, void *data, size_t size)
{
	struct sampler *s = ctx;
	int r;

	if (size < sizeof(struct prowl_sample))
		return 0;
	r = s->opts.cb(s->opts.cb_ctx, data, size);
	if (r < 0) {
		s->cb_err = r;
		return r; /* stops this ring_buffer__poll() round */
	}
	return 0;
}

int sampler_open(const struct sampler_opts *opts, struct sampler **ret)
{
	struct sampler *s;
	int r;

	libbpf_verbose = opts->verbose;
	libbpf_set_print(libbpf_print);

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->opts = *opts;
	s->ncpus = libbpf_num_possible_cpus();
	if (s->ncpus <= 0) {
		r = log_error_errno(s->ncpus ? s->ncpus : -EINVAL, "cannot count possible CPUs");
		goto fail;
	}
	s->pfd = malloc(sizeof(*s->pfd) * s->ncpus);
	s->links = calloc(s->ncpus, sizeof(*s->links));
	if (!s->pfd || !s->links) {
		r = -ENOMEM;
		goto fail;
	}
	for (int i = 0; i < s->ncpus; i++)
		s->pfd[i] = -1;

	s->skel = prowl_bpf__open();
	if (!s->skel) {
		r = log_error_errno(-errno, "cannot open the BPF object");
		goto fail;
	}
	s->skel->rodata->filter_mode = opts->filter_pids ? PROWL_FILTER_PIDS : PROWL_FILTER_ALL;
	s->skel->bss->keep_idle = opts->idle;
	s->skel->rodata->follow_children = opts->follow_children;
	if (!opts->follow_children)
		bpf_program__set_autoload(s->skel->progs.prowl_fork, false);

	r = prowl_bpf__load(s->skel);
	if (r) {
		log_error("cannot load the BPF program into the kernel: %s%s", strerror(-r),
			  opts->verbose ? "" : " (run with -v to see the verifier's log)");
		if (opts->verbose) {
			unsigned int first = libbpf_log_n > LIBBPF_LOG_KEEP ? libbpf_log_n - LIBBPF_LOG_KEEP : 0;

			log_error("last lines from libbpf and the verifier:");
			for (unsigned int i = first; i < libbpf_log_n; i++)
				fprintf(stderr, "  %s\n", libbpf_log[i % LIBBPF_LOG_KEEP]);
		}
		goto fail;
	}
	if (opts->follow_children) {
		r = prowl_bpf__attach(s->skel);
		if (r) {
			r = log_error_errno(r, "cannot attach the fork tracepoint");
			goto fail;
		}
	}
	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), handle_event, s, NULL);
	if (!s->rb) {
		r = log_error_errno(-errno, "cannot set up the BPF ring buffer");
		goto fail;
	}
	*ret = s;
	return 0;
fail:
	sampler_free(s);
	return r;
}

int sampler_add_pid(struct sampler *s, uint32_t pid)
{
	__u8 one = 1;

	if (bpf_map__update_elem(s->skel->maps.pid_filter, &pid, sizeof(pid), &one, sizeof(one), BPF_ANY))
		return -errno;
	return 0;
}

/* Parses a CPU list like "0-3,5" into a bitmap of s->ncpus entries. */
static int read_online(const struct sampler *s, bool *online)
{
	char buf[4096], *p;
	int fd = open("/sys/devices/system/cpu/online", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	memset(online, 0, sizeof(bool) * s->ncpus);
	for (p = buf; *p && *p != '\n';) {
		char *end;
		long a = strtol(p, &end, 10), b = a;

		if (end == p)
			return -EINVAL;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			p = end;
		}
		for (long c = a; c <= b && c < s->ncpus; c++)
			if (c >= 0)
				online[c] = true;
		if (*p == ',')
			p++;
	}
	return 0;
}

static void close_cpu(struct sampler *s, int cpu)
{
	bpf_link__destroy(s->links[cpu]);
	s->links[cpu] = NULL;
	if (s->pfd[cpu] >= 0)
		close(s->pfd[cpu]);
	s->pfd[cpu] = -1;
}

static int open_cpu(struct sampler *s, int cpu)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.size = sizeof(attr),
		.freq = 1,
		.sample_freq = s->opts.freq,
	};
	int fd, r;

	fd = syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	s->pfd[cpu] = fd;
	s->links[cpu] = bpf_program__attach_perf_event(s->skel->progs.prowl_sample, fd);
	if (!s->links[cpu]) {
		r = -errno;
		close_cpu(s, cpu);
		return r;
	}
	return 0;
}

/* Opens events on CPUs that are online and have none; reopens CPUs that went
 * offline and came back (their old event no longer fires). */
static int sync_cpus(struct sampler *s, bool first)
{
	bool *online = calloc(s->ncpus, sizeof(bool));
	int r, opened = 0;

	if (!online)
		return -ENOMEM;
	r = read_online(s, online);
	if (r < 0) {
		/* No sysfs: assume every possible CPU is online. */
		for (int i = 0; i < s->ncpus; i++)
			online[i] = true;
	}
	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		if (!online[cpu]) {
			if (s->pfd[cpu] >= 0)
				close_cpu(s, cpu);
			continue;
		}
		if (s->pfd[cpu] >= 0)
			continue;
		r = open_cpu(s, cpu);
		if (r == -ENODEV || r == -ENXIO)
			continue; /* went offline meanwhile */
		if (r < 0) {
			if (first) {
				free(online);
				return log_error_errno(r, "cannot open a CPU-clock perf event on CPU %d", cpu);
			}
			log_warn_errno(r, "cannot open a perf event on CPU %d that came online", cpu);
			continue;
		}
		if (!first)
			log_info("CPU %d came online; sampling it", cpu);
		opened++;
	}
	free(online);
	return opened;
}

int sampler_start(struct sampler *s)
{
	int r = sync_cpus(s, true);

	if (r < 0)
		return r;
	if (r == 0)
		return log_error_errno(-ENODEV, "no online CPU could be sampled");
	s->started = true;
	s->next_hotplug_ns = now_ns() + HOTPLUG_CHECK_NS;
	return 0;
}

int sampler_poll(struct sampler *s, int timeout_ms)
{
	int n;

	s->cb_err = 0;
	n = ring_buffer__poll(s->rb, timeout_ms);
	if (s->cb_err)
		return s->cb_err;
	if (n < 0 && n != -EINTR)
		return n;
	if (s->started && now_ns() >= s->next_hotplug_ns) {
		sync_cpus(s, false);
		s->next_hotplug_ns = now_ns() + HOTPLUG_CHECK_NS;
	}
	return n < 0 ? 0 : n;
}

int sampler_drain(struct sampler *s)
{
	int n;

	s->cb_err = 0;
	n = ring_buffer__consume(s->rb);
	if (s->cb_err)
		return s->cb_err;
	return n;
}

void sampler_stop(struct sampler *s)
{
	for (int cpu = 0; cpu < s->ncpus; cpu++)
		close_cpu(s, cpu);
	s->started = false;
}

void sampler_get_counters(const struct sampler *s, struct sampler_counters *ret)
{
	int ncpu = s->ncpus;
	__u64 *vals = calloc(ncpu, sizeof(__u64));

	memset(ret, 0, sizeof(*ret));
	if (!vals)
		return;
	for (__u32 k = 0; k < PROWL_CNT__MAX; k++) {
		if (bpf_map__lookup_elem(s->skel->maps.counters, &k, sizeof(k), vals, sizeof(__u64) * ncpu, 0))
			continue;
		for (int c = 0; c < ncpu; c++)
			ret->v[k] += vals[c];
	}
	free(vals);
}

int sampler_set_freq(struct sampler *s, unsigned int freq)
{
	if (freq == s->opts.freq)
		return 0;
	s->opts.freq = freq;
	if (!s->started)
		return 0;
	/* Reopen each CPU's event; the ring buffer and its samples stay. */
	for (int cpu = 0; cpu < s->ncpus; cpu++)
		close_cpu(s, cpu);
	return sync_cpus(s, true) < 0 ? -EIO : 0;
}

void sampler_set_idle(struct sampler *s, bool idle)
{
	s->opts.idle = idle;
	s->skel->bss->keep_idle = idle;
}

unsigned int sampler_ncpus_active(const struct sampler *s)
{
	unsigned int n = 0;

	for (int cpu = 0; cpu < s->ncpus; cpu++)
		n += s->pfd[cpu] >= 0;
	return n;
}

int sampler_prog_stats(const struct sampler *s, uint64_t *ret_run_cnt, uint64_t *ret_run_time_ns)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	int r;

	r = bpf_obj_get_info_by_fd(bpf_program__fd(s->skel->progs.prowl_sample), &info, &len);
	if (r)
		return -errno;
	*ret_run_cnt = info.run_cnt;
	*ret_run_time_ns = info.run_time_ns;
	return 0;
}

void sampler_free(struct sampler *s)
{
	if (!s)
		return;
	if (s->pfd)
		sampler_stop(s);
	ring_buffer__free(s->rb);
	prowl_bpf__destroy(s->skel);
	free(s->pfd);
	free(s->links);
	free(s);
}
