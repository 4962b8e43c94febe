/* formats.c: writes a one-sided view as a speedscope "sampled" profile or as
 * prowl's JSON; both list each distinct stack once, root first, with its count. */
#include "analyse/formats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyse/jsonw.h"
#include "analyse/timespec.h"
#include "analyse/view.h"
#include "sbuf.h"

struct stacks_ctx {
	struct sbuf *b;
	const struct view *v;
	const uint32_t *index; /* view function -> output frame index */
	bool json;             /* prowl JSON rather than speedscope */
	size_t n;
};

static int put_stack(void *arg, const uint32_t *path, size_t n, const struct view_node *node)
{
	struct stacks_ctx *c = arg;
	struct sbuf *b = c->b;
	size_t first = 0;
	int r;

	r = sbuf_puts(b, c->n++ ? ",\n" : "\n");
	if (!r && c->json) {
		r = sbuf_putc(b, '{');
		if (!r && n && c->v->funcs[path[0]].is_process) {
			r = sbuf_puts(b, "\"process\":") ?: json_str(b, view_str(c->v, c->v->funcs[path[0]].name)) ?:
			    sbuf_putc(b, ',');
			first = 1;
		}
		if (!r)
			r = sbuf_puts(b, "\"frames\":");
	}
	if (!r)
		r = sbuf_putc(b, '[');
	for (size_t i = first; i < n && !r; i++)
		r = sbuf_printf(b, "%s%" PRIu32, i > first ? "," : "", c->index[path[i]]);
	if (!r)
		r = sbuf_putc(b, ']');
	if (!r && c->json)
		r = sbuf_printf(b, ",\"count\":%" PRId64 "}", node->self[0]);
	return r;
}

static int put_weights(void *arg, const uint32_t *path, size_t n, const struct view_node *node)
{
	struct stacks_ctx *c = arg;

	(void)path;
	(void)n;
	return sbuf_printf(c->b, "%s%" PRId64, c->n++ ? "," : "", node->self[0]);
}

int format_speedscope(const struct view *v, const struct format_meta *m, char **ret_buf, size_t *ret_len)
{
	uint32_t *index = calloc((size_t)v->nfuncs + 1, sizeof(*index));
	struct sbuf b = {};
	struct stacks_ctx c = { .b = &b, .v = v, .index = index };
	int r = -ENOMEM;

	if (!index)
		goto out;
	r = sbuf_puts(&b, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":\"prowl "
			  PROWL_VERSION "\",\"name\":");
	if (!r)
		r = json_str(&b, m->title);
	if (!r)
		r = sbuf_puts(&b, ",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
	for (uint32_t f = 1; f <= v->nfuncs && !r; f++) {
		index[f] = f - 1;
		r = sbuf_puts(&b, f > 1 ? ",\n{\"name\":" : "\n{\"name\":") ?: json_str(&b, view_str(v, v->funcs[f].name));
		if (!r && v->funcs[f].file)
			r = sbuf_puts(&b, ",\"file\":") ?: json_str(&b, view_str(v, v->funcs[f].file));
		if (!r)
			r = sbuf_putc(&b, '}');
	}
	if (!r)
		r = sbuf_puts(&b, "]},\"profiles\":[{\"type\":\"sampled\",\"name\":") ?: json_str(&b, m->title);
	if (!r)
		r = sbuf_printf(&b, ",\"unit\":\"none\",\"startValue\":0,\"endValue\":%" PRId64 ",\"samples\":[",
				v->total[0]);
	if (!r)
		r = view_foreach_stack(v, put_stack, &c);
	c.n = 0;
	if (!r)
		r = sbuf_puts(&b, "],\n\"weights\":[");
	if (!r)
		r = view_foreach_stack(v, put_weights, &c);
	if (!r)
		r = sbuf_puts(&b, "]}]}\n");
	if (!r)
		r = sbuf_take(&b, ret_buf, ret_len);
out:
	sbuf_free(&b);
	free(index);
	return r;
}

static int cmp_self(const void *a, const void *b, void *arg)
{
	const struct view *v = arg;
	const struct view_func *x = &v->funcs[*(const uint32_t *)a], *y = &v->funcs[*(const uint32_t *)b];

	if (x->self[0] != y->self[0])
		return x->self[0] > y->self[0] ? -1 : 1;
	if (x->total[0] != y->total[0])
		return x->total[0] > y->total[0] ? -1 : 1;
	return strcmp(view_str(v, x->name), view_str(v, y->name));
}

static int json_header(struct sbuf *b, const struct view *v, const struct format_meta *m)
{
	char t[64];
	int r;

	r = sbuf_printf(b, "{\"samples\":%" PRId64 ",\"period_ns\":%" PRId64 ",\"files\":%zu", v->total[0], m->period,
			m->nfiles);
	if (!r && m->start_ns) {
		time_format_utc(m->start_ns, t, sizeof(t));
		r = sbuf_printf(b, ",\"start\":\"%s\"", t);
		time_format_utc(m->end_ns, t, sizeof(t));
		if (!r)
			r = sbuf_printf(b, ",\"end\":\"%s\"", t);
	}
	if (!r)
		r = sbuf_puts(b, ",\"labels\":{");
	for (size_t i = 0; i < m->nlabels && !r; i++) {
		char *eq = strchr(m->labels[i], '=');
		char key[256];

		if (!eq || (size_t)(eq - m->labels[i]) >= sizeof(key))
			continue;
		memcpy(key, m->labels[i], (size_t)(eq - m->labels[i]));
		key[eq - m->labels[i]] = 0;
		r = (i ? sbuf_putc(b, ',') : 0) ?: json_str(b, key) ?: sbuf_putc(b, ':') ?: json_str(b, eq + 1);
	}
	return r ?: sbuf_putc(b, '}');
}

int format_json(const struct view *v, const struct format_meta *m, char **ret_buf, size_t *ret_len)
{
	uint32_t *order = calloc((size_t)v->nfuncs + 1, sizeof(*order));
	uint32_t *index = calloc((size_t)v->nfuncs + 1, sizeof(*index));
	struct sbuf b = {};
	struct stacks_ctx c = { .b = &b, .v = v, .index = index, .json = true };
	uint32_t n = 0;
	int r = -ENOMEM;

	if (!order || !index)
		goto out;
	for (uint32_t f = 1; f <= v->nfuncs; f++)
		if (!v->funcs[f].is_process)
			order[n++] = f;
	qsort_r(order, n, sizeof(*order), cmp_self, (void *)v);
	r = json_header(&b, v, m);
	if (!r)
		r = sbuf_puts(&b, ",\"functions\":[");
	for (uint32_t i = 0; i < n && !r; i++) {
		const struct view_func *f = &v->funcs[order[i]];

		index[order[i]] = i;
		r = sbuf_puts(&b, i ? ",\n{\"name\":" : "\n{\"name\":") ?: json_str(&b, view_str(v, f->name));
		if (!r && f->file)
			r = sbuf_puts(&b, ",\"file\":") ?: json_str(&b, view_str(v, f->file));
		if (!r)
			r = sbuf_printf(&b, ",\"self\":%" PRId64 ",\"total\":%" PRId64 ",\"self_pct\":", f->self[0],
					f->total[0]) ?:
			    json_num(&b, v->total[0] ? 100.0 * f->self[0] / v->total[0] : 0, 4) ?:
			    sbuf_puts(&b, ",\"total_pct\":") ?:
			    json_num(&b, v->total[0] ? 100.0 * f->total[0] / v->total[0] : 0, 4) ?: sbuf_putc(&b, '}');
	}
	if (!r)
		r = sbuf_puts(&b, "],\n\"stacks\":[");
	if (!r)
		r = view_foreach_stack(v, put_stack, &c);
	if (!r)
		r = sbuf_puts(&b, "]}\n");
	if (!r)
		r = sbuf_take(&b, ret_buf, ret_len);
out:
	sbuf_free(&b);
	free(order);
	free(index);
	return r;
}
