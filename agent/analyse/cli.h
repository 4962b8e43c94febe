/* cli.h: what `prowl report` and `prowl diff` share on the command line: --label
 * parsing, time options, output to a file or stdout, and the describing lines. */
#ifndef PROWL_ANALYSE_CLI_H
#define PROWL_ANALYSE_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "analyse/inputs.h"

#define CLI_MAX_LABELS 16

/* The input options report and diff share, for their getopt_long tables. */
enum { CLI_OPT_DIR = 0x100, CLI_OPT_SERVICE, CLI_OPT_LABEL, CLI_OPT_SAMPLE_TYPE };
#define CLI_INPUT_LONGOPTS                                              \
	{ "dir", required_argument, NULL, CLI_OPT_DIR },                \
	{ "service", required_argument, NULL, CLI_OPT_SERVICE },        \
	{ "label", required_argument, NULL, CLI_OPT_LABEL },            \
	{ "sample-type", required_argument, NULL, CLI_OPT_SAMPLE_TYPE }

/* Defaults: no time bounds, filters in labels. */
void cli_input_init(struct input_opts *in, struct pprof_filter *labels);
/* Takes getopt's c if it is one of the shared options: 1 when taken, 0 when not;
 * on a bad --label it logs why (pointing at 'prowl cmd --help') and returns -EINVAL. */
int cli_input_option(int c, char *arg, struct input_opts *in, struct pprof_filter *labels, const char *cmd);

/* Writes buf to path atomically, or to stdout when path is NULL or "-". */
int cli_write(const char *path, const void *buf, size_t len);
/* "2024-05-01 10:00:00 CEST to 10:00:10 (10.0 s)" or "" when unknown. */
void cli_time_range(int64_t start_ns, int64_t end_ns, char *buf, size_t n);
/* One line about an input set: "N samples in K files, <time range>, every 10.1 ms". */
void cli_describe(const struct input_set *s, char *buf, size_t n);
/* The shared series labels, space separated; "" when none. */
void cli_labels(const struct input_set *s, char *buf, size_t n);

#endif
