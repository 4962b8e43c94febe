/* offsplit.c: a test workload that waits in known functions for known shares of its time
 * (off-CPU answers), or ping-pongs over pipes, and prints each thread's true wall/CPU/off-CPU time. */
/* BUILD: -O2 -g -fno-omit-frame-pointer -pthread */
/*
 * offsplit split SECONDS [PIPE_MS SLEEP_MS LOCK_MS [BURN_MS [DELAY_MS [LINGER_MS]]]]
 *   A worker thread repeats a cycle paced by absolute deadlines: it reads a pipe
 *   (wait_pipe) that a feeder thread writes PIPE_MS into the cycle, sleeps SLEEP_MS
 *   (wait_sleep, nanosleep), then locks a mutex (wait_lock) that a holder thread
 *   keeps for LOCK_MS more; optionally it first burns BURN_MS of CPU (burn).
 *   Default 5 3 2: the worker's waiting splits 50/30/20. The cycles start DELAY_MS
 *   (default 500) after the start, once a profiler has loaded the process. After its
 *   report the process stays LINGER_MS (default 0; in linger(), off the CPU), so that a
 *   profiler that runs behind names its last samples while it can still read its maps.
 * offsplit pingpong SECONDS
 *   Two threads pass a byte back and forth over two pipes (ping, pong): many short waits.
 * Threads are named as below (worker, feeder, holder, ping, pong). At the end, one
 * line per thread on stdout:
 *   thread NAME TID wall_ns=W cpu_ns=C off_ns=W-C
 * for pingpong, the round trips made (and per second):
 *   roundtrips N per_s=R
 * and for split, the time the worker spent off the CPU in each wait function
 * (its wall time there less its CPU time there):
 *   split wait_pipe=NS wait_sleep=NS wait_lock=NS
 * W from the thread's start to its end (CLOCK_MONOTONIC), C from
 * /proc/self/task/TID/schedstat (time on the CPU).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MS 1000000ull

static uint64_t t0, t_end, cycle_ns, pipe_ns, sleep_ns, lock_ns, burn_ns;
static int pfd[2], qfd[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static volatile uint64_t sink;
static uint64_t roundtrips;

struct tstat {
	const char *name;
	pid_t tid;
	uint64_t start, end, cpu;
};

static struct tstat stats[4];
static uint64_t in_wait[3]; /* ns the worker spent off the CPU in wait_pipe, wait_sleep, wait_lock */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static uint64_t cpu_ns(void) /* this thread's time on the CPU */
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = { .tv_sec = t / 1000000000ull, .tv_nsec = t % 1000000000ull };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
		;
}

static uint64_t schedstat_cpu(pid_t tid)
{
	char path[64];
	unsigned long long on = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &on) != 1)
		on = 0;
	fclose(f);
	return on;
}

static void begin(struct tstat *s, const char *name)
{
	s->name = name;
	s->tid = (pid_t)syscall(SYS_gettid);
	if (strcmp(name, "main") != 0)
		pthread_setname_np(pthread_self(), name); /* thread_name=NAME in prowl --per-thread */
	s->start = now_ns();
}

static void end(struct tstat *s)
{
	s->cpu = schedstat_cpu(s->tid);
	s->end = now_ns();
}

static uint64_t off_part(uint64_t wall, uint64_t cpu)
{
	return wall > cpu ? wall - cpu : 0;
}

__attribute__((noinline)) static void burn(uint64_t ns)
{
	struct timespec ts;
	uint64_t until;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	until = (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec + ns;
	do {
		for (int i = 0; i < 1000; i++)
			sink += i * 7;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	} while ((uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec < until);
}

__attribute__((noinline)) static void wait_pipe(void)
{
	char c;

	if (read(pfd[0], &c, 1) != 1)
		exit(3);
	__asm__ volatile("" ::: "memory"); /* not a tail call: wait_pipe stays on the stack */
}

__attribute__((noinline)) static void wait_sleep(uint64_t ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000ull, .tv_nsec = ns % 1000000000ull };

	nanosleep(&ts, NULL);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void wait_lock(void)
{
	pthread_mutex_lock(&mu);
	pthread_mutex_unlock(&mu);
	__asm__ volatile("" ::: "memory");
}

/* Cycle k starts at t0 + k * cycle: [burn] read until the feeder writes at
 * +burn+pipe; sleep; lock until the holder lets go at the cycle's end. */
static void *worker(void *arg)
{
	(void)arg;
	begin(&stats[1], "worker");
	for (uint64_t k = 0;; k++) {
		uint64_t c = t0 + k * cycle_ns;

		if (c + cycle_ns > t_end)
			break;
		sleep_until(c); /* on time (a no-op unless running late) */
		if (burn_ns)
			burn(burn_ns);
		/* Each wait's wall time less the CPU time the thread spent in it (the
		 * syscall, the wakeup; large under emulation): what an off-CPU profile sees. */
		uint64_t a = now_ns(), ca = cpu_ns(), b, cb, d, cd, e, ce;

		wait_pipe();
		b = now_ns();
		cb = cpu_ns();
		wait_sleep(sleep_ns);
		d = now_ns();
		cd = cpu_ns();
		wait_lock();
		e = now_ns();
		ce = cpu_ns();
		in_wait[0] += off_part(b - a, cb - ca);
		in_wait[1] += off_part(d - b, cd - cb);
		in_wait[2] += off_part(e - d, ce - cd);
	}
	end(&stats[1]);
	return NULL;
}

static void *feeder(void *arg)
{
	(void)arg;
	begin(&stats[2], "feeder");
	for (uint64_t k = 0;; k++) {
		uint64_t c = t0 + k * cycle_ns;

		if (c + cycle_ns > t_end)
			break;
		sleep_until(c + burn_ns + pipe_ns);
		if (write(pfd[1], "x", 1) != 1)
			exit(3);
	}
	end(&stats[2]);
	return NULL;
}

/* Takes the lock before the worker wants it (half way through its sleep) and
 * gives it back at the cycle's end. */
static void *holder(void *arg)
{
	(void)arg;
	begin(&stats[3], "holder");
	for (uint64_t k = 0;; k++) {
		uint64_t c = t0 + k * cycle_ns;

		if (c + cycle_ns > t_end)
			break;
		sleep_until(c + burn_ns + pipe_ns + sleep_ns / 2);
		pthread_mutex_lock(&mu);
		sleep_until(c + cycle_ns);
		pthread_mutex_unlock(&mu);
	}
	end(&stats[3]);
	return NULL;
}

__attribute__((noinline)) static void ping(void)
{
	char c = 'p';

	while (now_ns() < t_end) {
		if (write(pfd[1], &c, 1) != 1 || read(qfd[0], &c, 1) != 1)
			exit(3);
		roundtrips++;
	}
	c = 'q';
	if (write(pfd[1], &c, 1) != 1)
		exit(3);
}

__attribute__((noinline)) static void pong(void)
{
	char c;

	for (;;) {
		if (read(pfd[0], &c, 1) != 1)
			exit(3);
		if (c == 'q')
			break;
		if (write(qfd[1], &c, 1) != 1)
			exit(3);
	}
}

static void *pinger(void *arg)
{
	(void)arg;
	begin(&stats[1], "ping");
	ping();
	end(&stats[1]);
	return NULL;
}

static void *ponger(void *arg)
{
	(void)arg;
	begin(&stats[2], "pong");
	pong();
	end(&stats[2]);
	return NULL;
}

static __attribute__((noinline)) void linger(double ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms * 1e6) % 1000000000L };

	if (ms > 0)
		nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	void *(*fns[3])(void *) = { 0 };
	pthread_t th[3];
	int n = 0;
	double secs;

	if (argc < 3 || (strcmp(argv[1], "split") && strcmp(argv[1], "pingpong"))) {
		fprintf(stderr, "usage: offsplit split|pingpong SECONDS [PIPE_MS SLEEP_MS LOCK_MS [BURN_MS [DELAY_MS "
				"[LINGER_MS]]]]\n");
		return 2;
	}
	begin(&stats[0], "main");
	secs = atof(argv[2]);
	pipe_ns = (argc > 3 ? atof(argv[3]) : 5) * MS;
	sleep_ns = (argc > 4 ? atof(argv[4]) : 3) * MS;
	lock_ns = (argc > 5 ? atof(argv[5]) : 2) * MS;
	burn_ns = (argc > 6 ? atof(argv[6]) : 0) * MS;
	cycle_ns = burn_ns + pipe_ns + sleep_ns + lock_ns;
	if (pipe(pfd) || pipe(qfd))
		return 1;
	/* Time for the profiler to load the unwind tables of the new process. */
	t0 = now_ns() + (uint64_t)((argc > 7 ? atof(argv[7]) : 500) * MS);
	t_end = t0 + (uint64_t)(secs * 1e9);
	if (strcmp(argv[1], "split") == 0) {
		fns[n++] = worker;
		fns[n++] = feeder;
		fns[n++] = holder;
	} else {
		fns[n++] = pinger;
		fns[n++] = ponger;
	}
	for (int i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, fns[i], NULL))
			return 1;
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	end(&stats[0]);
	for (int i = 0; i <= n; i++)
		printf("thread %s %d wall_ns=%llu cpu_ns=%llu off_ns=%llu\n", stats[i].name, (int)stats[i].tid,
		       (unsigned long long)(stats[i].end - stats[i].start), (unsigned long long)stats[i].cpu,
		       (unsigned long long)(stats[i].end - stats[i].start - stats[i].cpu));
	if (fns[0] == pinger)
		printf("roundtrips %llu per_s=%.0f\n", (unsigned long long)roundtrips, roundtrips / secs);
	if (fns[0] == worker)
		printf("split wait_pipe=%llu wait_sleep=%llu wait_lock=%llu\n", (unsigned long long)in_wait[0],
		       (unsigned long long)in_wait[1], (unsigned long long)in_wait[2]);
	fflush(stdout);
	linger(argc > 8 ? atof(argv[8]) : 0);
	return 0;
}
