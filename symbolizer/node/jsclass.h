/* jsclass.h: the classes of a JavaScript source, found by a streaming lexer, so that a method
 * is named with its class (Cart.total). Pure: fed the source's text, no process is read here. */
#ifndef PROWL_JSCLASS_H
#define PROWL_JSCLASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JS_CLASS_NAME_MAX 64     /* bytes of a class's name kept (ASCII identifiers only) */
#define JS_CLASSES_MAX    4096   /* classes kept per script */
#define JS_MEMBERS_MAX    65536  /* brackets directly in class bodies kept per script */
#define JS_NEST_MAX       512    /* brackets open at once; deeper: the lexer stops */

/* Positions count UTF-16 units from the source's start, as V8's do. */
struct js_class {
	uint32_t open, close; /* its body's braces */
	char name[JS_CLASS_NAME_MAX];
};

/* A bracket ({, ( or [) directly in a class body: a method's parameters or body, a field's
 * initializer. A function that starts inside one is not a member of the class. */
struct js_member {
	uint32_t open, close, cls;
};

struct js_classes {
	struct js_class *cls;
	struct js_member *mem;
	uint32_t ncls, nmem;
};

struct js_frame {
	uint32_t open;
	uint32_t cls; /* a class body's or a member's class: its index + 1; else 0 */
	uint8_t kind; /* '{', '(', '[', or '$' for a template's ${ */
	bool body;    /* a class body */
	bool member;  /* directly in a class body */
};

/* The lexer's state between pieces of the source. */
struct js_lexer {
	struct js_classes *out;
	uint32_t pos;
	uint8_t state;       /* code, comments, strings, template, regular expression */
	bool esc, in_set;    /* a backslash before; inside a regular expression's [ ] */
	bool slash;          /* a '/' just seen in code: comment, division or expression */
	bool star;           /* a '*' just seen in a block comment */
	bool dollar;         /* a '$' just seen in a template */
	bool stopped;        /* a bracket that does not match, or too deep: nothing more */
	char ident[JS_CLASS_NAME_MAX];
	uint32_t nident;     /* bytes of the identifier being read (0: none) */
	bool ident_ascii;
	uint8_t prev;        /* the previous token: a punctuator, or 'a' (a word or value), 'k' (an operator keyword) */
	bool prev_dot;       /* the previous token was '.' (obj.class is no class) */
	/* A class being declared: its keyword's depth, and its name so far. */
	bool cls_pending, cls_extends;
	uint32_t cls_depth;
	char cls_name[JS_CLASS_NAME_MAX];
	char assigned[JS_CLASS_NAME_MAX]; /* NAME in "NAME = class {": the word before '=' */
	char last_word[JS_CLASS_NAME_MAX];
	uint32_t depth;
	struct js_frame stack[JS_NEST_MAX];
};

void js_lexer_init(struct js_lexer *lx, struct js_classes *out);

/* The next n units of the source: bytes (Latin-1) or, two_byte, UTF-16 units. Returns 0,
 * 1 once the lexer has stopped (the rest need not be fed), or -ENOMEM. */
int js_lexer_feed(struct js_lexer *lx, const uint8_t *p, size_t n, bool two_byte);

/* The class whose body holds the start of a function at pos directly (not inside one of
 * its members), or NULL. */
const struct js_class *js_class_at(const struct js_classes *c, uint32_t pos);

size_t js_classes_bytes(const struct js_classes *c);
void js_classes_free(struct js_classes *c);

#endif
