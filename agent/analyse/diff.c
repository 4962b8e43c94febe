/* diff.c: turns a two-sided view into share deltas, judges each growth against the
 * binomial standard error of the two shares (the CI gate) and prints text or JSON. */
#include "analyse/diff.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyse/cli.h"
#include "analyse/jsonw.h"
#include "analyse/timespec.h"
#include "analyse/view.h"
#include "escape.h"

static double pct(int64_t part, int64_t whole)
{
	return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0;
}

/* The standard error of (new share - base share), in percentage points, when each
 * sample lands in the function independently: sqrt(p1(1-p1)/n1 + p2(1-p2)/n2). */
static double binomial_se_pp(double p1_pct, int64_t n1, double p2_pct, int64_t n2)
{
	double p1 = p1_pct / 100, p2 = p2_pct / 100, var = 0;

	if (n1 > 0)
		var += p1 * (1 - p1) / (double)n1;
	if (n2 > 0)
		var += p2 * (1 - p2) / (double)n2;
	return 100 * sqrt(var);
}

static double change(const struct diff_row *r)
{
	return fmax(fabs(r->d_self), fabs(r->d_total));
}

static int cmp_row(const void *a, const void *b, void *arg)
{
	const struct diff_row *x = a, *y = b;
	const struct view *v = arg;
	double cx = change(x), cy = change(y);

	if ((x->apart != 0) != (y->apart != 0))
		return x->apart ? 1 : -1;
	if (cx != cy)
		return cx > cy ? -1 : 1;
	return strcmp(view_str(v, v->funcs[x->func].name), view_str(v, v->funcs[y->func].name));
}

int diff_rows(const struct view *v, double sigmas, struct diff_row **ret, size_t *ret_n)
{
	struct diff_row *rows = calloc((size_t)v->nfuncs + 1, sizeof(*rows));
	int64_t nb = v->total[0], nn = v->total[1];
	size_t n = 0;

	if (!rows)
		return -ENOMEM;
	for (uint32_t f = 1; f <= v->nfuncs; f++) {
		const struct view_func *fn = &v->funcs[f];
		struct diff_row *r = &rows[n];

		if (fn->is_process || (!fn->total[0] && !fn->total[1]))
			continue;
		r->func = f;
		r->apart = (uint8_t)view_func_apart(fn);
		r->base_self = pct(fn->self[0], nb);
		r->new_self = pct(fn->self[1], nn);
		r->base_total = pct(fn->total[0], nb);
		r->new_total = pct(fn->total[1], nn);
		r->d_self = r->new_self - r->base_self;
		r->d_total = r->new_total - r->base_total;
		r->noise_self = sigmas * binomial_se_pp(r->base_self, nb, r->new_self, nn);
		r->noise_total = sigmas * binomial_se_pp(r->base_total, nb, r->new_total, nn);
		n++;
	}
	qsort_r(rows, n, sizeof(*rows), cmp_row, (void *)v);
	*ret = rows;
	*ret_n = n;
	return 0;
}

size_t diff_judge(const struct view *v, struct diff_row *rows, size_t n, const struct diff_gate *g, FILE *out)
{
	size_t bad = 0;

	for (size_t i = 0; g->on && i < n; i++) {
		struct diff_row *r = &rows[i];
		const char *name = view_str(v, v->funcs[r->func].name);
		const char *sep = "";
		char safe[512];

		if (r->apart || (g->focus && regexec(g->focus, name, 0, NULL, 0) != 0))
			continue;
		/* Grew by more than the limit, and by more than the limit plus noise. */
		r->offender_self = r->d_self > g->max_pp + r->noise_self;
		r->offender_total = r->d_total > g->max_pp + r->noise_total;
		if (!r->offender_self && !r->offender_total)
			continue;
		bad++;
		fprintf(out, "regression: %s:", printable(name, safe, sizeof(safe)));
		if (r->offender_total) {
			fprintf(out, " total %.2f%% -> %.2f%% (%+.2f pp > %g pp + %.2f pp noise)", r->base_total,
				r->new_total, r->d_total, g->max_pp, r->noise_total);
			sep = ";";
		}
		if (r->offender_self)
			fprintf(out, "%s self %.2f%% -> %.2f%% (%+.2f pp > %g pp + %.2f pp noise)", sep, r->base_self,
				r->new_self, r->d_self, g->max_pp, r->noise_self);
		fputc('\n', out);
	}
	return bad;
}

static int side_line(struct sbuf *b, const char *what, const struct diff_side *s)
{
	char range[200];
	int r;

	cli_time_range(s->start_ns, s->end_ns, range, sizeof(range));
	r = sbuf_printf(b, "%s %s: %" PRIu64 " samples", what, s->source, s->samples);
	if (!r && s->nfiles > 1)
		r = sbuf_printf(b, " in %zu files", s->nfiles);
	if (!r && range[0])
		r = sbuf_printf(b, ", %s", range);
	return r ?: sbuf_putc(b, '\n');
}

static const char *status(const struct view *v, const struct diff_row *r)
{
	const struct view_func *f = &v->funcs[r->func];

	return !f->total[0] ? "new" : !f->total[1] ? "gone" : "changed";
}

/* How a row apart is tagged in the text table and named in JSON's "kind". */
static const struct {
	const char *tag, *kind;
} aparts[] = {
	[VIEW_CODE] = { "", "code" },
	[VIEW_MARKER] = { "  [prowl marker]", "prowl_marker" },
	[VIEW_KERNEL_EXIT] = { "  [kernel exit]", "kernel_exit" },
};

static int text_row(struct sbuf *b, const struct view *v, const struct diff_row *d)
{
	const char *st = status(v, d);
	char safe[512];

	return sbuf_printf(b, "   %8.2f %8.2f %+8.2f  %8.2f %8.2f %+8.2f  %s%s%s%s\n", d->base_self, d->new_self,
			   d->d_self, d->base_total, d->new_total, d->d_total,
			   printable(view_str(v, v->funcs[d->func].name), safe, sizeof(safe)), aparts[d->apart].tag,
			   strcmp(st, "changed") ? "  [" : "", strcmp(st, "changed") ? (strcmp(st, "new") ? "gone]" : "new]") : "");
}

/* Rows [from, to) of one section, at most max_rows of them (0: all). */
static int text_rows(struct sbuf *b, const struct view *v, const struct diff_row *rows, size_t from, size_t to,
		     size_t max_rows, const char *what)
{
	size_t n = to - from, shown = max_rows && max_rows < n ? max_rows : n;
	int r = 0;

	for (size_t i = from; i < from + shown && !r; i++)
		r = text_row(b, v, &rows[i]);
	if (!r && shown < n)
		r = sbuf_printf(b, "... and %zu %s that changed less (-n 0 shows all)\n", n - shown, what);
	return r;
}

int diff_text(struct sbuf *b, const struct view *v, const struct diff_row *rows, size_t n, size_t max_rows,
	      const struct diff_side *base, const struct diff_side *new)
{
	size_t code = 0;
	int r;

	while (code < n && !rows[code].apart)
		code++;
	r = side_line(b, "base", base);
	if (!r)
		r = side_line(b, "new ", new);
	if (!r)
		r = sbuf_puts(b, "\nShares of each side's samples in %, delta = new - base in percentage points:\n"
			    "   ---------- self % --------  --------- total % --------\n"
			    "       base      new    delta      base      new    delta  function\n");
	if (!r)
		r = text_rows(b, v, rows, 0, code, max_rows, "functions");
	if (!r && code < n)
		r = sbuf_puts(b, "\nLeft out of the gate: prowl's marker frames and the kernel's interrupts and return "
			    "to user mode:\n");
	if (!r)
		r = text_rows(b, v, rows, code, n, max_rows, "frames");
	if (!r && !n)
		r = sbuf_puts(b, "(no samples)\n");
	return r;
}

static int json_side(struct sbuf *b, const char *key, const struct diff_side *s)
{
	char t[64];
	int r;

	r = sbuf_printf(b, "\"%s\":{\"source\":", key);
	if (!r)
		r = json_str(b, s->source);
	if (!r)
		r = sbuf_printf(b, ",\"samples\":%" PRIu64 ",\"files\":%zu", s->samples, s->nfiles);
	if (!r && s->start_ns) {
		time_format_utc(s->start_ns, t, sizeof(t));
		r = sbuf_printf(b, ",\"start\":\"%s\"", t);
		time_format_utc(s->end_ns, t, sizeof(t));
		if (!r)
			r = sbuf_printf(b, ",\"end\":\"%s\"", t);
	}
	return r ?: sbuf_putc(b, '}');
}

static int json_field(struct sbuf *b, const char *key, double v)
{
	return sbuf_printf(b, ",\"%s\":", key) ?: json_num(b, v, 4);
}

int diff_json(struct sbuf *b, const struct view *v, const struct diff_row *rows, size_t n,
	      const struct diff_side *base, const struct diff_side *new, const struct diff_gate *g)
{
	int r = sbuf_putc(b, '{');

	if (!r)
		r = json_side(b, "base", base);
	if (!r)
		r = sbuf_putc(b, ',');
	if (!r)
		r = json_side(b, "new", new);
	if (!r)
		r = sbuf_puts(b, ",\"noise_sigmas\":");
	if (!r)
		r = json_num(b, g->sigmas, 2);
	if (!r && g->on)
		r = sbuf_puts(b, ",\"fail_on_increase_pp\":") ?: json_num(b, g->max_pp, 4);
	if (!r)
		r = sbuf_puts(b, ",\"functions\":[");
	for (size_t i = 0; i < n && !r; i++) {
		const struct diff_row *d = &rows[i];
		const struct view_func *f = &v->funcs[d->func];

		r = sbuf_puts(b, i ? ",\n{\"name\":" : "\n{\"name\":");
		if (!r)
			r = json_str(b, view_str(v, f->name));
		if (!r && f->file)
			r = sbuf_puts(b, ",\"file\":") ?: json_str(b, view_str(v, f->file));
		if (!r)
			r = sbuf_printf(b, ",\"status\":\"%s\",\"kind\":\"%s\"", status(v, d), aparts[d->apart].kind);
		if (!r)
			r = json_field(b, "base_self_pct", d->base_self) ?: json_field(b, "new_self_pct", d->new_self) ?:
			    json_field(b, "delta_self_pp", d->d_self) ?: json_field(b, "base_total_pct", d->base_total) ?:
			    json_field(b, "new_total_pct", d->new_total) ?: json_field(b, "delta_total_pp", d->d_total) ?:
			    json_field(b, "noise_self_pp", d->noise_self) ?: json_field(b, "noise_total_pp", d->noise_total);
		if (!r)
			r = sbuf_printf(b, ",\"base_self\":%" PRId64 ",\"new_self\":%" PRId64 ",\"base_total\":%" PRId64
					",\"new_total\":%" PRId64, f->self[0], f->self[1], f->total[0], f->total[1]);
		if (!r && g->on)
			r = sbuf_printf(b, ",\"regression\":%s", d->offender_self || d->offender_total ? "true" : "false");
		if (!r)
			r = sbuf_putc(b, '}');
	}
	return r ?: sbuf_puts(b, "]}\n");
}
