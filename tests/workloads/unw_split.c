/* unw_split.c: a multithreaded workload built like distribution software (-O2,
 * no frame pointers) for the DWARF unwinder: threads spend CPU in work_a and
 * work_b in a 3:1 ratio through several call levels, one frame with alloca
 * (an rbp-based CFA) and a frameless leaf, so stacks are only complete when
 * unwound from CFI. Usage: unw_split [SECONDS] [THREADS 1-64] */
/* BUILD: -O2 -g -pthread */
#include <alloca.h>
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

/* A leaf without a frame: its caller is only found through CFI. */
__attribute__((noinline)) uint64_t crunch(uint64_t x, int n)
{
	for (int i = 0; i < n; i++) {
		x ^= x >> 31;
		x *= 0x9e3779b97f4a7c15ull;
		x += (uint64_t)i;
	}
	return x;
}

/* alloca makes gcc keep a frame pointer here: the CFA is rbp-based. */
__attribute__((noinline)) uint64_t stage(uint64_t x, int n)
{
	volatile char *buf = alloca(64 + (x & 63));

	buf[0] = (char)x;
	return crunch(x + buf[0], n);
}

/* Spins for ns of this thread's CPU time. */
__attribute__((noinline)) void work_a(uint64_t ns)
{
	uint64_t end = clock_ns(CLOCK_THREAD_CPUTIME_ID) + ns, x = sink;

	do
		x = stage(x, 20000);
	while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end);
	sink = x;
}

__attribute__((noinline)) void work_b(uint64_t ns)
{
	uint64_t end = clock_ns(CLOCK_THREAD_CPUTIME_ID) + ns, x = sink;

	do
		x = crunch(x, 20000);
	while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end);
	sink = x;
}

static double seconds = 5;

__attribute__((noinline)) void dispatch(uint64_t stop)
{
	while (clock_ns(CLOCK_MONOTONIC) < stop) {
		work_a(3000000);
		work_b(1000000);
	}
}

__attribute__((noinline)) void *thread_main(void *arg)
{
	(void)arg;
	dispatch(clock_ns(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9));
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 2 ? atoi(argv[2]) : 2;
	pthread_t tid[64];

	if (argc > 1)
		seconds = atof(argv[1]);
	if (threads < 1 || threads > 64) {
		fprintf(stderr, "usage: unw_split [SECONDS] [THREADS 1-64]\n");
		return 2;
	}
	for (int i = 0; i < threads; i++)
		pthread_create(&tid[i], NULL, thread_main, NULL);
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	return 0;
}
