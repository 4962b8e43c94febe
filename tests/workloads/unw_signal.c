/* unw_signal.c: CPU time inside a signal handler (SIGPROF every 10 ms of CPU,
 * then about 2 ms of work in handler_work), so stacks cross the kernel's
 * signal frame (__restore_rt) back into busy_loop. -O2, no frame pointers.
 * Usage: unw_signal [SECONDS] */
/* BUILD: -O2 -g */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static volatile uint64_t sink;

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

__attribute__((noinline)) void handler_work(void)
{
	uint64_t end = clock_ns(CLOCK_THREAD_CPUTIME_ID) + 2000000, x = sink;

	do
		for (int i = 0; i < 20000; i++)
			x = x * 6364136223846793005ull + 1;
	while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end);
	sink = x;
}

__attribute__((noinline)) void on_prof(int sig)
{
	(void)sig;
	handler_work();
}

__attribute__((noinline)) void busy_loop(uint64_t stop)
{
	uint64_t x = sink;

	while (clock_ns(CLOCK_MONOTONIC) < stop)
		for (int i = 0; i < 20000; i++)
			x = (x ^ (x >> 29)) * 0xbf58476d1ce4e5b9ull;
	sink = x;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5;
	struct sigaction sa;
	struct itimerval it = { { 0, 10000 }, { 0, 10000 } };

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_prof;
	sigaction(SIGPROF, &sa, NULL);
	setitimer(ITIMER_PROF, &it, NULL);
	busy_loop(clock_ns(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9));
	return 0;
}
