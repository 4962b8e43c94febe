/* encode_folded.c: serialises an aggregated profile as folded stacks, one sorted
 * "process;root;...;leaf count" line per distinct (process, expanded stack). */
#include "encode.h"
#include "aggregate.h"
#include "profile_data.h"
#include "label_names.h"
#include "sbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends s with the folded format's separators made harmless: ';' would split
 * a frame and a newline would split a line. Keeps the buffer NUL-terminated. */
static int sbuf_put_name(struct sbuf *b, const char *s)
{
	size_t n = strlen(s);

	if (sbuf_reserve(b, n))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == ';')
			c = ':';
		else if (c == '\n' || c == '\r')
			c = ' ';
		b->s[b->len++] = c;
	}
	b->s[b->len] = 0;
	return 0;
}

static const char *labelset_process(const struct profile *p, uint32_t lset_id, uint32_t key_str)
{
	if (lset_id && key_str) {
		const struct prof_lset *ls = &p->lsets[lset_id];

		for (uint32_t i = 0; i < ls->nlabels; i++) {
			const struct prof_label *l = &p->labels[ls->first_label + i];

			if (l->key_str == key_str && l->str_str)
				return profile_str(p, l->str_str);
		}
	}
	return "unknown";
}

/* Renders sample `id` without its count: process, then frames root first with
 * each location's inline chain outermost first. */
static int render_stack(const struct profile *p, uint32_t id, uint32_t process_key, struct sbuf *b)
{
	struct prof_sample_key k = profile_sample_key(p, id);
	const unsigned char *raw;
	size_t n;
	int err;

	b->len = 0;
	err = sbuf_put_name(b, labelset_process(p, k.labelset_id, process_key));
	raw = profile_stack(p, k.stack_id, &n);
	for (size_t i = n; i-- > 0 && !err;) {
		const struct prof_loc *loc = &p->locs[stack_loc(raw, i)];

		if (!loc->nlines) {
			err = sbuf_printf(b, ";0x%" PRIx64, loc->addr);
			continue;
		}
		for (uint32_t l = loc->nlines; l-- > 0 && !err;) {
			const struct prof_line *ln = &p->lines[loc->first_line + l];

			err = sbuf_putc(b, ';');
			if (!err)
				err = sbuf_put_name(b, profile_str(p, p->funcs[ln->function_id].name_str));
		}
	}
	return err;
}

static int line_cmp(const void *a, const void *b, void *arg)
{
	const struct intern *lines = arg;

	return strcmp(intern_str(lines, *(const uint32_t *)a), intern_str(lines, *(const uint32_t *)b));
}

int encode_folded(const struct profile *p, char **ret_buf, size_t *ret_len)
{
	uint32_t nsamples = intern_count(p->samples);
	uint32_t process_key = intern_find(p->strings, LABEL_PROCESS_NAME, strlen(LABEL_PROCESS_NAME));
	struct intern *lines = intern_new();
	struct sbuf line = {}, out = {};
	int64_t *counts = NULL;
	uint32_t *order = NULL, nlines;
	int err = 0;

	counts = calloc((size_t)nsamples + 1, sizeof(*counts));
	if (!lines || !counts || sbuf_reserve(&out, 0)) {
		err = -ENOMEM;
		goto out;
	}
	out.s[0] = 0;
	/* Different label sets (pids, threads) often fold to the same line. */
	for (uint32_t i = 1; i <= nsamples; i++) {
		uint32_t lid;

		err = render_stack(p, i, process_key, &line);
		if (!err)
			err = intern_put(lines, line.s, line.len, &lid, NULL);
		if (err)
			goto out;
		counts[lid] += profile_value(p, i);
	}

	nlines = intern_count(lines);
	order = calloc((size_t)nlines + 1, sizeof(*order));
	if (!order) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < nlines; i++)
		order[i] = i + 1;
	qsort_r(order, nlines, sizeof(*order), line_cmp, lines);
	for (uint32_t i = 0; i < nlines && !err; i++)
		err = sbuf_printf(&out, "%s %" PRId64 "\n", intern_str(lines, order[i]), counts[order[i]]);
	if (err)
		goto out;
	*ret_buf = out.s;
	*ret_len = out.len;
	out.s = NULL;
out:
	intern_free(lines);
	free(line.s);
	free(out.s);
	free(counts);
	free(order);
	return err;
}
