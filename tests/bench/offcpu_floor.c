/* offcpu_floor.c: attaches offcpu_floor.bpf.o's empty programs (both, or those named) until
 * SIGINT or SIGTERM, for tests/bench/offcpu.sh: the cost of the hooks alone, beside prowl's.
 * Usage: offcpu_floor OBJECT [PROGRAM...]; prints "attached" once they are. */
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_program *p;

	if (argc < 2) {
		fprintf(stderr, "usage: offcpu_floor OBJECT [PROGRAM...]\n");
		return 2;
	}
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "offcpu_floor: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	bpf_object__for_each_program(p, obj) {
		bool want = argc == 2;

		for (int i = 2; i < argc; i++)
			want |= strcmp(argv[i], bpf_program__name(p)) == 0;
		bpf_program__set_autoload(p, want);
	}
	if (bpf_object__load(obj)) {
		fprintf(stderr, "offcpu_floor: cannot load %s (run as root)\n", argv[1]);
		return 1;
	}
	bpf_object__for_each_program(p, obj) {
		if (bpf_program__autoload(p) && !bpf_program__attach(p)) {
			fprintf(stderr, "offcpu_floor: cannot attach %s\n", bpf_program__name(p));
			return 1;
		}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("attached\n");
	fflush(stdout);
	while (!stop)
		pause();
	bpf_object__close(obj);
	return 0;
}
