/* v8heap.c: walks V8 heap objects (strings, cons and thin strings, SharedFunctionInfo,
 * ScopeInfo, Script, source position tables) through a memory reader, bounded and type-checked. */
#include "v8heap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define WORD       8
#define CHUNK      4096
#define SCOPE_SLOTS 16 /* ScopeInfo slots looked at for the name and the positions */
/* Slots from the name to the end of the source range at most: the name, its slot index,
 * an inferred name, the outer ScopeInfo, the range's two ends. */
#define SCOPE_RANGE_ROOM 6

int v8_read(const struct v8_mem *m, uint64_t addr, void *buf, size_t len)
{
	if (addr < 4096 || addr + len < addr || (addr >> 47))
		return -EFAULT;
	return m->read(m->ctx, addr, buf, len) < 0 ? -EFAULT : 0;
}

static bool is_smi(const struct prowl_v8_proc *vp, uint64_t v)
{
	return (v & vp->smi_tag_mask) == vp->smi_tag;
}

static int64_t smi_value(uint64_t v)
{
	return (int64_t)v >> 32; /* 31 bits of shift and one of tag: checked by v8meta.c */
}

int v8_field(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t obj, uint32_t off, uint64_t *ret)
{
	return v8_read(m, obj - vp->heap_tag + off, ret, WORD);
}

int v8_obj_type(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t obj)
{
	uint64_t map;
	uint16_t type;

	if (!v8_is_heap(vp, obj) || v8_field(m, vp, obj, vp->o_map, &map) < 0 || !v8_is_heap(vp, map) ||
	    v8_read(m, map - vp->heap_tag + vp->o_map_type, &type, 2) < 0)
		return -EFAULT;
	return type;
}

/* ---- strings ---- */

/* Each piece of a string's text, in order: bytes (one-byte) or UTF-16 units. */
typedef int (*frag_fn)(void *ctx, const uint8_t *p, size_t n, bool two_byte);

static int walk_string(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t str, size_t limit,
		       frag_fn fn, void *ctx)
{
	uint64_t stack[V8_CONS_DEPTH];
	unsigned int depth = 0, hops = 0;
	size_t total = 0;
	uint8_t buf[CHUNK];

	for (;;) {
		int type = v8_obj_type(m, vp, str);
		int32_t len;
		uint32_t repr;
		bool two;

		if (type < 0)
			return type;
		if ((uint32_t)type >= vp->first_nonstring || ++hops > 4 * V8_CONS_DEPTH)
			return -EBADMSG;
		repr = (uint32_t)type & vp->str_repr_mask;
		two = ((uint32_t)type & vp->str_encoding_mask) != vp->str_one_byte;
		if (repr == vp->str_cons) {
			uint64_t first, second;

			if (depth >= V8_CONS_DEPTH || v8_field(m, vp, str, vp->o_cons_first, &first) < 0 ||
			    v8_field(m, vp, str, vp->o_cons_second, &second) < 0)
				return depth >= V8_CONS_DEPTH ? -E2BIG : -EFAULT;
			stack[depth++] = second;
			str = first;
			continue;
		}
		if (repr == vp->str_thin && vp->o_thin_actual) {
			if (v8_field(m, vp, str, vp->o_thin_actual, &str) < 0)
				return -EFAULT;
			continue;
		}
		if (repr != vp->str_seq)
			return -EOPNOTSUPP; /* external or sliced: not read */
		if (v8_read(m, str - vp->heap_tag + vp->o_str_length, &len, 4) < 0)
			return -EFAULT;
		if (len < 0 || (size_t)len > limit - total)
			return -E2BIG;
		for (size_t done = 0, bytes = (size_t)len << two; done < bytes;) {
			size_t n = bytes - done < CHUNK ? bytes - done : CHUNK;
			int r;

			if (v8_read(m, str - vp->heap_tag + (two ? vp->o_seq2_chars : vp->o_seq1_chars) + done, buf, n) < 0)
				return -EFAULT;
			r = fn(ctx, buf, two ? n / 2 : n, two);
			if (r)
				return r > 0 ? 0 : r; /* > 0: enough */
			done += n;
		}
		total += (size_t)len;
		if (!depth)
			return 0;
		str = stack[--depth];
	}
}

struct text {
	char *out;
	size_t cap, n;
};

static int to_text(void *ctx, const uint8_t *p, size_t n, bool two)
{
	struct text *t = ctx;

	for (size_t i = 0; i < n && t->n + 1 < t->cap; i++) {
		uint16_t u = p[i];

		if (two)
			memcpy(&u, p + 2 * i, 2);
		t->out[t->n++] = u < 0x80 ? (char)u : '?'; /* UTF-16 and Latin-1 beyond ASCII: '?' */
	}
	return t->n + 1 >= t->cap;
}

/* v8_string's work; strict (a function's name): a NUL refuses the whole string
 * (-EBADMSG). No name a program gives a function holds one, and the bytes of an object
 * that moved, its old place reused, read as a string hold several (the zero high bytes
 * of every pointer). Other control characters are shown as '?'. */
static int string_text(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t str, char *out, size_t cap,
		       bool strict)
{
	char raw[V8_NAME_MAX];
	struct text t = { raw, cap < sizeof(raw) ? cap : sizeof(raw), 0 };
	size_t n;
	int r;

	if (!cap)
		return -EINVAL;
	out[0] = 0;
	r = walk_string(m, vp, str, V8_SOURCE_MAX, to_text, &t);
	if (r < 0)
		return r;
	/* ASCII already; control characters become '?' (utf8_text needs 3 bytes each). */
	n = t.n;
	for (size_t i = 0; i < n; i++) {
		bool ctl = (unsigned char)raw[i] < 0x20 || raw[i] == 0x7f;

		if (strict && !raw[i]) {
			out[0] = 0;
			return -EBADMSG;
		}
		out[i] = ctl ? '?' : raw[i];
	}
	out[n] = 0;
	return (int)n;
}

int v8_string(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t str, char *out, size_t cap)
{
	return string_text(m, vp, str, out, cap, false);
}

/* ---- functions ---- */

/* A function's name is an internalized string: a string of another kind where one is
 * expected (a ScopeInfo slot read past its end, an object the collector put in place of
 * one) is not taken for it. Internalized strings differ from ONE_BYTE_INTERNALIZED_
 * STRING_TYPE in their encoding bit only (they are sequential). */
static bool is_name(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t str)
{
	int type = v8_obj_type(m, vp, str);

	if (type < 0 || (uint32_t)type >= vp->first_nonstring)
		return false;
	return vp->str_internalized == 0xff || !(((uint32_t)type ^ vp->str_internalized) & ~(uint32_t)vp->str_encoding_mask);
}

int v8_sfi_check(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t sfi, uint32_t *ret)
{
	uint64_t name, script;

	if (v8_field(m, vp, sfi, vp->o_sfi_name, &name) < 0 || v8_field(m, vp, sfi, vp->o_sfi_script, &script) < 0)
		return -EFAULT;
	*ret = (uint32_t)(name ^ script);
	return 0;
}

/* A Map's map is the meta map, whose map is itself: no other object's map is its map's. */
static bool is_map(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t obj)
{
	uint64_t map, meta;

	return v8_field(m, vp, obj, vp->o_map, &map) == 0 && v8_is_heap(vp, map) &&
	       v8_field(m, vp, map, vp->o_map, &meta) == 0 && map == meta;
}

/* ScopeInfo's layout is not in the metadata past its first slots: the name is the first
 * internalized string after the context locals (names and infos), the source range the
 * first two small integers in increasing order after it, and must be there. */
static int scope_name(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t si, char *out, size_t cap,
		      int32_t *ret_start)
{
	uint64_t slot[SCOPE_SLOTS];
	int64_t nlocals;
	size_t i, name_at;

	if (v8_read(m, si - vp->heap_tag + vp->o_map + WORD, slot, sizeof(slot)) < 0)
		return -EFAULT;
	if (vp->si_ncontext_locals >= SCOPE_SLOTS || !is_smi(vp, slot[vp->si_ncontext_locals]))
		return -EBADMSG;
	nlocals = smi_value(slot[vp->si_ncontext_locals]);
	if (nlocals < 0 || nlocals > SCOPE_SLOTS)
		return -EBADMSG;
	for (i = vp->si_first_vars + 2 * (size_t)nlocals; i < SCOPE_SLOTS; i++) {
		if (!v8_is_heap(vp, slot[i]))
			continue;
		/* A map: the next object's header; the ScopeInfo ended with no name in the
		 * slots looked at, what follows is another object's. */
		if (is_map(m, vp, slot[i]))
			return -EBADMSG;
		if (is_name(m, vp, slot[i]) && string_text(m, vp, slot[i], out, cap, true) >= 0)
			break;
	}
	name_at = i;
	for (i++; i + 1 < SCOPE_SLOTS; i++)
		if (is_smi(vp, slot[i]) && is_smi(vp, slot[i + 1]) && smi_value(slot[i]) >= 0 &&
		    smi_value(slot[i]) < smi_value(slot[i + 1]) && smi_value(slot[i + 1]) < INT32_MAX) {
			*ret_start = (int32_t)smi_value(slot[i]);
			return 0;
		}
	/* A function's ScopeInfo has its source range a few slots after the name: a string
	 * with none after it, where the slots looked at had room for one, was read past a
	 * ScopeInfo of another shape (a global the function uses, say): no name rather than
	 * a foreign one. No string at all: anonymous. */
	if (name_at + SCOPE_RANGE_ROOM <= SCOPE_SLOTS) {
		out[0] = 0;
		return -EBADMSG;
	}
	return 0;
}

int v8_sfi_name(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t sfi, char *out, size_t cap,
		int32_t *ret_start)
{
	uint64_t nos;
	int type;

	*ret_start = -1;
	out[0] = 0;
	if (v8_obj_type(m, vp, sfi) != vp->t_sfi)
		return -ESTALE;
	if (v8_field(m, vp, sfi, vp->o_sfi_name, &nos) < 0)
		return -EFAULT;
	if (is_smi(vp, nos))
		return 0; /* no name: anonymous */
	type = v8_obj_type(m, vp, nos);
	if (type < 0)
		return type;
	if ((uint32_t)type < vp->first_nonstring)
		return !is_name(m, vp, nos) || string_text(m, vp, nos, out, cap, true) < 0 ? -EBADMSG : 0;
	if (vp->t_scope_info && type == vp->t_scope_info)
		return scope_name(m, vp, nos, out, cap, ret_start);
	return -EBADMSG;
}

int v8_sfi_script(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t sfi, uint64_t *ret)
{
	if (v8_field(m, vp, sfi, vp->o_sfi_script, ret) < 0)
		return -EFAULT;
	return v8_obj_type(m, vp, *ret) == vp->t_script && vp->t_script ? 0 : -ENOENT;
}

int v8_script_name(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t script, char *out, size_t cap)
{
	uint64_t name;

	out[0] = 0;
	if (!vp->o_script_name || v8_field(m, vp, script, vp->o_script_name, &name) < 0)
		return -EFAULT;
	return v8_string(m, vp, name, out, cap);
}

/* ---- positions and lines ---- */

int v8_uvlq(const uint8_t *tab, size_t len, size_t *pos, uint64_t *ret)
{
	uint64_t v = 0;

	for (unsigned int shift = 0; shift < 35; shift += 7) { /* 32-bit values: 5 bytes */
		uint8_t b;

		if (*pos >= len)
			return -1;
		b = tab[(*pos)++];
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*ret = v;
			return 0;
		}
	}
	return -1;
}

/* A signed one: the sign in bit 0 (zigzag). */
static int vlq(const uint8_t *tab, size_t len, size_t *pos, int64_t *ret)
{
	uint64_t v;

	if (v8_uvlq(tab, len, pos, &v) < 0)
		return -1;
	*ret = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
	return 0;
}

int64_t v8_postab_raw(const uint8_t *tab, size_t len, uint32_t off)
{
	int64_t code = -1, source = 0, d, found = -1; /* code -1: the function's entry */
	size_t pos = 0;

	while (pos < len) {
		if (vlq(tab, len, &pos, &d) < 0)
			return -1;
		/* A negative code delta marks a statement position: -(delta + 1). */
		code += d >= 0 ? d : -(d + 1);
		if (code > off)
			break;
		if (vlq(tab, len, &pos, &d) < 0)
			return -1;
		source += d;
		if (code < -1 || code > INT32_MAX || source < 0 || source > ((int64_t)1 << 47))
			return -1;
		found = source;
	}
	return found;
}

int32_t v8_postab_lookup(const uint8_t *tab, size_t len, uint32_t off)
{
	int64_t source = v8_postab_raw(tab, len, off);

	if (source < 0)
		source = 0; /* no entry at or before off: the function's entry */
	return v8_pos_offset((uint64_t)source);
}

/* The BytecodeArray of sfi (tagged): SharedFunctionInfo's function_data once compiled, or
 * the baseline code there, whose deoptimization data slot holds the BytecodeArray. */
static int sfi_bytecode(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t sfi, uint64_t *ret)
{
	uint64_t d;

	if (!vp->o_sfi_data || v8_field(m, vp, sfi, vp->o_sfi_data, &d) < 0)
		return -ENOENT;
	if (vp->t_code && vp->o_code_deopt && v8_obj_type(m, vp, d) == vp->t_code &&
	    v8_field(m, vp, d, vp->o_code_deopt, &d) < 0)
		return -ENOENT;
	if (v8_obj_type(m, vp, d) != vp->t_bytecode_array)
		return -ENOENT;
	*ret = d;
	return 0;
}

int v8_bytecode_array_position(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t ba, uint32_t bco,
			       int32_t *ret)
{
	uint32_t off = vp->o_ba_spt ? vp->o_ba_spt : (uint32_t)vp->o_fa_length + 3 * WORD;
	uint64_t tab, lenw;
	uint8_t *buf;
	int64_t len;
	int t;

	/* The source position table: BytecodeArray's fourth word (V8 9 to 11; not in the
	 * metadata), or the word after its wrapper (V8 12: a TrustedByteArray). */
	if (!vp->t_byte_array || v8_field(m, vp, ba, off, &tab) < 0 || (t = v8_obj_type(m, vp, tab)) < 0 ||
	    (t != vp->t_byte_array && (!vp->t_trusted_byte_array || t != vp->t_trusted_byte_array)) ||
	    v8_field(m, vp, tab, vp->o_fa_length, &lenw) < 0 || !is_smi(vp, lenw))
		return -ENOENT;
	len = smi_value(lenw);
	if (len <= 0 || len > V8_POSTAB_MAX)
		return -EBADMSG;
	buf = malloc((size_t)len);
	if (!buf)
		return -ENOMEM;
	if (v8_read(m, tab - vp->heap_tag + vp->o_fa_data, buf, (size_t)len) < 0) {
		free(buf);
		return -EFAULT;
	}
	*ret = v8_postab_lookup(buf, (size_t)len, bco);
	free(buf);
	return *ret < 0 ? -EBADMSG : 0;
}

int v8_bytecode_position(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t sfi, uint32_t bco,
			 int32_t *ret)
{
	uint64_t ba;
	int r = sfi_bytecode(m, vp, sfi, &ba);

	return r < 0 ? r : v8_bytecode_array_position(m, vp, ba, bco, ret);
}

struct lines {
	uint32_t *v;
	size_t n, cap, at;
	uint16_t prev;
};

static int add_end(struct lines *l, size_t at)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		uint32_t *v;

		if (cap > V8_LINES_MAX)
			return 1; /* enough: the lines past it stay unknown */
		v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = (uint32_t)at;
	return 0;
}

static int scan_ends(void *ctx, const uint8_t *p, size_t n, bool two)
{
	struct lines *l = ctx;

	for (size_t i = 0; i < n; i++, l->at++) {
		uint16_t u = p[i];
		int r;

		if (two)
			memcpy(&u, p + 2 * i, 2);
		if ((u == '\r' || (u == '\n' && l->prev != '\r')) && (r = add_end(l, l->at)))
			return r;
		l->prev = u;
	}
	return 0;
}

/* One walk of a script's source feeds both: the line ends (when V8 made no table of them)
 * and the class lexer. Each stops on its own; the walk, once both have. */
struct script_walk {
	struct lines l;
	struct js_lexer *lx;
	bool lines, lex; /* still wanted */
};

static int script_piece(void *ctx, const uint8_t *p, size_t n, bool two)
{
	struct script_walk *w = ctx;
	int r;

	if (w->lines && (r = scan_ends(&w->l, p, n, two)) != 0) {
		if (r < 0)
			return r;
		w->lines = false; /* V8_LINES_MAX: the lines past it stay unknown */
	}
	if (w->lex && (r = js_lexer_feed(w->lx, p, n, two)) != 0) {
		if (r < 0)
			return r;
		w->lex = false; /* the lexer stopped */
	}
	return !w->lines && !w->lex;
}

/* V8's own line_ends table, once something asked for it (a stack trace): 0 or a
 * negative errno (none, or not one). */
static int table_lines(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t script, struct lines *l)
{
	uint64_t ends, lenw, w;

	if (!vp->o_script_line_ends || !vp->t_fixed_array || v8_field(m, vp, script, vp->o_script_line_ends, &ends) < 0 ||
	    v8_obj_type(m, vp, ends) != vp->t_fixed_array || v8_field(m, vp, ends, vp->o_fa_length, &lenw) < 0 ||
	    !is_smi(vp, lenw) || smi_value(lenw) <= 0 || smi_value(lenw) > V8_LINES_MAX)
		return -ENOENT;
	for (int64_t i = 0; i < smi_value(lenw); i++)
		if (v8_field(m, vp, ends, vp->o_fa_data + (uint32_t)(i * WORD), &w) < 0 || !is_smi(vp, w) ||
		    smi_value(w) < 0 || smi_value(w) > INT32_MAX || add_end(l, (size_t)smi_value(w)) != 0)
			return -EBADMSG;
	return 0;
}

/* One read of script into *ret: its lines (ret->n > 0) when known; returns the source
 * walk's result (its classes are kept only from a whole walk). */
static int script_read_once(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t script,
			    struct js_lexer *lx, struct v8_script *ret)
{
	struct script_walk w = { .lx = lx, .lex = true };
	int r, e = 0;

	if (table_lines(m, vp, script, &w.l) < 0) {
		free(w.l.v);
		w.l = (struct lines){ 0 };
		w.lines = true;
	}
	js_lexer_init(lx, &ret->cls);
	if (!vp->o_script_source || v8_field(m, vp, script, vp->o_script_source, &ret->source) < 0)
		r = -ENOENT;
	else
		r = walk_string(m, vp, ret->source, V8_SOURCE_MAX, script_piece, &w);
	if (r < 0)
		js_classes_free(&ret->cls);
	/* Lines found in the source: the last one ends with it. */
	if (w.lines && (r < 0 || (e = add_end(&w.l, w.l.at)) < 0)) {
		free(w.l.v);
		return r < 0 ? r : e;
	}
	ret->ends = w.l.v;
	ret->n = w.l.n;
	return r;
}

int v8_script_read(const struct v8_mem *m, const struct prowl_v8_proc *vp, uint64_t script, struct v8_script *ret)
{
	struct js_lexer *lx = malloc(sizeof(*lx));
	int r;

	*ret = (struct v8_script){ 0 };
	if (!lx)
		return -ENOMEM;
	r = script_read_once(m, vp, script, lx, ret);
	/* Once more where the source moved under the read (the collector compacts). */
	if (r == -EFAULT || r == -EBADMSG) {
		v8_script_free(ret);
		r = script_read_once(m, vp, script, lx, ret);
	}
	free(lx);
	if (!ret->n) {
		v8_script_free(ret);
		return r < 0 ? r : -ENOENT;
	}
	return 0;
}

void v8_script_free(struct v8_script *s)
{
	free(s->ends);
	js_classes_free(&s->cls);
	*s = (struct v8_script){ 0 };
}

int v8_line_of(const uint32_t *ends, size_t n, int32_t pos)
{
	size_t lo = 0, hi = n;

	if (pos < 0 || !n || (uint32_t)pos > ends[n - 1])
		return 0;
	while (lo < hi) { /* the first end at or after pos */
		size_t mid = lo + (hi - lo) / 2;

		if (ends[mid] >= (uint32_t)pos)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo < n && lo < INT32_MAX ? (int)lo + 1 : 0;
}
