/* html.h: writes a view as prowl's self-contained HTML flame graph, or, for a
 * two-sided view, as a diff flame graph coloured by the change of each frame's share. */
#ifndef PROWL_HTML_H
#define PROWL_HTML_H

#include <stddef.h>

struct profile;
struct view;

struct html_meta {
	const char *title;
	const char *const *lines; /* shown under the title: time range, samples, labels */
	size_t nlines;
};

/* A page for v (diff when v has two sides). *ret_buf is malloc'ed. */
int html_write(const struct view *v, const struct html_meta *m, char **ret_buf, size_t *ret_len);

/* A flame graph of one profile (record -o out.html, report): the time range and
 * sample count come from p, then the extra lines. */
int html_write_profile(const struct profile *p, const char *title, const char *const *extra, size_t nextra,
		       char **ret_buf, size_t *ret_len);

#endif
