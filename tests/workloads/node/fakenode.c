/* fakenode.c: a forged node for prowl's hostile-input tests: it exports V8's v8dbg_ constants
 * (Node 20's, from tests/unit/data/v8dbg_fixture.c; -DFP_FUNCTION=13 forges one) and spins in a
 * "builtin" whose frame holds a forged JSFunction (-DNO_BUILTINS: without the builtins'
 * symbols, found as code of the binary without CFI), as MODE says:
 *   heap   a function whose name holds a newline and ';', whose script's name is a cons
 *          string that is its own first half, with a source position table of garbage
 *   flip   the function's name and script words change all the time (a moving collector)
 *   nometa no function in the frame (with -DFP_FUNCTION=13: the metadata is refused)
 * Usage: fakenode MODE SECONDS */
/* BUILD: -O1 -g -rdynamic -fno-common -fno-toplevel-reorder -pthread */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../unit/data/v8dbg_fixture.c"
#include "../../unit/v8forge.h"

/* The frame V8's builtins build: fp, then the context and function slots (Node 20:
 * fp-8, fp-16), then the bytecode array and offset (fp-32, fp-40). Never returns. */
#ifdef NO_BUILTINS /* a binary whose builtins' symbols were stripped: a local name */
#define SPIN "fake_spin"
#define SPIN_BIND ".local"
#else
#define SPIN "Builtins_FakeSpin"
#define SPIN_BIND ".globl"
#endif
void fake_spin(uint64_t ctx, uint64_t fn, uint64_t pad, uint64_t ba, uint64_t off) __asm__(SPIN);
__asm__(".text\n" SPIN_BIND " " SPIN "\n.type " SPIN ",@function\n"
	SPIN ":\n"
	"	push %rbp\n	mov %rsp, %rbp\n"
	"	push %rdi\n	push %rsi\n	push %rdx\n	push %rcx\n	push %r8\n"
	"1:	pause\n	jmp 1b\n"
	".size " SPIN ", .-" SPIN "\n");

static uint64_t heap[4096] __attribute__((aligned(64)));

static struct v8forge forge = { heap, 0 };

#define TAG(i) v8forge_tag(&forge, i)
#define SMI(v) v8forge_smi(v)
#define map(i, type) v8forge_map(&forge, i, type)
#define seq_string(i, map_i, s) v8forge_string(&forge, i, map_i, s)

enum { M_FN = 0, M_SFI = 4, M_STR = 8, M_SCRIPT = 12, M_CONS = 16, M_BA = 20, M_BYTES = 24, M_CTX = 28,
       FN = 100, SFI = 200, NAME = 300, NAME2 = 340, SCRIPT = 400, CONS = 500, BA = 600, TAB = 700, CTX = 800 };

static void *flipper(void *arg)
{
	(void)arg;
	for (uint64_t n = 0;; n++) {
		heap[SFI + 2] = n & 1 ? TAG(NAME2) : TAG(NAME);
		heap[SFI + 4] = n & 2 ? TAG(CONS) : TAG(SCRIPT);
	}
	return NULL;
}

static void *timer(void *arg)
{
	sleep((unsigned int)(uintptr_t)arg);
	exit(0);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "heap";
	pthread_t t;

	forge.base = (uint64_t)(uintptr_t)heap;

	map(M_FN, (uint16_t)v8dbg_type_JSFunction__JS_FUNCTION_TYPE);
	map(M_SFI, (uint16_t)v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE);
	map(M_STR, 8);   /* a one-byte sequential string */
	map(M_SCRIPT, (uint16_t)v8dbg_type_Script__SCRIPT_TYPE);
	map(M_CONS, 41); /* a one-byte cons string */
	map(M_BA, (uint16_t)v8dbg_type_BytecodeArray__BYTECODE_ARRAY_TYPE);
	map(M_BYTES, (uint16_t)v8dbg_type_ByteArray__BYTE_ARRAY_TYPE);
	map(M_CTX, 1);
	heap[CTX] = TAG(M_CTX);
	heap[FN] = TAG(M_FN);
	heap[FN + 3] = TAG(SFI); /* JSFunction::shared, at 24 */
	heap[SFI] = TAG(M_SFI);
	heap[SFI + 1] = TAG(BA);     /* function_data, at 8 */
	heap[SFI + 2] = TAG(NAME);   /* name_or_scope_info, at 16 */
	heap[SFI + 4] = TAG(SCRIPT); /* script_or_debug_info, at 32 */
	seq_string(NAME, M_STR, "evil\nname;injected");
	seq_string(NAME2, M_STR, "other");
	heap[SCRIPT] = TAG(M_SCRIPT);
	heap[SCRIPT + 1] = TAG(CONS); /* source: the looping cons string */
	heap[SCRIPT + 2] = TAG(CONS); /* name, at 16 */
	heap[SCRIPT + 7] = SMI(0);    /* line_ends: not made */
	heap[CONS] = TAG(M_CONS);
	heap[CONS + 2] = TAG(CONS);   /* first, at 16: itself */
	heap[CONS + 3] = TAG(CONS);
	heap[BA] = TAG(M_BA);
	heap[BA + 4] = TAG(TAB);      /* the source position table, at 32 */
	heap[TAB] = TAG(M_BYTES);
	heap[TAB + 1] = SMI(64);
	memset(&heap[TAB + 2], 0xff, 64); /* VLQs that never end */
	pthread_create(&t, NULL, timer, (void *)(uintptr_t)(argc > 2 ? atoi(argv[2]) : 60));
	if (strcmp(mode, "flip") == 0)
		pthread_create(&t, NULL, flipper, NULL);
	printf("ready\n");
	fflush(stdout);
	if (strcmp(mode, "nometa") == 0)
		fake_spin(SMI(2), 0, 0, 0, 0); /* a frame type marker: no function */
	fake_spin(TAG(CTX), TAG(FN), 0, TAG(BA), SMI(60));
	return 0;
}
