/* unw_qsort.c: CPU time in a qsort comparator, so the profile's stacks pass
 * through Debian's libc (built without frame pointers): cmp_slow is called by
 * qsort's internals, which are called by sort_once. -O2, no frame pointers.
 * Usage: unw_qsort [SECONDS] */
/* BUILD: -O2 -g */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define N 4096

static volatile uint64_t sink;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

__attribute__((noinline)) int cmp_slow(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	for (int i = 0; i < 200; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		y = y * 6364136223846793005ull + 1442695040888963407ull;
	}
	sink = x ^ y;
	return *(const uint64_t *)a < *(const uint64_t *)b ? -1 : *(const uint64_t *)a > *(const uint64_t *)b;
}

__attribute__((noinline)) void sort_once(uint64_t *v, uint64_t seed)
{
	for (int i = 0; i < N; i++) {
		seed = seed * 6364136223846793005ull + 1;
		v[i] = seed >> 11;
	}
	qsort(v, N, sizeof(*v), cmp_slow);
	sink += v[N / 2]; /* work after the call: not a tail call, so this frame stays */
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5;
	uint64_t stop = mono_ns() + (uint64_t)(seconds * 1e9), seed = 1;
	static uint64_t v[N];

	while (mono_ns() < stop)
		sort_once(v, seed++);
	return 0;
}
