/* second.c: the second source file of libtrunc.so (see trunc_attack.c): the code that
 * runs after the library file is truncated, whose debug info prowl has not read yet. */
#include <stdint.h>

static volatile uint64_t sink;

/* 256 functions before the hot ones: their debug info puts the hot ones' DIEs and
 * line rows several pages past the end of the file as truncated (a page that the
 * new end of file only cuts reads as zeros; pages wholly past it fault). */
#define PAD1(n) uint64_t trunc_second_padding_function_##n(uint64_t x) { return x * n + (x >> 3); }
#define PAD4(n) PAD1(n##0) PAD1(n##1) PAD1(n##2) PAD1(n##3)
#define PAD16(n) PAD4(n##0) PAD4(n##1) PAD4(n##2) PAD4(n##3)
#define PAD64(n) PAD16(n##0) PAD16(n##1) PAD16(n##2) PAD16(n##3)
PAD64(1) PAD64(2) PAD64(3) PAD64(4)

__attribute__((noinline)) uint64_t trunc_second_inner(uint64_t x)
{
	for (int i = 0; i < 20000; i++)
		x = (x ^ (x >> 31)) * 0x94d049bb133111ebull + (uint64_t)i;
	return x;
}

__attribute__((noinline)) void trunc_second_work(int rounds)
{
	uint64_t x = sink;

	for (int i = 0; i < rounds; i++)
		x = trunc_second_inner(x);
	sink = x;
}
