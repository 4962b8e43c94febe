/* unw_recurse.c: recursion to a given depth, then CPU time in the deepest
 * frame, for the unwinder's depth limit (127 frames): depth 100 fits, depth
 * 500 does not. -O2, no frame pointers. Usage: unw_recurse DEPTH [SECONDS] */
/* BUILD: -O2 -g */
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

__attribute__((noipa)) uint64_t bottom(uint64_t stop)
{
	uint64_t x = sink;

	while (mono_ns() < stop)
		for (int i = 0; i < 100000; i++)
			x = x * 2862933555777941757ull + 3037000493ull;
	return x;
}

/* Not a tail call: the result is used after the call returns. */
__attribute__((noipa)) uint64_t descend(int depth, uint64_t stop)
{
	uint64_t r;

	if (depth <= 1)
		return bottom(stop);
	r = descend(depth - 1, stop);
	sink += r;
	return r ^ (uint64_t)depth;
}

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 100;
	double seconds = argc > 2 ? atof(argv[2]) : 5;

	sink = descend(depth, mono_ns() + (uint64_t)(seconds * 1e9));
	return 0;
}
