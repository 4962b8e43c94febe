/* test_pycode.c: the CPython 3.11+ line table reader (pycode_line) against CPython itself:
 * Debian's python3 compiles a source with short, one-line, long-form and no-column entries
 * and prints each code object's table and what co_lines() gives per instruction. */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pycode.h"

#define PYTHON "/usr/bin/python3"

/* Prints per code object: "FIRSTLINENO LINETABLE-HEX INDEX:LINE ..." (LINE 0: none). A
 * 300-line gap needs the long form; multi-line expressions and a comprehension give
 * one-line and no-column entries. */
static const char script[] =
	"import sys\n"
	"if sys.version_info < (3, 11): print('old'); sys.exit(0)\n"
	"src = 'def short(a, b):\\n    c = a + b\\n    d = c * 2\\n    return d\\n'\n"
	"src += 'def far(x):\\n    y = x + 1\\n' + '\\n' * 300\n"
	"src += '    z = (y,\\n         y + 2,\\n         y + 3)\\n    for i in range(3):\\n'\n"
	"src += '        z = z + (i,)\\n    return z\\n'\n"
	"src += 'class K:\\n    def m(self):\\n        return [v * 2 for v in range(4)\\n'\n"
	"src += '                if v]\\n'\n"
	"def walk(co):\n"
	"    yield co\n"
	"    for c in co.co_consts:\n"
	"        if hasattr(c, 'co_lines'): yield from walk(c)\n"
	"for co in walk(compile(src, 'gen.py', 'exec')):\n"
	"    pairs = ['%d:%d' % (o // 2, line or 0) for s, e, line in co.co_lines() for o in range(s, e, 2)]\n"
	"    print(co.co_firstlineno, co.co_linetable.hex(), ' '.join(pairs))\n";

static void test_against_cpython(void **state)
{
	char path[] = "/tmp/prowl-test-pycode.XXXXXX", cmd[128], *line = NULL;
	size_t cap = 0, objects = 0, checked = 0, far = 0, wrong = 0;
	char first_wrong[160] = "";
	int fd = mkstemp(path);
	FILE *in;

	(void)state;
	if (access(PYTHON, X_OK) != 0)
		skip_because("%s is not installed (Debian's python3)", PYTHON);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, script, sizeof(script) - 1), (ssize_t)(sizeof(script) - 1));
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s %s", PYTHON, path);
	in = popen(cmd, "r");
	assert_non_null(in);
	while (getline(&line, &cap, in) > 0) {
		char *save = NULL, *first = strtok_r(line, " \n", &save), *hex = strtok_r(NULL, " \n", &save), *pair;
		uint8_t table[4096];
		size_t n = 0;
		struct pycode co = {};

		assert_non_null(first);
		if (strcmp(first, "old") == 0) {
			free(line);
			pclose(in);
			unlink(path);
			skip_because("%s is older than 3.11, whose line table this reads", PYTHON);
		}
		assert_non_null(hex);
		for (; hex[2 * n] && n < sizeof(table); n++)
			assert_int_equal(sscanf(hex + 2 * n, "%2hhx", &table[n]), 1);
		co.firstlineno = atoi(first);
		co.linetable = table;
		co.linetable_len = n;
		while ((pair = strtok_r(NULL, " \n", &save))) {
			unsigned idx;
			int want;

			assert_int_equal(sscanf(pair, "%u:%d", &idx, &want), 2);
			if (pycode_line(&co, idx) != want && !wrong++)
				snprintf(first_wrong, sizeof(first_wrong), "code object at line %d, instruction %u: line %d, CPython says %d",
					 co.firstlineno, idx, pycode_line(&co, idx), want);
			checked++;
			far += want > 300;
		}
		objects++;
	}
	free(line);
	assert_int_equal(pclose(in), 0);
	unlink(path);
	if (wrong)
		fail_msg("%zu of %zu instructions on the wrong line; the first: %s", wrong, checked, first_wrong);
	/* The module, short, far, K, K.m and its comprehension, each instruction of each. */
	assert_true(objects >= 6);
	assert_true(checked > 60);
	assert_true(far > 10); /* after the long-form jump */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_cpython),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
