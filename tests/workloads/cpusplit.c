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

/* Each round spends 3u in hot_a and u in hot_b (the other way round after SIGUSR1),
 * or split percent of 10u in each, u drawn from [0.5, 1.5] ms. A fixed 4 ms round
 * (4.08 ms with the loops' overshoot) is a fifth of the 49 Hz sampling period: every
 * sample then fell at the same point of the round, and a window showed hot_a at 0% or
 * 100%. Random round lengths keep the split but not the phase. */
static void *worker(void *arg)
{
	uint64_t stop = (cpu_seconds ? cpu_ns() : now_ns()) + (uint64_t)(seconds * 1e9);
	uint64_t rnd = now_ns() ^ (uintptr_t)&stop;

	(void)arg;
	/* One round is 4u of CPU time at 3:1, or 10u with a split. */
	while ((cpu_seconds ? cpu_ns() : now_ns()) < stop) {
		uint64_t u;

		rnd = rnd * 6364136223846793005ull + 1442695040888963407ull; /* an LCG (Knuth's MMIX) */
		u = 500000 + (rnd >> 33) % 1000001;
		if (!split[0] && !split[1] && !split[2]) {
			hot_a(flipped ? u : 3 * u); /* 3:1, or 1:3 after SIGUSR1 */
			hot_b(flipped ? 3 * u : u);
			continue;
		}
		if (split[0])
			hot_a(split[0] * u / 10);
		if (split[1])
			hot_b(split[1] * u / 10);
		if (split[2])
			hot_c(split[2] * u / 10);
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
