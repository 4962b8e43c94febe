/* procmaps_read.h: a process's executable mappings, asked of the kernel one by one
 * (PROCMAP_QUERY, Linux 6.11+) instead of formatting and parsing every line of its maps. */
#ifndef PROWL_PROCMAPS_READ_H
#define PROWL_PROCMAPS_READ_H

#include "procmaps.h"

/* The executable mappings of the maps file at path ("/proc/PID/maps") into *ret,
 * as procmaps_parse(PROCMAPS_EXEC_ONLY) gives them from its text (read when the
 * kernel has no PROCMAP_QUERY), but for a 32-bit process, which is given the
 * 64-bit [vsyscall] line all the same. An exited process gives 0 mappings. Returns 0,
 * -ESRCH when path does not exist, -ENOMEM or another -errno. */
int procmaps_read_exec(const char *path, struct procmaps *ret);

#endif
