/* unw_fpleaf.c: built with frame pointers except in leaf functions
 * (-momit-leaf-frame-pointer): the time is in leaf_spin, a leaf without a
 * frame, called by middle, called by outer. A frame-pointer walk from the leaf
 * skips middle; CFI does not. Usage: unw_fpleaf [SECONDS] */
/* BUILD: -O2 -g -fno-omit-frame-pointer -momit-leaf-frame-pointer */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

__attribute__((noinline)) uint64_t leaf_spin(uint64_t x)
{
	for (int i = 0; i < 200000; i++)
		x = (x ^ (x >> 31)) * 0x9e3779b97f4a7c15ull + (uint64_t)i;
	return x;
}

__attribute__((noinline)) uint64_t middle(uint64_t x, uint64_t stop)
{
	while (mono_ns() < stop)
		x = leaf_spin(x);
	return x;
}

__attribute__((noinline)) uint64_t outer(uint64_t stop)
{
	uint64_t x = middle(sink, stop);

	sink = x;
	return x + 1;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5;

	sink = outer(mono_ns() + (uint64_t)(seconds * 1e9));
	return 0;
}
