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
};

void summary_print(FILE *f, const struct profile *p, const struct summary_info *info);
/* Only the two top-10 tables (by self, by total), as `prowl report` prints them. */
void summary_print_top(FILE *f, const struct profile *p);

#endif
