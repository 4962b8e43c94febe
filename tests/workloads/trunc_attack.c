/* trunc_attack.c: the truncation attack of issue 15 on a profiler that reads object files
 * through mmap. dlopen()s LIB (libtrunc.so, a library its user owns, built with -g from
 * two source files), runs the first file's code until SIGUSR1, then truncates LIB to
 * just past its last PT_LOAD segment (the code stays mapped and runs; section headers,
 * symbols and debug info are gone) and runs the second file's code for SECONDS.
 * Prints "truncated N M" (old and new size) when it has. Usage: trunc_attack LIB [SECONDS] */
/* BUILD: -O2 -g */
/* LIBS: -ldl */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t go;

static void on_usr1(int sig)
{
	(void)sig;
	go = 1;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The end of the last PT_LOAD's file bytes, or 0. */
static off_t load_end(int fd)
{
	Elf64_Ehdr eh;
	off_t end = 0;

	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || eh.e_phentsize != sizeof(Elf64_Phdr))
		return 0;
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != sizeof(ph))
			return 0;
		if (ph.p_type == PT_LOAD && (off_t)(ph.p_offset + ph.p_filesz) > end)
			end = (off_t)(ph.p_offset + ph.p_filesz);
	}
	return end;
}

int main(int argc, char **argv)
{
	double seconds = argc > 2 ? atof(argv[2]) : 10, stop;
	void (*first)(int), (*second)(int);
	struct stat st;
	off_t end;
	void *h;
	int fd;

	if (argc < 2) {
		fprintf(stderr, "usage: trunc_attack LIB [SECONDS]\n");
		return 2;
	}
	signal(SIGUSR1, on_usr1);
	h = dlopen(argv[1], RTLD_NOW);
	if (!h) {
		fprintf(stderr, "trunc_attack: %s\n", dlerror());
		return 1;
	}
	first = (void (*)(int))dlsym(h, "trunc_first_work");
	second = (void (*)(int))dlsym(h, "trunc_second_work");
	if (!first || !second)
		return 1;
	printf("ready\n");
	fflush(stdout);
	while (!go)
		first(20);
	fd = open(argv[1], O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !(end = load_end(fd)) || ftruncate(fd, end) < 0) {
		perror("trunc_attack: truncating");
		return 1;
	}
	close(fd);
	printf("truncated %lld %lld\n", (long long)st.st_size, (long long)end);
	fflush(stdout);
	for (stop = now() + seconds; now() < stop;)
		second(20);
	return 0;
}
