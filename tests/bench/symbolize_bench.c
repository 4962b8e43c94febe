/* symbolize_bench.c: cold symbolization of N distinct addresses of one file (time, peak
 * RSS) in a demangling mode, and the heap of a perf map of N JIT symbols (issue 8).
 * Usage: symbolize_bench FILE N templates|full|none  |  symbolize_bench --perfmap N */
#include <fcntl.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "demangle.h"
#include "log.h"
#include "objcache.h"
#include "object.h"
#include "perfmap.h"
#include "symbolizer.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long peak_kib(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/* The largest executable PT_LOAD of path, in ELF virtual addresses: the module's own
 * range is its first executable segment, which in a big binary is often a few pages of
 * .init and .plt before the text. */
static int text_range(const char *path, uint64_t *lo, uint64_t *hi)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct obj_load *loads = NULL;
	size_t n = 0;
	Elf *e;

	*lo = *hi = 0;
	if (fd < 0)
		return -1;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (e && obj_read_loads(e, &loads, &n) == 0)
		for (size_t i = 0; i < n; i++)
			if (loads[i].exec && loads[i].memsz > *hi - *lo) {
				*lo = loads[i].vaddr;
				*hi = loads[i].vaddr + loads[i].memsz;
			}
	free(loads);
	elf_end(e);
	close(fd);
	return *hi > *lo ? 0 : -1;
}

static int perfmap_bench(unsigned n)
{
	struct perfmap_budget b = { .max_bytes = 1ull << 30 };
	struct perfmap *pm = NULL;
	char line[160];

	for (unsigned i = 0; i < n; i++) {
		int len = snprintf(line, sizeof(line), "%x 40 LazyCompile:*handler_%u /srv/app/routes/module_%u.js:%u:%u\n",
				   0x10000000 + 64 * i, i, i % 97, i % 500 + 1, i % 40 + 1);

		if (perfmap_parse(&pm, line, (size_t)len, &b) != len)
			return 1;
	}
	printf("perfmap symbols=%zu heap_bytes=%llu bytes_per_symbol=%.1f\n", perfmap_count(pm),
	       (unsigned long long)b.bytes, (double)b.bytes / (double)perfmap_count(pm));
	perfmap_free(pm, &b);
	return 0;
}

int main(int argc, char **argv)
{
	struct symbolizer_opts opts = { .max_cached_frames = 1u << 20 };
	struct sym_frame fr[SYM_MAX_INLINE];
	const struct sym_module *mod;
	struct symbolizer *s;
	enum sym_demangle mode;
	size_t n, named = 0, mangled = 0;
	unsigned count;
	uint64_t lo, hi;
	double t0, t1;
	bool ok;

	log_set_level(LOG_LVL_ERROR);
	if (argc == 3 && strcmp(argv[1], "--perfmap") == 0)
		return perfmap_bench((unsigned)atoi(argv[2]));
	if (argc != 4 || sym_demangle_parse(argv[3], &mode) < 0) {
		fprintf(stderr, "usage: symbolize_bench FILE N templates|full|none | symbolize_bench --perfmap N\n");
		return 2;
	}
	count = (unsigned)atoi(argv[2]);
	if (count == 0) {
		fprintf(stderr, "symbolize_bench: N must be a positive number of addresses\n");
		return 2;
	}
	opts.demangle = mode;
	if (symbolizer_new(&opts, &s) < 0 || symbolizer_module_from_file(s, argv[1], &mod) < 0) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
		return 1;
	}
	if (text_range(argv[1], &lo, &hi) < 0 || (hi - lo) / count < 8) {
		fprintf(stderr, "%s: no executable segment of 8 bytes per address (%u addresses)\n", argv[1], count);
		return 1;
	}
	t0 = now();
	for (unsigned i = 0; i < count; i++) {
		/* N distinct addresses spread over the text, 1 byte apart at least. */
		uint64_t a = lo + (hi - lo) / count * i + i % 7;

		if (symbolizer_frames(s, mod, a, fr, SYM_MAX_INLINE, &n, &ok) < 0)
			return 1;
		named += ok;
		mangled += n && fr[0].system_name != NULL;
	}
	t1 = now();
	printf("file=%s text_bytes=%llu addresses=%u mode=%s seconds=%.3f us_per_address=%.2f named=%zu demangled=%zu peak_rss_kib=%ld\n",
	       argv[1], (unsigned long long)(hi - lo), count, argv[3], t1 - t0, (t1 - t0) * 1e6 / count, named, mangled, peak_kib());
	symbolizer_free(s);
	return 0;
}
