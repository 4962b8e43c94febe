/* pltcall.c: calls a tiny libc function (labs) through the PLT in a loop for S seconds, so
 * a good share of samples lands in the PLT stub itself: the PLT workload of issue 8.
 * Usage: pltcall [SECONDS]   (default 10) */
/* BUILD: -O1 -g -fno-builtin -fno-omit-frame-pointer */
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) long through_plt(long n)
{
	long sum = 0;

	for (long i = 0; i < n; i++)
		sum += labs(i - n / 2);
	return sum;
}

int main(int argc, char **argv)
{
	double end = now() + (argc > 1 ? atof(argv[1]) : 10);
	volatile long sink = 0;

	while (now() < end)
		sink += through_plt(1 << 20);
	return (int)(sink & 0);
}
