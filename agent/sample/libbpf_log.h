/* libbpf_log.h: routes libbpf's messages (and the verifier's log) through prowl's
 * logger: one debug line per line of theirs with -v, nothing otherwise. */
#ifndef PROWL_LIBBPF_LOG_H
#define PROWL_LIBBPF_LOG_H

#include <stddef.h>

#define LIBBPF_LOG_WHY_MAX 256

/* Installs the callback; call before the first libbpf call. */
void libbpf_log_setup(void);
/* The last line of the most recent verifier log that is not a statistic
 * ("" when there was none), e.g. "R1 invalid mem access 'scalar'". */
void libbpf_log_verifier_reason(char *buf, size_t size);

#endif
