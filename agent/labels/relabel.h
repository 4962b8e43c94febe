/* relabel.h: Prometheus relabeling over a process's label set: compiled rules
 * (POSIX ERE, fully anchored) applied once per process, never per sample. */
#ifndef PROWL_RELABEL_H
#define PROWL_RELABEL_H

#include <regex.h>
#include <stddef.h>

#include "labelset.h"
#include "relabel_config.h"

struct relabel;

/* Compiles the rules of c (checked by relabel_config_parse). Returns 0, -EINVAL
 * (a regex that does not compile; logged) or -ENOMEM. */
int relabel_new(const struct relabel_config *c, struct relabel **ret);
void relabel_free(struct relabel *r); /* accepts NULL */
size_t relabel_count(const struct relabel *r);

/* Applies every rule to s in order, as Prometheus does. Returns 1 when s is
 * kept, 0 when a keep/drop/keepequal/dropequal rule dropped it (s is then left
 * as it was at that rule), or -ENOMEM. Labels starting with "__" are not
 * removed here: the caller does that once relabeling is over. */
int relabel_apply(const struct relabel *r, struct labelset *s);

/* Expands a Go regexp template (replacement or target_label: $1, ${1}, $name,
 * ${name}, $$) against a match of an anchored regex compiled above, into out
 * (size outsz, NUL-terminated, cut at outsz - 1). */
void relabel_expand(const char *tmpl, const char *subject, const regmatch_t *m, size_t nm, char *out,
		    size_t outsz);

#endif
