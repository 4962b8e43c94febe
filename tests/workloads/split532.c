/* split532.c: spends its threads' CPU time 50/30/20 in share50, share30 and share20,
 * built like distribution software (-O2, no frame pointers): the kernel matrix's workload.
 * Usage: split532 [SECONDS] [THREADS 1-64] */
/* BUILD: -O2 -g -fomit-frame-pointer -pthread */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The leaf. Without frame pointers it has no frame, and its callers are found
 * only through CFI. The stack slot makes gcc give it a frame when built with
 * frame pointers (it leaves a leaf that never touches the stack without one,
 * -fno-omit-frame-pointer or not). */
__attribute__((noinline)) uint64_t mix(uint64_t x, int n)
{
	volatile uint64_t last = 0;

	for (int i = 0; i < n; i++) {
		x ^= x >> 29;
		x *= 0xbf58476d1ce4e5b9ull;
		x += (uint64_t)i;
		last = x;
	}
	return x + last;
}

/* The split is one of work, not of time: each share runs the same code a fixed
 * number of times, so the CPU time it takes is in proportion whatever else
 * happens. Clocks would not do: a CPU that stalls (an emulated one, a busy
 * host) charges the stall to whichever share runs, and a short share ends
 * early more often than a long one. */
#define SHARE(name)                                      \
	__attribute__((noinline)) void name(unsigned int n) \
	{                                                \
		uint64_t x = sink;                       \
							 \
		for (unsigned int i = 0; i < n; i++)     \
			x = mix(x, 1000);                \
		sink = x;                                \
	}
SHARE(share50)
SHARE(share30)
SHARE(share20)

static double seconds = 5;

/* Rounds of 10 units of 20-60 calls of mix, the unit drawn afresh each round,
 * so that no sampling frequency can lock onto the pattern. */
__attribute__((noinline)) void rounds(uint64_t stop, unsigned int seed)
{
	while (clock_ns(CLOCK_MONOTONIC) < stop) {
		unsigned int unit = 20 + rand_r(&seed) % 41;

		share50(5 * unit);
		share30(3 * unit);
		share20(2 * unit);
	}
}

__attribute__((noinline)) void *thread_main(void *arg)
{
	rounds(clock_ns(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9), (unsigned int)(uintptr_t)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	pthread_t tid[64];

	if (argc > 1)
		seconds = atof(argv[1]);
	if (threads < 1 || threads > 64 || seconds <= 0) {
		fprintf(stderr, "usage: split532 [SECONDS] [THREADS 1-64]\n");
		return 2;
	}
	for (int i = 0; i < threads; i++)
		pthread_create(&tid[i], NULL, thread_main, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	return 0;
}
