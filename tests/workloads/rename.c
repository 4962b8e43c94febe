/* rename.c: a test workload that names itself with bytes an attacker would choose
 * (prctl PR_SET_NAME: any bytes but NUL, up to 15) and then spins, so tests can check
 * that such a name reaches no output unescaped. Usage: rename NAME [SECONDS] */
/* BUILD: -O2 -g -fno-omit-frame-pointer */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

static volatile uint64_t sink;

__attribute__((noinline)) static void spin_named(double seconds)
{
	struct timespec t0, t;
	uint64_t x = sink;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ull + 1;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
	sink = x;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: rename NAME [SECONDS]\n");
		return 2;
	}
	if (prctl(PR_SET_NAME, argv[1], 0, 0, 0) < 0) {
		perror("prctl");
		return 1;
	}
	spin_named(argc > 2 ? atof(argv[2]) : 5);
	return 0;
}
