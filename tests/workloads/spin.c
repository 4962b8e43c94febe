/* spin.c: a CPU-bound benchmark workload: T threads do fixed units of hash-mixing work
 * for S seconds, through a few levels of calls so sampled stacks are non-trivial, and
 * the total units per second go to stdout as "ops_per_sec=N" (details on stderr).
 * Usage: spin [-t THREADS] [-s SECONDS]   (defaults: 2 threads, 10 s) */
/* BUILD: -O2 -g -fno-omit-frame-pointer -pthread */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256
#define WORDS 64 /* per-thread state: 512 bytes, stays in L1 */

static atomic_int stop;
static pthread_barrier_t start_barrier;
static volatile uint64_t sink;

struct worker {
	pthread_t tid;
	uint64_t units;
	uint64_t state[WORDS];
	char pad[64]; /* keep the hot counters of two threads off one cache line */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Level 4: a splitmix/murmur-style finalizer. */
static inline uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 29);
}

/* Level 3: mixes 16 words in place, a few rounds. */
__attribute__((noinline)) uint64_t spin_mix_block(uint64_t *w, uint64_t seed)
{
	for (int r = 0; r < 4; r++)
		for (int i = 0; i < 16; i++) {
			seed = mix(seed + w[i] + (uint64_t)i);
			w[i] ^= seed;
		}
	return seed;
}

/* Level 2: walks the state in blocks of 16 words. */
__attribute__((noinline)) uint64_t spin_stage_b(uint64_t *state, uint64_t seed)
{
	for (int b = 0; b < WORDS; b += 16)
		seed = spin_mix_block(state + b, seed);
	return seed;
}

/* Level 1: one work unit (a fixed amount of work, a few microseconds). */
__attribute__((noinline)) uint64_t spin_unit(uint64_t *state, uint64_t seed)
{
	for (int k = 0; k < 8; k++)
		seed = spin_stage_b(state, seed ^ (uint64_t)k);
	return seed;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t seed = (uintptr_t)w, units = 0;

	for (int i = 0; i < WORDS; i++)
		w->state[i] = mix(seed + i);
	pthread_barrier_wait(&start_barrier);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		seed = spin_unit(w->state, seed);
		units++;
	}
	w->units = units;
	sink ^= seed;
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: spin [-t THREADS 1-%d] [-s SECONDS]\n", MAX_THREADS);
	exit(2);
}

int main(int argc, char **argv)
{
	int threads = 2, opt;
	double seconds = 10, t0, t1;
	struct worker *w;
	struct rusage ru;
	struct timespec ts;
	uint64_t total = 0;

	while ((opt = getopt(argc, argv, "t:s:h")) != -1) {
		switch (opt) {
		case 't': threads = atoi(optarg); break;
		case 's': seconds = atof(optarg); break;
		default: usage();
		}
	}
	if (optind != argc || threads < 1 || threads > MAX_THREADS || !(seconds > 0))
		usage();

	w = calloc(threads, sizeof(*w));
	if (!w) {
		perror("spin: calloc");
		return 1;
	}
	pthread_barrier_init(&start_barrier, NULL, threads + 1);
	for (int i = 0; i < threads; i++)
		if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]) != 0) {
			fprintf(stderr, "spin: pthread_create failed\n");
			return 1;
		}
	pthread_barrier_wait(&start_barrier);
	t0 = now_s();
	ts.tv_sec = (time_t)seconds;
	ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) != 0)
		;
	atomic_store(&stop, 1);
	t1 = now_s();
	for (int i = 0; i < threads; i++) {
		pthread_join(w[i].tid, NULL);
		total += w[i].units;
	}
	getrusage(RUSAGE_SELF, &ru);
	printf("ops_per_sec=%.0f\n", total / (t1 - t0));
	fprintf(stderr, "spin: threads=%d wall_s=%.3f units=%llu cpu_s=%.3f\n", threads, t1 - t0,
		(unsigned long long)total,
		ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
	free(w);
	return 0;
}
