/* html.c: fills the page template (flame.html, built in) with the view as JSON:
 * function names and files, then the call tree as gzip'ed varints in base64. */
#include "analyse/html.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "profile_data.h"
#include "analyse/cli.h"
#include "analyse/jsonw.h"
#include "analyse/view.h"
#include "array_size.h"
#include "gzip.h"
#include "intern.h"
#include "sbuf.h"

/* The template, NUL-terminated, from the assembler (the file is read at build time). */
__asm__(".section .rodata\n"
	".global prowl_flame_html\n"
	".type prowl_flame_html, @object\n"
	"prowl_flame_html:\n"
	".incbin \"agent/analyse/flame.html\"\n"
	".byte 0\n"
	".size prowl_flame_html, . - prowl_flame_html\n"
	".previous\n");
extern const char prowl_flame_html[];

#define DATA_MARK "@PROWL_DATA@"
/* zlib level of the node data: at 100k stacks, 5 takes half the time of the default
 * (6) for a page 2 % larger; 1 saves little more time and adds 13 %. */
#define GZIP_LEVEL 5

/* LEB128: 7 bits a byte, low bits first, the high bit says another byte follows. */
static int put_varint(struct sbuf *b, uint64_t v)
{
	char tmp[10];
	size_t n = 0;

	do {
		tmp[n] = (char)(v & 0x7f);
		v >>= 7;
		tmp[n++] |= v ? 0x80 : 0;
	} while (v);
	return sbuf_put(b, tmp, n);
}

static int put_base64(struct sbuf *b, const uint8_t *in, size_t len)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *o;
	int r = sbuf_reserve(b, (len + 2) / 3 * 4);

	if (r)
		return r;
	o = b->s + b->len;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t w = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0) |
			     (i + 2 < len ? in[i + 2] : 0);

		*o++ = tab[w >> 18];
		*o++ = tab[w >> 12 & 63];
		*o++ = i + 1 < len ? tab[w >> 6 & 63] : '=';
		*o++ = i + 2 < len ? tab[w & 63] : '=';
	}
	b->len = (size_t)(o - b->s);
	b->s[b->len] = 0;
	return 0;
}

static uint64_t nonneg(int64_t v)
{
	return v > 0 ? (uint64_t)v : 0;
}

/* The nodes in depth-first order, children by name, as varints: function, levels
 * up from the previous node's child, line, and the samples of each side. */
static int put_nodes(struct sbuf *b, const struct view *v)
{
	uint32_t n = 0, d = 0, prev_d = 0;
	int r = 0;

	for (;;) {
		const struct view_node *nd = &v->nodes[n];

		r = put_varint(b, nd->func);
		if (!r)
			r = put_varint(b, n ? prev_d + 1 - d : 0);
		if (!r)
			r = put_varint(b, nonneg(nd->line));
		if (!r)
			r = put_varint(b, nonneg(nd->total[0]));
		if (!r && v->nsides > 1)
			r = put_varint(b, nonneg(nd->total[1]));
		if (r)
			return r;
		prev_d = d;
		if (nd->first_child) {
			n = nd->first_child;
			d++;
			continue;
		}
		while (n && !v->nodes[n].next_sibling) {
			n = v->nodes[n].parent;
			d--;
		}
		if (!n)
			return 0;
		n = v->nodes[n].next_sibling;
	}
}

static int put_data(struct sbuf *b, const struct view *v, const struct html_meta *m)
{
	struct intern *files = intern_new();
	uint32_t *ffile = calloc((size_t)v->nfuncs + 1, sizeof(*ffile));
	struct sbuf raw = {};
	uint8_t *gz = NULL;
	size_t gzlen = 0;
	int r = -ENOMEM;

	if (!files || !ffile)
		goto out;
	r = sbuf_printf(b, "{\"mode\":\"%s\",\"title\":", v->nsides > 1 ? "diff" : "flame");
	if (!r)
		r = json_str(b, m->title ? m->title : "prowl");
	if (!r)
		r = sbuf_puts(b, ",\"meta\":[");
	for (size_t i = 0; i < m->nlines && !r; i++)
		r = (i ? sbuf_putc(b, ',') : 0) ?: json_str(b, m->lines[i]);
	if (!r)
		r = sbuf_printf(b, "],\"totals\":[%" PRId64 ",%" PRId64 "],\"count\":%" PRIu32 ",\"depth\":%" PRIu32
			       ",\n\"names\":[\"all\"", v->total[0], v->total[1], v->nnodes, v->max_depth);
	for (uint32_t f = 1; f <= v->nfuncs && !r; f++) {
		const char *file = view_str(v, v->funcs[f].file);

		r = sbuf_putc(b, ',') ?: json_str(b, view_str(v, v->funcs[f].name));
		if (!r && *file)
			r = intern_put_str(files, file, &ffile[f]);
	}
	if (!r)
		r = sbuf_puts(b, "],\n\"files\":[\"\"");
	for (uint32_t i = 1; i <= intern_count(files) && !r; i++)
		r = sbuf_putc(b, ',') ?: json_str(b, intern_str(files, i));
	if (!r)
		r = sbuf_puts(b, "],\n\"ffile\":[0");
	for (uint32_t f = 1; f <= v->nfuncs && !r; f++)
		r = sbuf_printf(b, ",%" PRIu32, ffile[f]);
	if (!r)
		r = sbuf_puts(b, "],\n\"proc\":[");
	for (uint32_t f = 1, k = 0; f <= v->nfuncs && !r; f++)
		if (v->funcs[f].is_process)
			r = sbuf_printf(b, "%s%" PRIu32, k++ ? "," : "", f);
	if (!r)
		r = sbuf_puts(b, "],\n\"nodes\":\"");
	/* gzip'ed (the page inflates it with DecompressionStream), then base64. */
	if (!r)
		r = put_nodes(&raw, v);
	if (!r)
		r = gzip_compress_level(raw.s, raw.len, GZIP_LEVEL, &gz, &gzlen);
	if (!r)
		r = put_base64(b, gz, gzlen);
	if (!r)
		r = sbuf_puts(b, "\"}");
out:
	intern_free(files);
	free(ffile);
	sbuf_free(&raw);
	free(gz);
	return r;
}

int html_write(const struct view *v, const struct html_meta *m, char **ret_buf, size_t *ret_len)
{
	const char *mark = strstr(prowl_flame_html, DATA_MARK);
	struct sbuf b = {};
	int r;

	if (!mark)
		return -EINVAL;
	r = sbuf_put(&b, prowl_flame_html, (size_t)(mark - prowl_flame_html));
	if (!r)
		r = put_data(&b, v, m);
	if (!r)
		r = sbuf_puts(&b, mark + strlen(DATA_MARK));
	if (!r)
		r = sbuf_take(&b, ret_buf, ret_len);
	sbuf_free(&b);
	return r;
}

int html_write_profile(const struct profile *p, const char *title, const char *const *extra, size_t nextra,
		       char **ret_buf, size_t *ret_len)
{
	const char *lines[8];
	char range[200], count[200];
	struct view *v = NULL;
	size_t n = 0;
	int r;

	r = view_new(view_profiles_multiprocess(&p, 1), &v);
	if (!r)
		r = view_add_profile(v, p, VIEW_BASE);
	if (!r)
		r = view_finish(v);
	if (r)
		goto out;
	cli_time_range(p->time_nanos, p->time_nanos + p->duration_nanos, range, sizeof(range));
	if (range[0])
		lines[n++] = range;
	snprintf(count, sizeof(count), "%" PRIu64 " samples", p->total_samples);
	if (p->period > 0)
		snprintf(count, sizeof(count), "%" PRIu64 " samples, one every %.1f ms (%.0f Hz)", p->total_samples,
			 p->period / 1e6, 1e9 / p->period);
	if (p->values == PROF_VALUES_OFFCPU)
		snprintf(count, sizeof(count), "off-CPU time in ns: %" PRIu64 " waits kept (shorter than %.2f ms: "
			 "sampled, each weighs %.2f ms)", p->total_samples, p->period / 1e6, p->period / 1e6);
	else if (p->values == PROF_VALUES_WALL)
		snprintf(count, sizeof(count), "wall-clock time in ns: on-CPU samples (%.1f ms each) and off-CPU waits",
			 p->period / 1e6);
	lines[n++] = count;
	for (size_t i = 0; i < nextra && n < ARRAY_SIZE(lines); i++)
		lines[n++] = extra[i];
	r = html_write(v, &(struct html_meta){ .title = title, .lines = lines, .nlines = n }, ret_buf, ret_len);
out:
	view_free(v);
	return r;
}
