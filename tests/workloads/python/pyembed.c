/* pyembed.c: CPython through the shared libpython (libpython3.11.so), running Python code
 * that calls into libc through libpython's PLT for S seconds: the PLT workload of issue 8.
 * Usage: pyembed [SECONDS]   (default 10) */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>

static const char code[] =
	"import time\n"
	"end = time.monotonic() + secs\n"
	"n = 0\n"
	"while time.monotonic() < end:\n"
	"    s = 'prowl' * 4000\n"
	"    b = s.encode() + bytes(2000)\n"
	"    d = {str(i): b[i:i + 64] for i in range(300)}\n"
	"    n += len(d) + b.count(b'w')\n"
	"print('units', n)\n";

int main(int argc, char **argv)
{
	char setup[64];
	int r;

	Py_Initialize();
	snprintf(setup, sizeof(setup), "secs = %d\n", argc > 1 ? atoi(argv[1]) : 10);
	r = PyRun_SimpleString(setup) || PyRun_SimpleString(code);
	return Py_FinalizeEx() < 0 || r ? 1 : 0;
}
