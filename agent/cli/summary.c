/* summary.c: prints what a capture found: samples, losses, distinct stacks, the
 * share of frames with a function name, and the top 10 functions by self and total. */
#include "summary.h"

#include <inttypes.h>
#include <string.h>

#include "aggregate.h"
#include "escape.h"

#define TOP_N 10

static void print_top(FILE *f, const struct profile *p, bool by_total, uint64_t samples)
{
	struct prof_top_entry e[TOP_N];
	int n = profile_top(p, by_total, e, TOP_N);

	fprintf(f, "\nTop %d functions by %s time:\n", TOP_N, by_total ? "total (self + callees)" : "self");
	fprintf(f, "  %7s %7s  %s\n", "self%", "total%", "function");
	for (int i = 0; i < n; i++) {
		const char *file = e[i].file ? strrchr(e[i].file, '/') : NULL;
		char fn[512], fl[256];

		file = file ? file + 1 : e[i].file;
		/* Names come from the profiled programs: no escape sequences to the terminal. */
		fprintf(f, "  %6.2f%% %6.2f%%  %s%s%s%s\n", samples ? 100.0 * e[i].self / samples : 0.0,
			samples ? 100.0 * e[i].total / samples : 0.0, printable(e[i].function, fn, sizeof(fn)),
			file ? " (" : "", file ? printable(file, fl, sizeof(fl)) : "", file ? ")" : "");
	}
}

void summary_print(FILE *f, const struct profile *p, const struct summary_info *info)
{
	struct profile_stats st;

	profile_get_stats(p, &st);
	fprintf(f, "Wrote %s: %" PRIu64 " samples in %.1fs, %" PRIu64 " lost, %u distinct stacks\n",
		info->output, st.samples, info->elapsed_ns / 1e9, info->lost, st.stacks);
	fprintf(f, "Frames with a function name: %.1f%% (%" PRIu64 " of %" PRIu64 ")\n",
		st.frames ? 100.0 * st.frames_symbolized / st.frames : 0.0, st.frames_symbolized, st.frames);
	if (info->lost)
		fprintf(f, "Warning: %" PRIu64 " samples were lost because the ring buffer was full\n", info->lost);
	if (info->ingest_errors)
		fprintf(f, "Warning: %" PRIu64 " samples could not be processed\n", info->ingest_errors);
	if (info->kernel_addrs_hidden)
		fprintf(f, "Note: kernel addresses are hidden (kernel.kptr_restrict); kernel frames keep raw addresses\n");
	if (!st.samples) {
		fprintf(f, "No samples: %s.\n", SUMMARY_NO_SAMPLES_HINT);
		return;
	}
	if (info->max_samples > 0 && st.samples < 0.05 * info->max_samples)
		fprintf(f, "Note: what was profiled was on a CPU only %.1f%% of the time (%" PRIu64 " samples), so the "
			"shares below are rough; for a fuller profile, record a busy process (-p PID) or a command (-- COMMAND)\n", 100.0 * st.samples / info->max_samples,
			st.samples);
	summary_print_top(f, p);
}

void summary_print_top(FILE *f, const struct profile *p)
{
	struct profile_stats st;

	profile_get_stats(p, &st);
	if (!st.samples) {
		fprintf(f, "  (no samples)\n");
		return;
	}
	print_top(f, p, false, st.samples);
	print_top(f, p, true, st.samples);
}
