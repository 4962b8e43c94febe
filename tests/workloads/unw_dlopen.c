/* unw_dlopen.c: loads unw_plugin (next to this binary) with dlopen() after a
 * short pause, then calls plugin_work from call_plugin until time is up. The
 * library appears after the process is known to the profiler, as with
 * plugins. Usage: unw_dlopen [SECONDS] */
/* BUILD: -O2 -g */
/* LIBS: -ldl */
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

__attribute__((noinline)) void call_plugin(void (*work)(int), uint64_t stop)
{
	while (mono_ns() < stop)
		work(50);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5;
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);
	void *h;
	void (*work)(int);

	if (n <= 0)
		return 1;
	path[n] = 0;
	strcpy(strrchr(path, '/') + 1, "unw_plugin");
	usleep(300000); /* let a profiler see the process before the library exists */
	h = dlopen(path, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "unw_dlopen: %s\n", dlerror());
		return 1;
	}
	work = (void (*)(int))dlsym(h, "plugin_work");
	if (!work)
		return 1;
	call_plugin(work, mono_ns() + (uint64_t)(seconds * 1e9));
	return 0;
}
