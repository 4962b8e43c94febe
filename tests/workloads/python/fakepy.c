/* fakepy.c: a forged CPython 3.11 for the hostile-input tests of issue 12: exports
 * _PyRuntime, Py_Version and the type objects, and spins in a function named
 * _PyEval_EvalFrameDefault while its "interpreter" holds what MODE says:
 *   garbled   a frame whose code object does not have PyCode_Type as its type
 *   cycle     a frame that is its own previous frame (an endless stack), named loop_fn
 *   teardown  no interpreter (as while the runtime is being finalised)
 * Usage: fakepy MODE SECONDS   Build: cc -O1 -g -rdynamic (see the Makefile) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* What prowl reads, at CPython 3.11's offsets (symbolizer/python/pyversions.c). */
const unsigned int Py_Version = 0x030b02f0;
char _PyRuntime[1024];
char PyCode_Type[416], PyUnicode_Type[416], PyBytes_Type[416];

static char interp[64], tstate[256], cframe[16], frame[80] __attribute__((aligned(8)));
static char code[256] __attribute__((aligned(8)));
static char name[64] __attribute__((aligned(8))), file[64] __attribute__((aligned(8)));

static void put(char *base, size_t off, uint64_t v)
{
	memcpy(base + off, &v, sizeof(v));
}

/* A compact ASCII str object as 3.11 lays it out (PyASCIIObject, 48 bytes, then the text). */
static void make_str(char *o, const char *text)
{
	uint32_t state = 1u << 2 | 1u << 5 | 1u << 6 | 1u << 7; /* kind 1, compact, ascii, ready */

	put(o, 0, 1);
	put(o, 8, (uintptr_t)PyUnicode_Type);
	put(o, 16, strlen(text));
	memcpy(o + 32, &state, sizeof(state));
	strcpy(o + 48, text);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) double _PyEval_EvalFrameDefault(double end)
{
	volatile double x = 0;

	while (now() < end)
		x += 1;
	return x;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "garbled";
	double secs = argc > 2 ? atof(argv[2]) : 5;
	int32_t first = 7;

	put(_PyRuntime, 40, (uintptr_t)interp);                /* interpreters.head */
	put(interp, 16, (uintptr_t)tstate);                     /* threads.head */
	put(tstate, 160, (uint64_t)gettid());                   /* native_thread_id */
	put(tstate, 56, (uintptr_t)cframe);                     /* cframe */
	put(cframe, 8, (uintptr_t)frame);                       /* current_frame */
	put(frame, 32, (uintptr_t)code);                        /* f_code */
	put(frame, 56, (uintptr_t)(code + 184 + 10));           /* prev_instr */
	frame[68] = 1;                                          /* is_entry */
	memcpy(code + 72, &first, sizeof(first));               /* co_firstlineno */
	make_str(name, "loop_fn");
	make_str(file, "/forged/fake.py");
	put(code, 112, (uintptr_t)file);
	put(code, 120, (uintptr_t)name);
	put(code, 128, (uintptr_t)name);
	if (strcmp(mode, "garbled") == 0) {
		put(code, 8, (uintptr_t)PyBytes_Type);          /* not a code object */
	} else if (strcmp(mode, "cycle") == 0) {
		put(code, 8, (uintptr_t)PyCode_Type);
		put(frame, 48, (uintptr_t)frame);               /* previous: itself */
		frame[68] = 0;
	} else if (strcmp(mode, "teardown") == 0) {
		put(_PyRuntime, 40, 0);
	} else {
		return 2;
	}
	_PyEval_EvalFrameDefault(now() + secs);
	return 0;
}
