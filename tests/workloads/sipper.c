/* sipper.c: a process that uses about 1% of a CPU, in bursts of 0.2 ms every 20 ms
 * through sip_work -> sip_inner, for SECONDS: many of them at once are a host of
 * processes a profiler samples without filling the CPUs. -O2 without frame pointers.
 * Usage: sipper [SECONDS] */
/* BUILD: -O2 -g -fomit-frame-pointer */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) uint64_t sip_inner(uint64_t x)
{
	for (int i = 0; i < 1000; i++)
		x = (x ^ (x >> 29)) * 0xbf58476d1ce4e5b9ull + (uint64_t)i;
	return x;
}

__attribute__((noinline)) void sip_work(double burst)
{
	uint64_t x = sink;

	for (double stop = now() + burst; now() < stop;)
		x = sip_inner(x);
	sink = x;
}

int main(int argc, char **argv)
{
	double stop = now() + (argc > 1 ? atof(argv[1]) : 10);

	while (now() < stop) {
		sip_work(0.0002);
		usleep(20000);
	}
	return 0;
}
