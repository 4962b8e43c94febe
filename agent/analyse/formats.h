/* formats.h: the JSON outputs of `prowl report`: speedscope's file format, and
 * prowl's own JSON (functions with self and total, and every distinct stack). */
#ifndef PROWL_FORMATS_H
#define PROWL_FORMATS_H

#include <stddef.h>
#include <stdint.h>

struct view;

struct format_meta {
	const char *title;
	int64_t start_ns, end_ns, period;
	size_t nfiles;
	char *const *labels; /* "NAME=VALUE" */
	size_t nlabels;
};

int format_speedscope(const struct view *v, const struct format_meta *m, char **ret_buf, size_t *ret_len);
int format_json(const struct view *v, const struct format_meta *m, char **ret_buf, size_t *ret_len);

#endif
