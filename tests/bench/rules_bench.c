/* rules_bench.c: CPU cost per window and memory of recording rules on a synthetic
 * busy window (many series, stacks and functions), cold and warm function cache. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aggregate.h"
#include "analyse/rules.h"
#include "log.h"

#define NSERIES  50
#define NSTACKS  400   /* per series */
#define DEPTH    30
#define NFUNCS   3000  /* distinct names on the host */
#define WINDOWS  20

static const char *const series_labels[] = { "service_name", "host_name" };

/* 20 rules with function regexes, of the kinds docs/metrics.md shows. */
static const char *const regexes[20] = {
	"^runtime\\.(gc|mallocgc)", "^std::vector<", "alloc", "free$", "^__x64_sys_", "^do_syscall_64$",
	"^(memcpy|memmove|memset)", "Lock$", "^ns3::mod1[0-9]::", "^ns[0-9]::mod2[0-9]::f[0-9]+$",
	"::(encode|decode)", "^ssl_|^SSL_", "^deflate|^inflate", "json", "^Py(Eval|Object)_", "^hot_[ab]$",
	"sort", "^ns[0-9]::mod4::", "hash", "compress",
};

static double thread_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t heap(void)
{
	return mallinfo2().uordblks;
}

static void fill(struct profile *p, unsigned int seed, char (*names)[64])
{
	uint32_t map = 0;

	profile_set_period(p, 10000000);
	profile_mapping(p, &(struct prof_mapping_in){ .key = 1, .limit = 1ull << 40, .filename = "/bin/x" }, &map);
	for (int s = 0; s < NSTACKS; s++) {
		uint32_t locs[DEPTH];

		for (int d = 0; d < DEPTH; d++) {
			unsigned int f = (unsigned int)rand_r(&seed) % NFUNCS;
			struct prof_frame fr = { .function = names[f] };

			/* One address per function: locations are shared between stacks. */
			if (profile_add_location(p, map, 0x1000 + f * 16ull, &fr, 1, true, &locs[d]) < 0)
				exit(1);
		}
		if (profile_add_sample(p, 0, locs, DEPTH, 1 + rand_r(&seed) % 5) < 0)
			exit(1);
	}
}

int main(void)
{
	static const char *const kinds[] = { "runtime.gcDrain", "std::vector<int>::push_back", "malloc", "free",
					     "__x64_sys_read", "memcpy", "pthread_mutex_Lock", "json_parse",
					     "PyEval_EvalFrame", "qsort", "hash_bytes", "deflate_slow" };
	static char names[NFUNCS][64];
	struct recording_rules_config c = {};
	struct rules_opts o = { .series_labels = series_labels, .nseries_labels = 2, .max_series = 1000 };
	struct profile *prof[NSERIES];
	struct series_label labels[NSERIES][2];
	char svc[NSERIES][32];
	struct export_series series[NSERIES];
	struct export_batch b = { .series = series, .nseries = NSERIES, .period_ns = 10000000 };
	struct rules_stats st;
	struct rules *e;
	size_t h0, h1;
	double t, cold, warm = 0;

	log_set_level(LOG_LVL_ERROR);
	for (int i = 0; i < NFUNCS; i++) {
		if (i % 10 == 0)
			snprintf(names[i], sizeof(names[i]), "%s_%d", kinds[i / 10 % 12], i);
		else
			snprintf(names[i], sizeof(names[i]), "ns%d::mod%d::f%d", i % 7, i % 50, i);
	}
	for (int i = 0; i < NSERIES; i++) {
		prof[i] = profile_new();
		fill(prof[i], (unsigned int)i + 1, names);
		snprintf(svc[i], sizeof(svc[i]), "service%d", i);
		labels[i][0] = (struct series_label){ "service_name", svc[i] };
		labels[i][1] = (struct series_label){ "host_name", "bench" };
		series[i] = (struct export_series){ .labels = labels[i], .nlabels = 2, .prof = prof[i] };
	}
	c.n = 20;
	c.rules = calloc(c.n, sizeof(*c.rules));
	for (size_t i = 0; i < c.n; i++) {
		static char *group[] = { "service_name", "function" };
		char *m = NULL;

		if (asprintf(&m, "bench_rule%zu_cpu_seconds_total", i) < 0)
			return 1;
		c.rules[i] = (struct recording_rule_config){ .metric = m, .function = strdup(regexes[i]),
							     .self = i % 4 == 3, .group_by = group, .ngroup = 2 };
	}
	h0 = heap();
	if (rules_new(&c, &o, &e) < 0)
		return 1;
	h1 = heap();
	t = thread_s();
	rules_count(e, &b);
	cold = thread_s() - t;
	for (int w = 1; w < WINDOWS; w++) {
		t = thread_s();
		rules_count(e, &b);
		warm += thread_s() - t;
	}
	warm /= WINDOWS - 1;
	rules_get_stats(e, &st);
	printf("window: %d series x %d stacks x %d frames, %d distinct functions; 20 rules with function "
	       "regexes (5 self), group_by [service_name, function]\n", NSERIES, NSTACKS, DEPTH, NFUNCS);
	printf("cpu per window: first (cold function cache) %.2f ms, then %.2f ms (mean of %d)\n", cold * 1e3,
	       warm * 1e3, WINDOWS - 1);
	printf("memory: compiled rules %.1f KiB (heap), counters+cache+scratch %.1f KiB (prowl_recording_bytes), "
	       "heap now %.1f KiB above the start; %u label sets\n", (h1 - h0) / 1024.0, st.mem_bytes / 1024.0,
	       (heap() - h0) / 1024.0, st.series);
	rules_free(e);
	for (size_t i = 0; i < c.n; i++) {
		free(c.rules[i].metric);
		free(c.rules[i].function);
	}
	free(c.rules);
	for (int i = 0; i < NSERIES; i++)
		profile_free(prof[i]);
	return 0;
}
