/* report.h: the commands that read profiles back: `prowl report` (merge, top,
 * flame graph, conversions) and `prowl diff` (share deltas and the CI gate). */
#ifndef PROWL_REPORT_H
#define PROWL_REPORT_H

/* Both return the process exit status. */
int report_main(int argc, char **argv);
/* 0 no regression, 1 input, 2 usage, 3 regression, 4 too few samples. */
int diff_main(int argc, char **argv);

#endif
