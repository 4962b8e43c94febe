/* test_v8heap.c: V8 heap objects read from a memory image laid out as Node 20's (strings:
 * sequential, two-byte, cons, thin; a function's name from a ScopeInfo; a real source position
 * table; line ends from a source), and forged ones (loops, huge lengths, wrong types) failing cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "v8heap.h"
#include "v8forge.h"
#include "v8node20.h"

#define BASE 0x10000ull
V8FORGE_IMAGE(8192, BASE)

#define map(i, type) v8forge_map(&forge, i, type)
#define string1(i, map_i, s) v8forge_string(&forge, i, map_i, s)

enum { M_STR1 = 2, M_STR2 = 4, M_CONS = 6, M_THIN = 8, M_SFI = 10, M_SCOPE = 12, M_SCRIPT = 14, M_BA = 16,
       M_BYTES = 18, M_STR1N = 20, M_FA = 22 };

static int setup(void **state)
{
	(void)state;
	memset(img, 0, sizeof(img));
	map(M_STR1, 8);   /* ONE_BYTE_INTERNALIZED_STRING_TYPE */
	map(M_STR2, 32);  /* STRING_TYPE: two-byte */
	map(M_CONS, 41);  /* CONS_ONE_BYTE_STRING_TYPE */
	map(M_THIN, 61);  /* a thin one-byte string: representation 5 */
	map(M_SFI, 262);
	map(M_SCOPE, 261);
	map(M_SCRIPT, 167);
	map(M_BA, 191);
	map(M_BYTES, 190);
	map(M_STR1N, 40); /* ONE_BYTE_STRING_TYPE: not internalized */
	return 0;
}

static void test_strings(void **state)
{
	char out[64];
	uint16_t two[] = { 'w', 'o', 0xe9, 'k' };
	int32_t len = 4;

	(void)state;
	string1(100, M_STR1, "fifty");
	assert_int_equal(v8_string(&mem, &node20_vp, TAG(100), out, sizeof(out)), 5);
	assert_string_equal(out, "fifty");
	/* Two-byte: beyond ASCII is '?'. */
	img[120] = TAG(M_STR2);
	memcpy((char *)&img[120] + 12, &len, 4);
	memcpy((char *)&img[120] + 16, two, sizeof(two));
	assert_int_equal(v8_string(&mem, &node20_vp, TAG(120), out, sizeof(out)), 4);
	assert_string_equal(out, "wo?k");
	/* A cons of the two, through a thin string; control characters are '?'. */
	string1(140, M_STR1, "a\nb");
	img[160] = TAG(M_CONS);
	img[162] = TAG(140);
	img[163] = TAG(170);
	img[170] = TAG(M_THIN);
	img[172] = TAG(100);
	assert_int_equal(v8_string(&mem, &node20_vp, TAG(160), out, sizeof(out)), 8);
	assert_string_equal(out, "a?bfifty");
	/* Cut to the buffer. */
	assert_int_equal(v8_string(&mem, &node20_vp, TAG(160), out, 4), 3);
	assert_string_equal(out, "a?b");
	/* A cons that is its own first half, a length past any string, no string at all. */
	img[162] = TAG(160);
	assert_true(v8_string(&mem, &node20_vp, TAG(160), out, sizeof(out)) < 0);
	len = 0x7fffffff;
	memcpy((char *)&img[100] + 12, &len, 4);
	assert_int_equal(v8_string(&mem, &node20_vp, TAG(100), out, sizeof(out)), -E2BIG);
	img[190] = TAG(M_SFI); /* a SharedFunctionInfo is no string */
	assert_int_equal(v8_string(&mem, &node20_vp, TAG(190), out, sizeof(out)), -EBADMSG);
	assert_true(v8_string(&mem, &node20_vp, SMI(3), out, sizeof(out)) < 0);
	assert_true(v8_string(&mem, &node20_vp, BASE + sizeof(img) - 7, out, sizeof(out)) < 0);
}

static void test_function_name_and_line(void **state)
{
	/* Node 20's table of split.js's fifty(): the function entry, then bytecode offsets. */
	static const uint8_t tab[] = { 0x01, 0xe8, 0x0a, 0x02, 0x40, 0x06, 0x48, 0x04, 0x14, 0x05, 0x00, 0x0a,
				       0x28, 0x07, 0x10, 0x0c, 0x1f, 0x0b, 0x5f, 0x08, 0xf0, 0x01, 0x04, 0x24 };
	const char src[] = "a\nbb\nfunction f() {\n  loop;\n}\n";
	struct v8_script sc;
	uint32_t check;
	char name[64];
	int32_t start, pos;

	(void)state;
	assert_int_equal(v8_postab_lookup(tab, sizeof(tab), 15), 398);
	assert_int_equal(v8_postab_lookup(tab, sizeof(tab), 0), 361);
	assert_int_equal(v8_postab_lookup(tab, 0, 0), -1);
	assert_int_equal(v8_postab_lookup((const uint8_t *)"\xff\xff\xff", 3, 5), -1);
	/* SharedFunctionInfo -> ScopeInfo (no context locals: the name, then the range). */
	img[200] = TAG(M_SFI);
	img[201] = TAG(300);             /* function_data: the BytecodeArray */
	img[202] = TAG(250);             /* name_or_scope_info */
	img[204] = TAG(400);             /* script */
	img[250] = TAG(M_SCOPE);
	img[251] = SMI(0);               /* flags */
	img[252] = SMI(1);               /* parameters */
	img[253] = SMI(0);               /* context locals */
	img[254] = TAG(100);             /* the name */
	img[255] = SMI(9);               /* the source range */
	img[256] = SMI(30);
	string1(100, M_STR1, "fifty");
	assert_int_equal(v8_sfi_name(&mem, &node20_vp, TAG(200), name, sizeof(name), &start), 0);
	assert_string_equal(name, "fifty");
	assert_int_equal(start, 9);
	assert_int_equal(v8_sfi_check(&mem, &node20_vp, TAG(200), &check), 0);
	assert_int_equal(check, (uint32_t)(TAG(250) ^ TAG(400)));
	/* The bytecode's table: BytecodeArray's fourth word, a ByteArray. */
	img[300] = TAG(M_BA);
	img[304] = TAG(320);
	img[320] = TAG(M_BYTES);
	img[321] = SMI(sizeof(tab));
	memcpy(&img[322], tab, sizeof(tab));
	assert_int_equal(v8_bytecode_position(&mem, &node20_vp, TAG(200), 15, &pos), 0);
	assert_int_equal(pos, 398);
	/* The script: its name, and line ends found in its source. */
	img[400] = TAG(M_SCRIPT);
	img[401] = TAG(500);             /* source */
	img[402] = TAG(100);             /* name */
	img[407] = SMI(0);               /* line_ends: not made by V8 */
	string1(500, M_STR1, src);
	assert_int_equal(v8_script_name(&mem, &node20_vp, TAG(400), name, sizeof(name)), 5);
	assert_int_equal(v8_script_read(&mem, &node20_vp, TAG(400), &sc), 0);
	assert_int_equal(sc.n, 6);
	assert_int_equal(sc.source, TAG(500));
	assert_int_equal(v8_line_of(sc.ends, sc.n, 0), 1);
	assert_int_equal(v8_line_of(sc.ends, sc.n, 2), 2);
	assert_int_equal(v8_line_of(sc.ends, sc.n, (int32_t)(strstr(src, "loop") - src)), 4);
	assert_int_equal(v8_line_of(sc.ends, sc.n, 1000), 0);
	v8_script_free(&sc);
	/* Anonymous: a small integer where the name would be. */
	img[202] = SMI(0);
	assert_int_equal(v8_sfi_name(&mem, &node20_vp, TAG(200), name, sizeof(name), &start), 0);
	assert_string_equal(name, "");
	/* A string not internalized (one of the program's, where the collector moved the
	 * name) is no function's name; in a ScopeInfo it is passed over. */
	string1(140, M_STR1N, "o872");
	img[202] = TAG(140);
	assert_int_equal(v8_sfi_name(&mem, &node20_vp, TAG(200), name, sizeof(name), &start), -EBADMSG);
	img[202] = TAG(250);
	img[254] = TAG(140);
	img[255] = TAG(100);
	img[256] = SMI(9);
	img[257] = SMI(30);
	assert_int_equal(v8_sfi_name(&mem, &node20_vp, TAG(200), name, sizeof(name), &start), 0);
	assert_string_equal(name, "fifty");
	/* No source range after it: read past a ScopeInfo of another shape, no name. */
	img[256] = SMI(30);
	img[257] = SMI(9);
	assert_int_equal(v8_sfi_name(&mem, &node20_vp, TAG(200), name, sizeof(name), &start), -EBADMSG);
	assert_string_equal(name, "");
	/* An internalized string holding a pointer's bytes (an object that moved, its old
	 * place reused): v8_string reads it, as a function's name it is refused. */
	string1(140, M_STR1, "Y\x05p\x7fT$..");
	memset((char *)&img[140] + 16 + 6, 0, 2); /* the pointer's high bytes */
	img[202] = TAG(140);
	assert_int_equal(v8_string(&mem, &node20_vp, TAG(140), name, sizeof(name)), 8);
	assert_string_equal(name, "Y?p?T$??");
	assert_int_equal(v8_sfi_name(&mem, &node20_vp, TAG(200), name, sizeof(name), &start), -EBADMSG);
	assert_string_equal(name, "");
	img[202] = TAG(250);
	/* Not a SharedFunctionInfo (moved, freed): refused. */
	img[200] = TAG(M_SCRIPT);
	assert_int_equal(v8_sfi_name(&mem, &node20_vp, TAG(200), name, sizeof(name), &start), -ESTALE);
}

/* Reads of the image, counted where they fall in [count_lo, count_hi). */
static uint64_t count_lo, count_hi;
static size_t counted;

static int counting_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	if (addr < count_hi && addr + len > count_lo)
		counted += len;
	return v8forge_read(ctx, addr, buf, len);
}

/* A script's lines and classes come from one walk of its source, with or without V8's own
 * table of line ends. */
static void test_script_one_walk(void **state)
{
	const char src[] = "class Cart {\n  total() { return 1; }\n}\nfunction f() {}\n";
	const struct v8_mem counting = { counting_read, &forge };
	uint32_t method = (uint32_t)(strstr(src, "total(") - src) + 5, plain = (uint32_t)(strstr(src, "f()") - src) + 1;
	const struct js_class *k;
	struct v8_script sc;

	(void)state;
	map(M_STR1, 8);
	map(M_SCRIPT, 167);
	map(M_FA, 175);
	img[400] = TAG(M_SCRIPT);
	img[401] = TAG(500); /* source */
	img[402] = TAG(100); /* name */
	img[407] = SMI(0);   /* line_ends: not made by V8 */
	string1(100, M_STR1, "cart.js");
	string1(500, M_STR1, src);
	count_lo = BASE + 8 * 500 + 16;
	count_hi = count_lo + strlen(src);
	counted = 0;
	assert_int_equal(v8_script_read(&counting, &node20_vp, TAG(400), &sc), 0);
	assert_int_equal(counted, strlen(src));
	assert_int_equal(sc.source, TAG(500));
	assert_int_equal(sc.n, 5); /* four newlines, then the source's end */
	assert_int_equal(v8_line_of(sc.ends, sc.n, (int32_t)method), 2);
	assert_int_equal(v8_line_of(sc.ends, sc.n, (int32_t)plain), 4);
	assert_non_null(k = js_class_at(&sc.cls, method));
	assert_string_equal(k->name, "Cart");
	assert_null(js_class_at(&sc.cls, plain));
	v8_script_free(&sc);
	/* V8's table: its lines, the classes from the source still, read once. */
	img[600] = TAG(M_FA);
	img[601] = SMI(3);
	img[602] = SMI(12);
	img[603] = SMI(36);
	img[604] = SMI(38);
	img[407] = TAG(600);
	counted = 0;
	assert_int_equal(v8_script_read(&counting, &node20_vp, TAG(400), &sc), 0);
	assert_int_equal(counted, strlen(src));
	assert_int_equal(sc.n, 3);
	assert_int_equal(sc.ends[1], 36);
	assert_non_null(k = js_class_at(&sc.cls, method));
	assert_string_equal(k->name, "Cart");
	v8_script_free(&sc);
	/* No source to read: the table's lines, no classes. */
	img[401] = SMI(0);
	assert_int_equal(v8_script_read(&mem, &node20_vp, TAG(400), &sc), 0);
	assert_int_equal(sc.n, 3);
	assert_int_equal(sc.cls.ncls, 0);
	v8_script_free(&sc);
	/* Neither: no lines, an error, nothing to free. */
	img[407] = SMI(0);
	assert_true(v8_script_read(&mem, &node20_vp, TAG(400), &sc) < 0);
	assert_null(sc.ends);
	assert_int_equal(sc.n, 0);
}

/* Random words over the whole image: every call answers, none runs away. */
static void test_garbage(void **state)
{
	char out[64];
	struct v8_script sc;
	int32_t start, pos;

	(void)state;
	srand(29);
	for (int round = 0; round < 200; round++) {
		for (size_t i = 20; i < sizeof(img) / 8; i++)
			img[i] = rand() % 3 ? TAG(rand() % 1024) : (uint64_t)rand() << (rand() % 40);
		for (int k = 0; k < 50; k++) {
			uint64_t p = TAG(rand() % 1024);

			v8_string(&mem, &node20_vp, p, out, sizeof(out));
			v8_sfi_name(&mem, &node20_vp, p, out, sizeof(out), &start);
			v8_bytecode_position(&mem, &node20_vp, p, (uint32_t)rand() % 100, &pos);
			if (v8_script_read(&mem, &node20_vp, p, &sc) == 0) {
				assert_true(sc.n > 0 && sc.n <= V8_LINES_MAX);
				v8_script_free(&sc);
			}
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_strings, setup),
		cmocka_unit_test_setup(test_function_name_and_line, setup),
		cmocka_unit_test_setup(test_script_one_walk, setup),
		cmocka_unit_test_setup(test_garbage, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
