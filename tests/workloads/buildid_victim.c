/* buildid_victim.c: the victim of the forged build id attack (tests/e2e/test_untrusted.py):
 * spends CPU in victim_hot, called by victim_loop from main, for SECONDS. Its build id is
 * fixed, so that a forger can claim it; -O2 without frame pointers, so its stacks are
 * whole only when unwound with its own .eh_frame. The forger is this file with its names
 * (and unwind info) changed in the middle, where the content hash does not look.
 * Usage: buildid_victim [SECONDS] */
/* BUILD: -O2 -g -fomit-frame-pointer -Wl,--build-id=0x5eed0f0a11ced0ffee5eed0f0a11ced0ffee0015 */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) uint64_t victim_hot(uint64_t x)
{
	for (int i = 0; i < 50000; i++)
		x = (x ^ (x >> 31)) * 0x94d049bb133111ebull + (uint64_t)i;
	return x;
}

__attribute__((noinline)) void victim_loop(double seconds)
{
	uint64_t x = sink;

	for (double stop = now() + seconds; now() < stop;)
		x = victim_hot(x);
	sink = x;
}

int main(int argc, char **argv)
{
	victim_loop(argc > 1 ? atof(argv[1]) : 5);
	return 0;
}
