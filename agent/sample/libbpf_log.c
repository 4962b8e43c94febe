/* libbpf_log.c: libbpf's print callback: its messages go through prowl's logger in every
 * log format, and the verifier's reason for refusing a program is kept for the error line. */
#include "libbpf_log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "log.h"

/* libbpf's messages go through prowl's logger: every line at debug level (with
 * -v), none otherwise. The verifier's reason for refusing a program (the last
 * line of its log that is not a statistic) is kept for the one error line. */
static char verifier_why[LIBBPF_LOG_WHY_MAX];
static bool in_verifier_log;
static pthread_mutex_t libbpf_log_lock = PTHREAD_MUTEX_INITIALIZER;

static void note_verifier_line(const char *l)
{
	if (strstr(l, "-- BEGIN PROG LOAD LOG --")) {
		in_verifier_log = true;
		verifier_why[0] = 0;
	} else if (strstr(l, "-- END PROG LOAD LOG --")) {
		in_verifier_log = false;
	} else if (in_verifier_log && l[0] && strncmp(l, "processed ", 10) != 0 &&
		   strncmp(l, "verification time", 17) != 0 && strncmp(l, "stack depth", 11) != 0) {
		snprintf(verifier_why, sizeof(verifier_why), "%s", l);
	}
}

static int libbpf_print(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	bool verbose = log_get_level() >= LOG_LVL_DEBUG;
	char *msg = NULL, *line, *save = NULL;

	if (lvl == LIBBPF_DEBUG && !verbose)
		return 0;
	/* One message may hold a whole verifier log: no fixed-size buffer. */
	if (vasprintf(&msg, fmt, ap) < 0)
		return 0;
	pthread_mutex_lock(&libbpf_log_lock);
	for (line = strtok_r(msg, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "libbpf: ", 8) == 0)
			line += 8;
		if (verbose)
			log_debug("libbpf: %s", line);
		note_verifier_line(line);
	}
	pthread_mutex_unlock(&libbpf_log_lock);
	free(msg);
	return 0;
}

void libbpf_log_verifier_reason(char *buf, size_t size)
{
	pthread_mutex_lock(&libbpf_log_lock);
	snprintf(buf, size, "%s", verifier_why);
	pthread_mutex_unlock(&libbpf_log_lock);
}

void libbpf_log_setup(void)
{
	libbpf_set_print(libbpf_print);
}
