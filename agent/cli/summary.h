/* summary.h: the end-of-capture report for a person: counts, symbolization
 * coverage and the hottest functions by self and total time. */
#ifndef PROWL_SUMMARY_H
#define PROWL_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct profile;

struct summary_info {
	const char *output;
	uint64_t elapsed_ns;
	uint64_t samples_read;
	uint64_t lost;
	uint64_t ingest_errors;
	bool kernel_addrs_hidden;
	double max_samples; /* had the targets been on CPU all the time: freq x seconds x CPUs */
};

/* The hint for a capture without samples: why, and what to do. */
#define SUMMARY_NO_SAMPLES_HINT                                                                         \
	"nothing that was profiled ran on a CPU during the capture (prowl samples running code, not " \
	"sleeping or idle time): profile a busy process (-p PID), start one with -- COMMAND, or add "   \
	"--idle to count idle CPUs"


void summary_print(FILE *f, const struct profile *p, const struct summary_info *info);
/* Only the two top-10 tables (by self, by total), as `prowl report` prints them. */
void summary_print_top(FILE *f, const struct profile *p);

#endif
