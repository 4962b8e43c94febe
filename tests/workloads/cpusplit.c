/* cpusplit.c: a test workload that spends CPU in hot_a and hot_b in a 3:1 ratio (1:3
 * after SIGUSR1), or in hot_a/hot_b/hot_c in a given split, for known answers. */
/* BUILD: -O2 -g -fno-omit-frame-pointer -pthread */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* CPU time of this thread: the split stays 3:1 however busy the machine is. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Forced inline: shows up as an inlined frame inside hot_a and hot_b. */
static inline __attribute__((always_inline)) uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 29);
}

/* Spins for about ns nanoseconds of CPU time, mostly inside mix(). */
__attribute__((noinline)) void hot_a(uint64_t ns)
{
	uint64_t end = cpu_ns() + ns, x = sink;

	do {
		for (int i = 0; i < 20000; i++)
			x = mix(x + i);
	} while (cpu_ns() < end);
	sink = x;
}

__attribute__((noinline)) void hot_b(uint64_t ns)
{
	uint64_t end = cpu_ns() + ns, x = sink;

	do {
		for (int i = 0; i < 20000; i++)
			x = mix(x - i);
	} while (cpu_ns() < end);
	sink = x;
}

__attribute__((noinline)) void hot_c(uint64_t ns)
{
	uint64_t end = cpu_ns() + ns, x = sink;

	do {
		for (int i = 0; i < 20000; i++)
			x = mix(x ^ i);
	} while (cpu_ns() < end);
	sink = x;
}

static double seconds = 5;
static bool cpu_seconds;   /* SECONDS was given as "2c": CPU time of each thread */
static int split[3];       /* percent of CPU time in hot_a, hot_b, hot_c; all 0: 3:1 */
static volatile sig_atomic_t flipped; /* SIGUSR1: the 3:1 split becomes 1:3 */

static void on_usr1(int sig)
{
	(void)sig;
	flipped = 1;
}

static void *worker(void *arg)
{
	uint64_t stop = (cpu_seconds ? cpu_ns() : now_ns()) + (uint64_t)(seconds * 1e9);

	(void)arg;
	/* One round is 4 ms of CPU time at 3:1, or 10 ms with a split. */
	while ((cpu_seconds ? cpu_ns() : now_ns()) < stop) {
		if (!split[0] && !split[1] && !split[2]) {
			hot_a(flipped ? 1000000 : 3000000); /* 3 ms, or 1 ms after SIGUSR1 */
			hot_b(flipped ? 3000000 : 1000000);
			continue;
		}
		if (split[0])
			hot_a(split[0] * 100000ull);
		if (split[1])
			hot_b(split[1] * 100000ull);
		if (split[2])
			hot_c(split[2] * 100000ull);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	pthread_t tid[64];

	if (argc > 1) {
		char *end;

		seconds = strtod(argv[1], &end);
		cpu_seconds = *end == 'c';
	}
	if (argc > 3 && (sscanf(argv[3], "%d/%d/%d", &split[0], &split[1], &split[2]) != 3 || split[0] < 0 ||
			 split[1] < 0 || split[2] < 0 || split[0] + split[1] + split[2] != 100))
		threads = 0;
	if (threads < 1 || threads > 64) {
		fprintf(stderr, "usage: cpusplit [SECONDS, or SECONDSc of CPU time] [THREADS 1-64] "
			"[A/B/C percent in hot_a/hot_b/hot_c]\n");
		return 2;
	}
	signal(SIGUSR1, on_usr1);
	for (int i = 1; i < threads; i++)
		pthread_create(&tid[i], NULL, worker, NULL);
	worker(NULL);
	for (int i = 1; i < threads; i++)
		pthread_join(tid[i], NULL);
	return 0;
}
