/* test_pycode.c: the CPython line table readers (pycode_line) against CPython itself: Debian's
 * python3 (3.11's location table) and pyenv's 3.6-3.10 (co_lnotab, 3.10's co_linetable)
 * compile a source with short, one-line, long-form and no-column entries and print each code
 * object's table and the line of each instruction as CPython tells it. */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pycode.h"
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
	char path[] = "/tmp/prowl-test-pycode.XXXXXX", cmd[256], *line = NULL;
	size_t cap = 0, objects = 0, wrong = 0;
	char first_wrong[200] = "";
	int fd = mkstemp(path);
	FILE *in;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, script, sizeof(script) - 1), (ssize_t)(sizeof(script) - 1));
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s %s", python, path);
	in = popen(cmd, "r");
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_cpython),
		cmocka_unit_test(test_older_tables_against_cpython),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
