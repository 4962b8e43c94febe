/* churn.c: a process-churn workload: forks and execs short-lived processes at a fixed
 * rate for S seconds. Each child re-executes this binary in child mode, where it burns
 * 1-5 ms of CPU (varying from child to child) through a few levels of calls and exits,
 * so a profiler sees a stream of new PIDs, each with its own exec, mappings and comm.
 * With -x PATH the children exec PATH instead (e.g. /bin/true: no CPU, only churn).
 * Prints "procs_per_sec=N" (children started and reaped per second of wall time) on
 * stdout, details (failures, CPU of the children) on stderr.
 * Usage: churn [-r RATE/s] [-s SECONDS] [-j MAX_IN_FLIGHT] [-m MIN_MS] [-M MAX_MS] [-x PATH]
 *   (defaults: 300/s, 10 s, 8 in flight, 1-5 ms) */
/* BUILD: -O2 -g -fno-omit-frame-pointer */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;
static volatile sig_atomic_t stop_now;

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 29);
}

__attribute__((noinline)) uint64_t churn_leaf(uint64_t seed)
{
	for (int i = 0; i < 256; i++)
		seed = mix(seed + (uint64_t)i);
	return seed;
}

__attribute__((noinline)) uint64_t churn_work(double until_cpu_s, uint64_t seed)
{
	while (cpu_s() < until_cpu_s)
		seed = churn_leaf(seed);
	return seed;
}

/* Child mode: burn `us` microseconds of CPU, then exit. */
static int child_main(long us)
{
	sink = churn_work(cpu_s() + us / 1e6, (uint64_t)getpid());
	return 0;
}

static void on_signal(int sig)
{
	(void)sig;
	stop_now = 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: churn [-r RATE/s] [-s SECONDS] [-j MAX_IN_FLIGHT] [-m MIN_MS] [-M MAX_MS] [-x PATH]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	double rate = 300, seconds = 10, min_ms = 1, max_ms = 5, t0, t1, next, now, wall;
	long max_in_flight = 8, in_flight = 0, started = 0, reaped = 0, failed = 0, fork_err = 0, late = 0;
	const char *exec_path = NULL;
	char self[4096], usbuf[32];
	struct rusage ru_self, ru_kids;
	uint64_t lcg = 0x9e3779b97f4a7c15ull;
	ssize_t n;
	int opt, status;
	pid_t pid;

	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child_main(atol(argv[2]));

	while ((opt = getopt(argc, argv, "r:s:j:m:M:x:h")) != -1) {
		switch (opt) {
		case 'r': rate = atof(optarg); break;
		case 's': seconds = atof(optarg); break;
		case 'j': max_in_flight = atol(optarg); break;
		case 'm': min_ms = atof(optarg); break;
		case 'M': max_ms = atof(optarg); break;
		case 'x': exec_path = optarg; break;
		default: usage();
		}
	}
	if (optind != argc || !(rate > 0) || !(seconds > 0) || max_in_flight < 1 || min_ms < 0 || max_ms < min_ms)
		usage();
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		perror("churn: readlink /proc/self/exe");
		return 1;
	}
	self[n] = '\0';
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	t0 = mono_s();
	next = t0;
	while (!stop_now) {
		now = mono_s();
		if (now - t0 >= seconds)
			break;
		/* Reap whatever has exited; block only while the in-flight limit is reached. */
		while (in_flight > 0) {
			pid = waitpid(-1, &status, in_flight >= max_in_flight ? 0 : WNOHANG);
			if (pid <= 0) {
				if (pid < 0 && errno == EINTR)
					continue;
				break;
			}
			in_flight--;
			reaped++;
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				failed++;
		}
		now = mono_s();
		if (now < next) {
			struct timespec ts = { 0, (long)((next - now) * 1e9) };

			nanosleep(&ts, NULL);
			continue;
		}
		if (now - next > 0.1) { /* more than 100 ms behind: do not try to catch up */
			late++;
			next = now;
		}
		next += 1.0 / rate;
		lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
		snprintf(usbuf, sizeof(usbuf), "%ld",
			 (long)((min_ms + (max_ms - min_ms) * (double)(lcg >> 11) / 9007199254740992.0) * 1000));
		pid = fork();
		if (pid < 0) {
			fork_err++;
			continue;
		}
		if (pid == 0) {
			if (exec_path)
				execl(exec_path, exec_path, (char *)NULL);
			else
				execl(self, "churn", "--child", usbuf, (char *)NULL);
			_exit(127);
		}
		in_flight++;
		started++;
	}
	while (in_flight > 0) {
		pid = waitpid(-1, &status, 0);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		in_flight--;
		reaped++;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed++;
	}
	t1 = mono_s();
	wall = t1 - t0;
	getrusage(RUSAGE_SELF, &ru_self);
	getrusage(RUSAGE_CHILDREN, &ru_kids);
	printf("procs_per_sec=%.0f\n", reaped / wall);
	fprintf(stderr,
		"churn: rate=%.0f wall_s=%.3f started=%ld reaped=%ld failed=%ld fork_errors=%ld fell_behind=%ld "
		"parent_cpu_s=%.3f children_cpu_s=%.3f\n",
		rate, wall, started, reaped, failed, fork_err, late,
		ru_self.ru_utime.tv_sec + ru_self.ru_utime.tv_usec / 1e6 + ru_self.ru_stime.tv_sec +
			ru_self.ru_stime.tv_usec / 1e6,
		ru_kids.ru_utime.tv_sec + ru_kids.ru_utime.tv_usec / 1e6 + ru_kids.ru_stime.tv_sec +
			ru_kids.ru_stime.tv_usec / 1e6);
	return failed || fork_err ? 1 : 0;
}
