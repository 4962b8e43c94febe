/* diff.h: per-function share deltas between the two sides of a view, the CI gate
 * that judges them against binomial noise, and the text and JSON renderings. */
#ifndef PROWL_DIFF_H
#define PROWL_DIFF_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sbuf.h"

struct view;

struct diff_row {
	uint32_t func;                    /* view function id */
	double base_self, new_self;       /* % of the side's samples */
	double base_total, new_total;
	double d_self, d_total;           /* new - base, percentage points */
	double noise_self, noise_total;   /* sigmas x the binomial standard error, pp */
	bool offender_self, offender_total;
	uint8_t apart;                    /* enum view_apart: not VIEW_CODE leaves the gate */
};

/* What each side is, for headers. */
struct diff_side {
	const char *source;  /* a file name or "DIR/service" */
	uint64_t samples;
	size_t nfiles;
	int64_t start_ns, end_ns;
};

struct diff_gate {
	bool on;
	double max_pp;       /* --fail-on-increase */
	double sigmas;       /* noise allowance in standard errors (default 3) */
	const regex_t *focus; /* NULL: every function */
};

/* Every function (not process frames) with samples on either side: the program's
 * code first, then the frames apart (markers, kernel exit paths); largest change
 * first within each. *ret is malloc'ed. */
int diff_rows(const struct view *v, double sigmas, struct diff_row **ret, size_t *ret_n);
/* Marks the offenders among the program's code (not the rows apart) and prints one
 * line per offender to out; returns their number. */
size_t diff_judge(const struct view *v, struct diff_row *rows, size_t n, const struct diff_gate *g, FILE *out);

int diff_text(struct sbuf *b, const struct view *v, const struct diff_row *rows, size_t n, size_t max_rows,
	      const struct diff_side *base, const struct diff_side *new);
int diff_json(struct sbuf *b, const struct view *v, const struct diff_row *rows, size_t n,
	      const struct diff_side *base, const struct diff_side *new, const struct diff_gate *g);

#endif
