/* test_escape.c: unit tests of the one escaper (JSON, HTML-safe JSON, terminal-safe
 * text): exact outputs, and valid UTF-8 with no raw control character for any bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <iconv.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "sbuf.h"

/* What fn wrote for s (a static buffer). */
static const char *written(void (*fn)(FILE *, const char *), const char *s)
{
	static char buf[4096];
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	assert_non_null(f);
	fn(f, s);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void test_utf8_seq_len(void **state)
{
	static const struct { const char *s; size_t n; } cases[] = {
		{ "a", 1 }, { "\x7f", 1 }, { "\xc2\xa9", 2 }, { "\xe2\x82\xac", 3 }, { "\xf0\x9f\x98\x80", 4 },
		{ "\xf4\x8f\xbf\xbf", 4 },           /* U+10FFFF, the last code point */
		{ "\xc0\x80", 0 }, { "\xc1\xbf", 0 }, /* overlong two-byte forms */
		{ "\xe0\x80\x80", 0 }, { "\xe0\x9f\xbf", 0 }, { "\xf0\x8f\xbf\xbf", 0 }, /* overlong */
		{ "\xed\xa0\x80", 0 }, { "\xed\xbf\xbf", 0 }, /* UTF-16 surrogates */
		{ "\xf4\x90\x80\x80", 0 }, { "\xf5\x80\x80\x80", 0 }, { "\xff", 0 }, { "\xfe", 0 },
		{ "\x80", 0 }, { "\xbf", 0 },          /* a continuation byte alone */
		{ "\xe2\x82", 0 }, { "\xf0\x9f\x98", 0 }, /* cut short by the NUL */
		{ "\xe2(\xac", 0 },
	};
	char out[32];
	uint32_t cp = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (utf8_seq_len((const unsigned char *)cases[i].s, SIZE_MAX, NULL) != cases[i].n)
			fail_msg("case %zu: got %zu, want %zu", i,
				 utf8_seq_len((const unsigned char *)cases[i].s, SIZE_MAX, NULL), cases[i].n);
	/* A bound cuts a sequence short like a NUL does. */
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xe2\x82\xac", 3, &cp), 3);
	assert_int_equal(cp, 0x20ac);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xe2\x82\xac", 2, NULL), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"a", 0, NULL), 0);
	/* utf8_sanitize: s[0..n) only, U+FFFD per invalid byte, nothing past n. */
	assert_int_equal(utf8_sanitize("ok\xff\xe2\x82\xacZZ", 6, out), 8);
	assert_memory_equal(out, "ok\xef\xbf\xbd\xe2\x82\xac", 8);
	assert_int_equal(utf8_sanitize("\xe2\x82\xac", 2, out), 6); /* cut: two U+FFFD */
	assert_memory_equal(out, "\xef\xbf\xbd\xef\xbf\xbd", 6);
}

static void test_json_exact(void **state)
{
	static const struct { const char *in, *out; } cases[] = {
		{ "", "\"\"" },
		{ "plain", "\"plain\"" },
		{ "q\"b\\s/", "\"q\\\"b\\\\s/\"" },
		{ "\n\r\t\x01\x1f\x7f", "\"\\n\\r\\t\\u0001\\u001f\\u007f\"" },
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"" },
		{ "\xff\xfe", "\"\\ufffd\\ufffd\"" },
		{ "a\xc3(b", "\"a\\ufffd(b\"" },              /* a sequence cut short: one U+FFFD, then go on */
		{ "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"" }, /* a surrogate: each byte replaced */
		{ "\xc2\x85\xc2\x9b", "\"\\u0085\\u009b\"" },    /* C1 controls (NEL, CSI) */
		{ "\xc2\xa0", "\"\xc2\xa0\"" },                  /* U+00A0 is no control */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_string_equal(written(escape_json, cases[i].in), cases[i].out);
	assert_string_equal(written(escape_json, NULL), "\"\"");
}

/* The HTML flag: what would end a <script> element or a JS string is escaped too. */
static void test_json_html(void **state)
{
	struct sbuf b = {};

	(void)state;
	assert_int_equal(escape_json_sbuf(&b, "</script>&\xe2\x80\xa8\xe2\x80\xa9", ESCAPE_HTML), 0);
	assert_string_equal(b.s, "\"\\u003c/script\\u003e\\u0026\\u2028\\u2029\"");
	b.len = 0;
	assert_int_equal(escape_json_sbuf(&b, "</script>&", 0), 0);
	assert_string_equal(b.s, "\"</script>&\"");
	sbuf_free(&b);
}

static void test_printable_exact(void **state)
{
	static const struct { const char *in, *out; } cases[] = {
		{ "main (a.c)", "main (a.c)" },
		{ "a\nb\r\t\x1b[2J", "a?b???[2J" },
		{ "\xff" "ok \xc3\xa9", "?ok \xc3\xa9" },
		{ "\xc2\x9b" "31m", "?31m" },
	};
	char buf[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_string_equal(printable(cases[i].in, buf, sizeof(buf)), cases[i].out);
}

/* printable() into a buffer, for the table-driven loop below. */
static void put_printable(FILE *f, const char *s)
{
	char buf[256];

	fputs(printable(s, buf, sizeof(buf)), f);
}

/* Whether s is valid UTF-8 by glibc's own converter (not by utf8_seq_len). */
static bool valid_utf8(const char *s)
{
	iconv_t cd = iconv_open("UTF-32LE", "UTF-8");
	char out[4 * 4096], *ip = (char *)s, *op = out;
	size_t il = strlen(s), ol = sizeof(out);
	bool ok;

	assert_true(cd != (iconv_t)-1);
	ok = iconv(cd, &ip, &il, &op, &ol) != (size_t)-1 && il == 0;
	iconv_close(cd);
	return ok;
}

/* Random bytes in, valid UTF-8 out with no raw control character, every time. */
static void test_any_bytes(void **state)
{
	char in[64];

	(void)state;
	srandom(16);
	for (int round = 0; round < 20000; round++) {
		size_t n = (size_t)(random() % 63);
		const char *out;

		for (size_t i = 0; i < n; i++)
			in[i] = (char)(random() % 4 ? random() % 256 : 0x80 + random() % 64) ?: 'x';
		in[n] = 0;
		for (int json = 0; json < 2; json++) {
			out = written(json ? escape_json : put_printable, in);
			if (!valid_utf8(out))
				fail_msg("invalid UTF-8 out of round %d", round);
			for (const unsigned char *p = (const unsigned char *)out; *p; p++)
				if (*p < 0x20 || *p == 0x7f)
					fail_msg("raw control 0x%02x out of round %d", *p, round);
		}
		/* Valid UTF-8 without controls or quotes passes through as it is. */
		if (valid_utf8(in) && !strpbrk(in, "\"\\") && strcmp(written(put_printable, in), in) == 0)
			assert_int_equal(strlen(written(escape_json, in)), strlen(in) + 2);
	}
}

/* What a name becomes in a profile: exact outputs, and utf8_is_text() says when
 * nothing would change. */
static void test_utf8_text(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "main", "main" },
		{ "std::vector<int>::push_back", "std::vector<int>::push_back" },
		{ "caf\xc3\xa9", "caf\xc3\xa9" },                       /* valid UTF-8 stays */
		{ "a\nb\rc\td", "a?b?c?d" },                           /* C0 */
		{ "x\x7fy\xc2\x85z", "x?y?z" },                         /* DEL, C1 (NEL) */
		{ "\xe2\x80\xa8line", "?line" },                        /* U+2028 */
		{ "\xff\xfe;", "\xef\xbf\xbd\xef\xbf\xbd;" },          /* invalid bytes */
		{ "\xc3(", "\xef\xbf\xbd(" },                           /* cut short */
		{ "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* a surrogate */
		{ "\x1b[31mred", "?[31mred" },
	};
	char out[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = utf8_text(cases[i].in, strlen(cases[i].in), out);

		out[n] = 0;
		assert_string_equal(out, cases[i].out);
		assert_int_equal(utf8_is_text(cases[i].in), strcmp(cases[i].in, cases[i].out) == 0);
		assert_true(utf8_is_text(out));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_utf8_seq_len),
		cmocka_unit_test(test_json_exact),
		cmocka_unit_test(test_json_html),
		cmocka_unit_test(test_printable_exact),
		cmocka_unit_test(test_any_bytes),
		cmocka_unit_test(test_utf8_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
