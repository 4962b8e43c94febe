/* jsclass.c: finds the class bodies of a JavaScript source and the brackets directly in
 * them (members' parameters and bodies), lexing past comments, strings, templates and regexps. */
#include "jsclass.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { S_CODE, S_LINE, S_BLOCK, S_SQ, S_DQ, S_TPL, S_RE };

void js_lexer_init(struct js_lexer *lx, struct js_classes *out)
{
	memset(lx, 0, sizeof(*lx));
	lx->out = out;
	lx->prev = '{'; /* the start: an expression may begin */
}

static bool word_char(uint16_t u)
{
	return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || u == '_' || u == '$' ||
	       u == '#' || (u >= 0x80 && u != 0xa0 && u != 0xfeff && u != 0x2028 && u != 0x2029);
}

/* Words after which a '/' starts a regular expression, not a division. */
static bool operator_word(const char *w)
{
	static const char *const words[] = { "return", "typeof", "instanceof", "in", "of", "new", "delete", "void",
					     "throw", "case", "do", "else", "yield", "await", NULL };

	for (const char *const *p = words; *p; p++)
		if (!strcmp(w, *p))
			return true;
	return false;
}

/* Room for one more of n in *v (capacity 16, 32, ... max): 0, 1 when full, or -ENOMEM. */
static int grow(void **v, uint32_t n, uint32_t max, size_t size)
{
	uint32_t cap;
	void *p;

	if (n >= max)
		return 1;
	if (n && (n < 16 || (n & (n - 1))))
		return 0; /* room left */
	cap = n ? n * 2 : 16;
	if (cap > max)
		cap = max;
	p = realloc(*v, cap * size);
	if (!p)
		return -ENOMEM;
	*v = p;
	return 0;
}

/* The end of a word: class, its name, extends; the words that let a regexp follow. */
static void word_end(struct js_lexer *lx)
{
	bool after_class = lx->prev == 'c';

	lx->ident[lx->nident < JS_CLASS_NAME_MAX ? lx->nident : JS_CLASS_NAME_MAX - 1] = 0;
	if (lx->nident >= JS_CLASS_NAME_MAX)
		lx->ident_ascii = false; /* cut: not a name to give */
	lx->nident = 0;
	if (!lx->prev_dot && !strcmp(lx->ident, "class")) {
		lx->cls_pending = true;
		lx->cls_extends = false;
		lx->cls_depth = lx->depth;
		strcpy(lx->cls_name, lx->prev == '=' ? lx->assigned : "");
		lx->prev = 'c';
		lx->prev_dot = false;
		return;
	}
	if (lx->cls_pending && lx->depth == lx->cls_depth && !strcmp(lx->ident, "extends"))
		lx->cls_extends = true;
	else if (after_class && lx->cls_pending)
		strcpy(lx->cls_name, lx->ident_ascii && lx->ident[0] != '#' ? lx->ident : "");
	/* Only a plain name takes a class's name from "NAME = class": a.b = class does not. */
	strcpy(lx->last_word, lx->ident_ascii && !lx->prev_dot ? lx->ident : "");
	lx->prev = !lx->prev_dot && operator_word(lx->ident) ? 'k' : 'a';
	lx->prev_dot = false;
}

static int push(struct js_lexer *lx, uint8_t kind)
{
	struct js_frame *f, *up = lx->depth ? &lx->stack[lx->depth - 1] : NULL;
	struct js_classes *c = lx->out;
	int r;

	if (lx->depth >= JS_NEST_MAX) {
		lx->stopped = true;
		return 1;
	}
	f = &lx->stack[lx->depth];
	*f = (struct js_frame){ .open = lx->pos, .kind = kind, .member = up && up->body };
	f->cls = f->member ? up->cls : 0; /* a member: its class, unless it opens a class body */
	if (kind == '{' && lx->cls_pending && lx->depth == lx->cls_depth) {
		lx->cls_pending = false;
		f->member = false;
		f->cls = 0;
		if (lx->cls_name[0]) {
			if ((r = grow((void **)&c->cls, c->ncls, JS_CLASSES_MAX, sizeof(*c->cls))) != 0) {
				lx->stopped = r > 0;
				return r;
			}
			c->cls[c->ncls] = (struct js_class){ .open = lx->pos };
			strcpy(c->cls[c->ncls].name, lx->cls_name);
			f->cls = ++c->ncls;
			f->body = true;
		}
	}
	lx->depth++;
	return 0;
}

static int pop(struct js_lexer *lx, uint8_t kind)
{
	struct js_classes *c = lx->out;
	struct js_frame *f;
	int r;

	if (!lx->depth || lx->stack[lx->depth - 1].kind != kind) {
		lx->stopped = true; /* the lexer went wrong, or the source is not JavaScript */
		return 1;
	}
	f = &lx->stack[--lx->depth];
	if (lx->cls_pending && lx->depth < lx->cls_depth)
		lx->cls_pending = false;
	if (f->member) {
		if ((r = grow((void **)&c->mem, c->nmem, JS_MEMBERS_MAX, sizeof(*c->mem))) != 0) {
			lx->stopped = r > 0;
			return r;
		}
		c->mem[c->nmem++] = (struct js_member){ f->open, lx->pos, f->cls - 1 };
	} else if (f->body) {
		c->cls[f->cls - 1].close = lx->pos;
	}
	return 0;
}

static int unit(struct js_lexer *lx, uint16_t u);

/* One unit in code. */
static int code(struct js_lexer *lx, uint16_t u)
{
	int r = 0;

	if (lx->slash) {
		lx->slash = false;
		if (u == '/') {
			lx->state = S_LINE;
			return 0;
		}
		if (u == '*') {
			lx->state = S_BLOCK;
			lx->star = false;
			return 0;
		}
		if (lx->prev != 'a' && lx->prev != ')' && lx->prev != ']' && lx->prev != '}') {
			lx->state = S_RE;
			lx->esc = lx->in_set = false;
			return unit(lx, u); /* the expression's first unit */
		}
		lx->prev = '/';
	}
	if (word_char(u)) {
		if (!lx->nident)
			lx->ident_ascii = true;
		if (lx->nident < JS_CLASS_NAME_MAX - 1)
			lx->ident[lx->nident] = (char)u;
		if (u >= 0x80)
			lx->ident_ascii = false;
		if (lx->nident < JS_CLASS_NAME_MAX)
			lx->nident++;
		return 0;
	}
	if (lx->nident)
		word_end(lx);
	switch (u) {
	case ' ': case '\t': case '\n': case '\r': case '\v': case '\f': case 0xa0: case 0xfeff: case 0x2028:
	case 0x2029:
		return 0;
	case '/':
		lx->slash = true;
		return 0;
	case '\'':
		lx->state = S_SQ;
		break;
	case '"':
		lx->state = S_DQ;
		break;
	case '`':
		lx->state = S_TPL;
		lx->dollar = false;
		break;
	case '{': case '(': case '[':
		if (u == '(' && lx->prev == 'c')
			lx->cls_pending = false; /* a method named class */
		r = push(lx, (uint8_t)u);
		break;
	case ')':
		r = pop(lx, '(');
		break;
	case ']':
		r = pop(lx, '[');
		break;
	case '}':
		if (lx->depth && lx->stack[lx->depth - 1].kind == '$') {
			r = pop(lx, '$');
			lx->state = S_TPL;
			lx->dollar = false;
			return r;
		}
		r = pop(lx, '{');
		break;
	case '=':
		if (lx->prev == 'a')
			strcpy(lx->assigned, lx->last_word);
		else
			lx->assigned[0] = 0;
		break;
	case ';': case ':': case ',':
		/* "class" as a key ({ class: 1 }) or a statement's end: no class follows. */
		if (lx->cls_pending && (lx->prev == 'c' || lx->depth == lx->cls_depth))
			lx->cls_pending = false;
		break;
	default:
		break;
	}
	lx->prev_dot = u == '.';
	lx->prev = lx->state == S_CODE ? (uint8_t)(u < 0x80 ? u : '?') : 'a'; /* a string is a value */
	return r;
}

static int unit(struct js_lexer *lx, uint16_t u)
{
	switch (lx->state) {
	case S_CODE:
		if (!lx->pos && u == '#') { /* #! at the very start */
			lx->state = S_LINE;
			return 0;
		}
		return code(lx, u);
	case S_LINE:
		if (u == '\n' || u == '\r' || u == 0x2028 || u == 0x2029)
			lx->state = S_CODE;
		return 0;
	case S_BLOCK:
		if (lx->star && u == '/')
			lx->state = S_CODE;
		lx->star = u == '*';
		return 0;
	case S_SQ:
	case S_DQ:
		if (lx->esc)
			lx->esc = false;
		else if (u == '\\')
			lx->esc = true;
		else if (u == (lx->state == S_SQ ? '\'' : '"') || u == '\n' || u == '\r')
			lx->state = S_CODE;
		return 0;
	case S_TPL: {
		bool was = lx->esc, dollar = lx->dollar;

		lx->esc = !was && u == '\\';
		lx->dollar = !was && u == '$';
		if (was)
			return 0;
		if (u == '`') {
			lx->state = S_CODE;
			lx->prev = 'a';
		} else if (u == '{' && dollar) {
			lx->state = S_CODE;
			lx->prev = '{';
			lx->dollar = false;
			return push(lx, '$');
		}
		return 0;
	}
	case S_RE:
		if (lx->esc)
			lx->esc = false;
		else if (u == '\\')
			lx->esc = true;
		else if (u == '[')
			lx->in_set = true;
		else if (u == ']')
			lx->in_set = false;
		else if ((u == '/' && !lx->in_set) || u == '\n' || u == '\r') {
			lx->state = S_CODE;
			lx->prev = 'a';
		}
		return 0;
	}
	return 0;
}

int js_lexer_feed(struct js_lexer *lx, const uint8_t *p, size_t n, bool two_byte)
{
	for (size_t i = 0; i < n && !lx->stopped; i++) {
		uint16_t u = p[i];
		int r;

		if (two_byte)
			memcpy(&u, p + 2 * i, 2);
		if ((r = unit(lx, u)) < 0)
			return r;
		if (lx->pos == UINT32_MAX)
			lx->stopped = true;
		lx->pos++;
	}
	return lx->stopped ? 1 : 0;
}

const struct js_class *js_class_at(const struct js_classes *c, uint32_t pos)
{
	const struct js_class *best = NULL;
	uint32_t bi = 0;

	for (uint32_t i = 0; i < c->ncls; i++) {
		const struct js_class *k = &c->cls[i];

		if (k->open < pos && pos < k->close && (!best || k->open > best->open)) {
			best = k;
			bi = i;
		}
	}
	if (!best)
		return NULL;
	for (uint32_t i = 0; i < c->nmem; i++)
		if (c->mem[i].cls == bi && c->mem[i].open < pos && pos < c->mem[i].close)
			return NULL; /* inside a member: a function of its own */
	return best;
}

size_t js_classes_bytes(const struct js_classes *c)
{
	return (size_t)c->ncls * sizeof(*c->cls) + (size_t)c->nmem * sizeof(*c->mem);
}

void js_classes_free(struct js_classes *c)
{
	if (!c)
		return;
	free(c->cls);
	free(c->mem);
	*c = (struct js_classes){ 0 };
}
