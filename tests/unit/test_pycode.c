/* test_pycode.c: the CPython line table readers (pycode_line) against CPython itself: Debian's
 * python3 (3.11's location table) and pyenv's 3.6-3.10 (co_lnotab, 3.10's co_linetable)
 * compile a source with short, one-line, long-form and no-column entries and print each code
 * object's table and the line of each instruction as CPython tells it; and the resolver on
 * a code object forged in this process. */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pycode.h"
#include "pyresolve.h"
#include "pyversions.h"

#define PYTHON "/usr/bin/python3"

/* Prints per code object: "FIRSTLINENO LINETABLE-HEX INDEX:LINE ..." (LINE 0: none). A
 * 300-line gap needs the long form; multi-line expressions and a comprehension give
 * one-line and no-column entries. */
static const char script[] =
	"import dis, sys\n"
	"src = 'def short(a, b):\\n    c = a + b\\n    d = c * 2\\n    return d\\n'\n"
	"src += 'def far(x):\\n    y = x + 1\\n' + '\\n' * 300\n"
	"src += '    z = (y,\\n         y + 2,\\n         y + 3)\\n    for i in range(3):\\n'\n"
	"src += '        z = z + (i,)\\n    return z\\n'\n"
	"src += 'class K:\\n    def m(self):\\n        return [v * 2 for v in range(4)\\n'\n"
	"src += '                if v]\\n'\n"
	"def walk(co):\n"
	"    yield co\n"
	"    for c in co.co_consts:\n"
	"        if hasattr(c, 'co_code'): yield from walk(c)\n"
	"def lines36(co):\n" /* before 3.10: dis's reading of co_lnotab, per instruction */
	"    starts, line, out = dict(dis.findlinestarts(co)), co.co_firstlineno, []\n"
	"    for o in range(0, len(co.co_code), 2):\n"
	"        line = starts.get(o, line)\n"
	"        out.append('%d:%d' % (o // 2, line))\n"
	"    return out\n"
	"for co in walk(compile(src, 'gen.py', 'exec')):\n"
	"    if sys.version_info >= (3, 10):\n"
	"        pairs = ['%d:%d' % (o // 2, line or 0) for s, e, line in co.co_lines() for o in range(s, e, 2)]\n"
	"        table = co.co_linetable\n"
	"    else:\n"
	"        pairs, table = lines36(co), co.co_lnotab\n"
	"    print(co.co_firstlineno, table.hex() or '-', ' '.join(pairs))\n";

/* Runs python on the script; compares pycode_line() (table format lines) with what it
 * prints. Returns the number of code objects; fails the test on a wrong line. */
static size_t check_python(const char *python, uint8_t lines, size_t *checked, size_t *far)
{
	char path[32], *line = NULL;
	size_t cap = 0, objects = 0, wrong = 0;
	char first_wrong[200] = "";
	FILE *in = popen_script(python, script, "", path);

	assert_non_null(in);
	while (getline(&line, &cap, in) > 0) {
		char *save = NULL, *first = strtok_r(line, " \n", &save), *hex = strtok_r(NULL, " \n", &save), *pair;
		uint8_t table[4096];
		size_t n = 0;
		struct pycode co = { .lines = lines };

		assert_non_null(first);
		assert_non_null(hex);
		for (; strcmp(hex, "-") != 0 && hex[2 * n] && n < sizeof(table); n++)
			assert_int_equal(sscanf(hex + 2 * n, "%2hhx", &table[n]), 1);
		co.firstlineno = atoi(first);
		co.linetable = table;
		co.linetable_len = n;
		while ((pair = strtok_r(NULL, " \n", &save))) {
			unsigned idx;
			int want;

			assert_int_equal(sscanf(pair, "%u:%d", &idx, &want), 2);
			if (pycode_line(&co, idx) != want && !wrong++)
				snprintf(first_wrong, sizeof(first_wrong), "%s: code object at line %d, instruction %u: line %d, "
					 "CPython says %d", python, co.firstlineno, idx, pycode_line(&co, idx), want);
			(*checked)++;
			*far += want > 300;
		}
		objects++;
	}
	free(line);
	assert_int_equal(pclose(in), 0);
	unlink(path);
	if (wrong)
		fail_msg("%zu instructions on the wrong line; the first: %s", wrong, first_wrong);
	return objects;
}

static void test_against_cpython(void **state)
{
	size_t checked = 0, far = 0;

	(void)state;
	if (access(PYTHON, X_OK) != 0)
		skip_because("%s is not installed (Debian's python3)", PYTHON);
	/* The module, short, far, K, K.m and its comprehension, each instruction of each. */
	assert_true(check_python(PYTHON, PY_LINES_LOCATIONS, &checked, &far) >= 6);
	assert_true(checked > 60);
	assert_true(far > 10); /* after the long-form jump */
}

/* pyenv's 3.6-3.10 (those installed): co_lnotab and 3.10's co_linetable. */
static void test_older_tables_against_cpython(void **state)
{
	static const char *const minors[] = { "3.6", "3.7", "3.8", "3.9", "3.10" };
	const char *home = getenv("PYENV_ROOT"), *root = getenv("HOME");
	size_t ran = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(minors) / sizeof(minors[0]); i++) {
		char cmd[512], py[400] = "";
		size_t checked = 0, far = 0;
		FILE *ls;

		snprintf(cmd, sizeof(cmd), "ls -d %s%s/versions/%s.*/bin/python%s 2>/dev/null | tail -1",
			 home ? home : root ? root : "/root", home ? "" : "/.pyenv", minors[i], minors[i]);
		ls = popen(cmd, "r");
		assert_non_null(ls);
		if (!fgets(py, sizeof(py), ls))
			py[0] = 0;
		pclose(ls);
		py[strcspn(py, "\n")] = 0;
		if (!py[0])
			continue;
		assert_true(check_python(py, strcmp(minors[i], "3.10") == 0 ? PY_LINES_310 : PY_LINES_LNOTAB, &checked,
					 &far) >= 6);
		assert_true(checked > 60 && far > 10);
		ran++;
	}
	if (!ran)
		skip_because("pyenv has none of CPython 3.6-3.10 here (install them with pyenv install)");
}

/* A 3.8 str object (compact ASCII) holding text, built in this process's memory. */
static uint8_t *fake_str(const struct py_layout *l, const char *text)
{
	uint8_t *o = calloc(1, l->ascii_data + strlen(text) + 1);
	uint64_t len = strlen(text);
	uint32_t state = 1u << 2 | 1u << 5 | 1u << 6; /* kind 1, compact, ascii */

	assert_non_null(o);
	memcpy(o + 16, &len, 8);
	memcpy(o + 32, &state, 4);
	memcpy(o + l->ascii_data, text, len);
	return o;
}

static struct prowl_py_proc fake_proc = { .version = 3 << 8 | 8, .gen = 7 };

static int fake_proc_get(void *ctx, uint32_t pid, struct prowl_py_proc *ret)
{
	(void)ctx;
	(void)pid;
	*ret = fake_proc;
	return 0;
}

/* The resolver on a code object forged in this process (3.8's layout, no type checks):
 * a frame sampled before its first instruction (f_lasti -1) is at its def line, as
 * CPython's PyFrame_GetLineNumber says; a running one at its lnotab line. */
static void test_resolver_entered_frame_is_at_def_line(void **state)
{
	const struct py_layout *l = py_layout_for(3, 8);
	/* def line 16; bytes 0-3 line 16, 4-9 line 17, 10- line 19 */
	static const uint8_t lnotab[] = { 4, 1, 6, 2 };
	struct maps_io io = { .py_proc_get = fake_proc_get };
	struct prowl_pyframe f = { .firstlineno = 16 };
	uint8_t *code, *name, *file, *table;
	struct py_resolver *r;
	struct py_frame_name n;
	uint64_t key, tlen = sizeof(lnotab), addr;
	const char *why = NULL;
	int32_t first = 16;

	(void)state;
	assert_non_null(l);
	code = calloc(1, 512);
	table = calloc(1, l->bytes_data + sizeof(lnotab));
	assert_non_null(code);
	assert_non_null(table);
	name = fake_str(l, "hot60");
	file = fake_str(l, "/w/pyversions.py");
	memcpy(table + 16, &tlen, 8);
	memcpy(table + l->bytes_data, lnotab, sizeof(lnotab));
	memcpy(code + l->co_firstlineno, &first, 4);
	addr = (uintptr_t)name;
	memcpy(code + l->co_qualname, &addr, 8);
	addr = (uintptr_t)file;
	memcpy(code + l->co_filename, &addr, 8);
	addr = (uintptr_t)table;
	memcpy(code + l->co_linetable, &addr, 8);
	f.code = (uintptr_t)code;

	assert_int_equal(py_resolver_new(&r), 0);
	py_resolver_set_io(r, &io);
	f.lasti = PROWL_PYF_LASTI_NONE;
	assert_int_equal(py_resolver_frame(r, (uint32_t)getpid(), 7, &f, &n, &key, &why), 0);
	assert_string_equal(n.function, "hot60");
	assert_string_equal(n.file, "/w/pyversions.py");
	assert_int_equal(n.line, 16);
	assert_int_equal(n.start_line, 16);
	/* The outermost frame's bit does not change the line. */
	f.lasti = PROWL_PYF_LASTI_NONE | PROWL_PYF_ENTRY;
	assert_int_equal(py_resolver_frame(r, (uint32_t)getpid(), 7, &f, &n, &key, &why), 0);
	assert_int_equal(n.line, 16);
	f.lasti = 3; /* code units: byte 6 */
	assert_int_equal(py_resolver_frame(r, (uint32_t)getpid(), 7, &f, &n, &key, &why), 0);
	assert_int_equal(n.line, 17);
	f.lasti = 5; /* byte 10 */
	assert_int_equal(py_resolver_frame(r, (uint32_t)getpid(), 7, &f, &n, &key, &why), 0);
	assert_int_equal(n.line, 19);
	py_resolver_free(r);
	free(code);
	free(table);
	free(name);
	free(file);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_cpython),
		cmocka_unit_test(test_older_tables_against_cpython),
		cmocka_unit_test(test_resolver_entered_frame_is_at_def_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
