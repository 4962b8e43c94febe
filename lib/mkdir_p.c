/* mkdir_p.c: creates a directory and its missing parents, like `mkdir -p`,
 * for the agent's state and profile directories. */
#include "mkdir_p.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int mkdir_p(const char *path, mode_t mode)
{
	char *p, *tmp = strdup(path);
	int r = 0;

	if (!tmp)
		return -ENOMEM;
	for (p = tmp + 1;; p++) {
		if (*p == '/' || !*p) {
			char c = *p;

			*p = 0;
			if (mkdir(tmp, mode) < 0 && errno != EEXIST) {
				r = -errno;
				break;
			}
			if (!c)
				break;
			*p = c;
		}
	}
	free(tmp);
	return r;
}
