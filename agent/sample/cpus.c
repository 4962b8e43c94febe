/* cpus.c: the sampler's perf events, one CPU-clock event in frequency mode per online
 * CPU with the sampling program attached; CPUs that come and go are followed. */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "log.h"
#include "sample_priv.h"

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

/* Attaches program prog_fd to perf event pfd: by a BPF link (5.15+, its fd in
 * *link), else by the event's ioctl (closing the event detaches it). */
static int attach_perf(int prog_fd, int pfd, int *link)
{
	*link = bpf_link_create(prog_fd, pfd, BPF_PERF_EVENT, NULL);
	if (*link >= 0)
		return 0;
	*link = -1;
	if (ioctl(pfd, PERF_EVENT_IOC_SET_BPF, prog_fd) < 0 || ioctl(pfd, PERF_EVENT_IOC_ENABLE, 0) < 0)
		return -errno;
	return 0;
}

void sampler_close_cpu(struct sampler *s, int cpu)
{
	if (s->lfd[cpu] >= 0)
		close(s->lfd[cpu]);
	s->lfd[cpu] = -1;
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
	r = pin_prog_fd(s, s->prog);
	if (r >= 0)
		r = attach_perf(r, fd, &s->lfd[cpu]);
	if (r < 0)
		sampler_close_cpu(s, cpu);
	return r;
}

/* Opens events on CPUs that are online and have none; reopens CPUs that went
 * offline and came back (their old event no longer fires). */
int sampler_sync_cpus(struct sampler *s, bool first)
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
				sampler_close_cpu(s, cpu);
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

