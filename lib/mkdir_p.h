/* mkdir_p.h: `mkdir -p` for the agent's directories.
 * Returns 0 (also when the directory exists) or -errno of the failing mkdir. */
#ifndef PROWL_MKDIR_P_H
#define PROWL_MKDIR_P_H

#include <sys/types.h>

int mkdir_p(const char *path, mode_t mode);

#endif
