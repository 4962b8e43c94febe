/* test_jsclass.c: the class a function of a JavaScript source belongs to, past comments,
 * strings, templates and regular expressions; nested functions, object literals and broken or
 * huge sources give none; the same in pieces of any size and as UTF-16. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsclass.h"

/* Lexes src (as bytes, or as UTF-16 units when two), fed in pieces of piece units
 * (0: whole). */
static void lex(const char *src, bool two, size_t piece, struct js_classes *c)
{
	size_t n = strlen(src), w = two ? 2 : 1;
	uint8_t *buf = malloc(n * w + 1);
	struct js_lexer *lx = malloc(sizeof(*lx));

	assert_non_null(buf);
	assert_non_null(lx);
	for (size_t i = 0; i < n; i++) {
		if (two) {
			uint16_t u = (uint8_t)src[i];

			memcpy(buf + 2 * i, &u, 2);
		} else {
			buf[i] = (uint8_t)src[i];
		}
	}
	*c = (struct js_classes){ 0 };
	js_lexer_init(lx, c);
	for (size_t at = 0; at < n;) {
		size_t k = piece && piece < n - at ? piece : n - at;

		assert_true(js_lexer_feed(lx, buf + at * w, k, two) >= 0);
		at += k;
	}
	free(lx);
	free(buf);
}

/* The class of the function that starts where needle's last character is in src (a
 * method's '('), or "" when none; checked the same whole, in pieces and as UTF-16. */
static const char *class_of(const char *src, const char *needle)
{
	static char name[JS_CLASS_NAME_MAX];
	const char *at = strstr(src, needle);
	uint32_t pos;

	assert_non_null(at);
	pos = (uint32_t)(at - src + strlen(needle) - 1);
	name[0] = 0;
	for (int v = 0; v < 6; v++) {
		struct js_classes c;
		const struct js_class *k;

		lex(src, v & 1, (size_t[]){ 0, 0, 1, 3, 7, 64 }[v], &c);
		k = js_class_at(&c, pos);
		if (!v)
			snprintf(name, sizeof(name), "%s", k ? k->name : "");
		else
			assert_string_equal(k ? k->name : "", name);
		js_classes_free(&c);
	}
	return name;
}

static void test_methods(void **state)
{
	const char *src = "class Cart {\n  constructor() { this.items = []; }\n"
			  "  total() { let s = 0; for (const i of this.items) { s += i; } return s; }\n"
			  "  static create() {}\n  get size() {}\n  async load() {}\n  *gen() {}\n  #secret() {}\n"
			  "  handler = () => { return 1; };\n  inner = wrap(() => 2);\n}\n";

	(void)state;
	assert_string_equal(class_of(src, "total("), "Cart");
	assert_string_equal(class_of(src, "create("), "Cart");
	assert_string_equal(class_of(src, "size("), "Cart");
	assert_string_equal(class_of(src, "load("), "Cart");
	assert_string_equal(class_of(src, "gen("), "Cart");
	assert_string_equal(class_of(src, "#secret("), "Cart");
	assert_string_equal(class_of(src, "handler = ("), "Cart");
	/* An arrow passed to a call in a field's initializer is no member. */
	assert_string_equal(class_of(src, "wrap(("), "");
	/* The class itself (its constructor's range starts at "class"). */
	assert_string_equal(class_of(src, "c"), "");
}

static void test_kept(void **state)
{
	struct js_classes c;

	(void)state;
	/* Only the brackets directly in a body are kept: m's parameters and body, not the
	 * brackets inside them; and the nested class's own. */
	lex("class A { m(a = [1]) { if (a) { f({ b: (1) }); } class B { n() {} } } }", false, 0, &c);
	assert_int_equal(c.ncls, 2);
	assert_int_equal(c.nmem, 4);
	assert_int_equal(c.mem[0].cls, 0); /* m's ( ) */
	assert_int_equal(c.mem[1].cls, 1); /* n's ( ) */
	assert_int_equal(c.mem[2].cls, 1); /* n's { } */
	assert_int_equal(c.mem[3].cls, 0); /* m's { } */
	assert_true(c.cls[1].open > c.cls[0].open && c.cls[1].close < c.cls[0].close);
	js_classes_free(&c);
}

static void test_not_members(void **state)
{
	const char *src = "function top() {}\n"
			  "class A {\n  m() {\n    function helper() {}\n    const f = function named() {};\n"
			  "    const o = { lit() {} };\n    class Inner { n() {} }\n    return () => 1;\n  }\n}\n"
			  "const obj = { om() {}, class: 1 };\nfunction after() {}\n";

	(void)state;
	assert_string_equal(class_of(src, "top("), "");
	assert_string_equal(class_of(src, "m("), "A");
	assert_string_equal(class_of(src, "helper("), "");
	assert_string_equal(class_of(src, "named("), "");
	assert_string_equal(class_of(src, "lit("), "");
	assert_string_equal(class_of(src, "n("), "Inner");
	assert_string_equal(class_of(src, "om("), "");
	assert_string_equal(class_of(src, "after("), "");
}

static void test_lexing(void **state)
{
	(void)state;
	/* Braces and a class in strings, templates, comments and regular expressions. */
	assert_string_equal(class_of("const s = \"class Fake { x() {} }\", q = 'a{\\'';\nclass Real { y() {} }", "y("),
			    "Real");
	assert_string_equal(class_of("const s = \"class Fake { x() {} }\";\nclass Real { y() {} }", "x("), "");
	assert_string_equal(class_of("const t = `}${ {a: 1}.a + `${'}'}` }{\\${`;\nclass T { z() {} }", "z("), "T");
	assert_string_equal(class_of("const r = /[}{/]\\//g; let q = x / 2 / y;\nclass R { w() { return /}/; } }", "w("),
			    "R");
	assert_string_equal(class_of("// class C {\n/* } { */ class D { v() {} }", "v("), "D");
	assert_string_equal(class_of("#!/usr/bin/env node {\nclass H { m() {} }", "m("), "H");
	assert_string_equal(class_of("if (a) x = b / c; y = (d) / e; z = f[0] / g;\nclass V { m() {} }", "m("), "V");
	assert_string_equal(class_of("x.class = 1; y.class({});\nclass W { m() {} }", "m("), "W");
	assert_string_equal(class_of("class M { class() {} other() {} }", "other("), "M");
	/* Names: assigned, explicit over assigned, extends with a call, none. */
	assert_string_equal(class_of("const Anon = class { u() {} };", "u("), "Anon");
	assert_string_equal(class_of("const X = class Named { t() {} };", "t("), "Named");
	assert_string_equal(class_of("class E extends mix(B, C ? D : F) { s() {} }", "s("), "E");
	assert_string_equal(class_of("module.exports = class extends Base { s() {} }", "s("), "");
	assert_string_equal(class_of("class \xdc" "ber { s() {} }", "s("), ""); /* not ASCII: no name */
}

static void test_broken(void **state)
{
	struct js_classes c;
	char *src;
	size_t n = 0, cap = 1 << 20;

	(void)state;
	/* A bracket that does not match stops the lexer: what was open is never closed. */
	assert_string_equal(class_of("class Z { a() { ) } }", "a("), "");
	assert_string_equal(class_of("class Y { a() {} }\n) class Z { b() {} }", "a("), "Y");
	assert_string_equal(class_of("class Y { a() {} }\n) class Z { b() {} }", "b("), "");
	assert_string_equal(class_of("class U { a() { `${", "a("), ""); /* cut short */
	/* Deeper than JS_NEST_MAX: stops, nothing past it. */
	src = malloc(cap);
	assert_non_null(src);
	n += (size_t)snprintf(src, cap, "class Q { a() {} }\n");
	for (int i = 0; i < JS_NEST_MAX + 10; i++)
		src[n++] = '(';
	n += (size_t)snprintf(src + n, cap - n, "class P { b() {} }");
	assert_string_equal(class_of(src, "a("), "Q");
	assert_string_equal(class_of(src, "b("), "");
	/* More classes than kept: the first JS_CLASSES_MAX are. */
	n = 0;
	for (int i = 0; i < JS_CLASSES_MAX + 5; i++)
		n += (size_t)snprintf(src + n, cap - n, "class K%d { m%d() {} }\n", i, i);
	lex(src, false, 0, &c);
	assert_int_equal(c.ncls, JS_CLASSES_MAX);
	assert_true(js_classes_bytes(&c) >= JS_CLASSES_MAX * sizeof(struct js_class));
	js_classes_free(&c);
	assert_string_equal(class_of(src, "m7("), "K7");
	assert_string_equal(class_of(src, "m4100("), "");
	free(src);
	js_classes_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_methods),
		cmocka_unit_test(test_kept),
		cmocka_unit_test(test_not_members),
		cmocka_unit_test(test_lexing),
		cmocka_unit_test(test_broken),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
