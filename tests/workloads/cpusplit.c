/* cpusplit.c: a test workload that spends CPU in hot_a and hot_b in a 3:1 ratio (1:3
 * after SIGUSR1), with an always-inline helper, so profiles can be checked against a known answer. */
/* BUILD: -O2 -g -fno-omit-frame-pointer -pthread */
#include <pthread.h>
#include <signal.h>
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

static double seconds = 5;
static volatile sig_atomic_t flipped; /* SIGUSR1: the split becomes 1:3 */

static void on_usr1(int sig)
{
	(void)sig;
	flipped = 1;
}

static void *worker(void *arg)
{
	uint64_t stop = now_ns() + (uint64_t)(seconds * 1e9);

	(void)arg;
	while (now_ns() < stop) {
		hot_a(flipped ? 1000000 : 3000000); /* 3 ms, or 1 ms after SIGUSR1 */
		hot_b(flipped ? 3000000 : 1000000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	pthread_t tid[64];

	if (argc > 1)
		seconds = atof(argv[1]);
	if (threads < 1 || threads > 64) {
		fprintf(stderr, "usage: cpusplit [SECONDS] [THREADS 1-64]\n");
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
