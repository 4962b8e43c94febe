/* record.h: `prowl record`, the one-shot capture of PIDs, a command or the
 * whole host into a pprof or folded file. */
#ifndef PROWL_RECORD_H
#define PROWL_RECORD_H

/* Returns the process exit code: 0 ok, 1 failure, 2 usage error. */
int record_main(int argc, char **argv);

#endif
